"""One registry of tasks: the light specs (`tasks.registry`) and the behaviours (`finetuning`)
name the same tasks, and everything that varies by task is read from them."""

import argparse
import dataclasses

import pytest

from keras_bert_zoo.cli import build_parser
from keras_bert_zoo.cli.task_flags import FINETUNE_TASKS, PREDICT_TASKS
from keras_bert_zoo.tasks import registry
from keras_bert_zoo.tasks.registry import SPECS
from keras_bert_zoo.tasks.registry import for_cli as spec_for_cli
from keras_bert_zoo.tasks.tagger.spec import TAGGER


def _subparser(parser, *names):
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def test_behaviours_and_specs_name_the_same_tasks():
    from keras_bert_zoo.tasks.models import FINETUNING_TASKS

    assert set(FINETUNING_TASKS) == set(FINETUNE_TASKS.values())
    assert set(SPECS) == set(FINETUNING_TASKS)  # one engine for all, the embedder included
    for name, task in FINETUNING_TASKS.items():
        assert task.spec is SPECS[name]


def test_a_task_streams_predictions_where_its_spec_says_so():
    # `spec.streams` gives `kbz predict` its --window flag (Keras-free); the behaviour streams
    from keras_bert_zoo.finetuning.common import FinetuningTask
    from keras_bert_zoo.tasks.models import FINETUNING_TASKS

    for name, task in FINETUNING_TASKS.items():
        for method in ("streams", "stream_predictions"):
            own = getattr(task, method) is not getattr(FinetuningTask, method)
            assert own == task.spec.streams, (name, method)


def test_behaviour_defaults_are_the_specs_defaults():
    from keras_bert_zoo.tasks.models import FINETUNING_TASKS

    for task in FINETUNING_TASKS.values():
        fields = {f.name: f.default for f in dataclasses.fields(task)}
        for option in task.spec.options:
            assert fields[option.name] == option.default, (task.spec.name, option.name)
        assert set(fields) == {"preprocessor", *(o.name for o in task.spec.options)}


def test_every_task_has_a_builder_a_serving_function_and_unique_names():
    from keras_bert_zoo.export.serving import SERVING
    from keras_bert_zoo.tasks import TASKS

    assert set(SPECS) <= set(TASKS) and {s.serving for s in SPECS.values()} <= set(SERVING)
    cli_names = [n for s in SPECS.values() for n in (s.cli_name, *s.aliases)]
    assert len(cli_names) == len(set(cli_names))
    for spec in SPECS.values():
        assert set(spec.defaults) == {
            "learning_rate",
            "batch_size",
            "epochs",
            "warmup_fraction",
            "sequence_length",
        }
        assert spec_for_cli(spec.cli_name) is spec
    with pytest.raises(ValueError, match="Unknown task 'nope'. Expected one of"):
        spec_for_cli("nope")


@pytest.mark.parametrize("command", ["finetune", "predict"])
def test_every_flag_of_every_task_says_its_default(command):
    tasks = FINETUNE_TASKS if command == "finetune" else PREDICT_TASKS
    assert ("embed" in tasks) == (command == "finetune")  # no `kbz predict embed`
    for cli_name in tasks:
        parser = _subparser(build_parser(), command, cli_name)
        for action in parser._actions:
            if action.required or isinstance(action, argparse._HelpAction):
                continue
            assert action.help and "default" in action.help, (cli_name, action.option_strings)


def test_task_flags_come_from_the_spec_and_predict_reuses_the_runs():
    parser = build_parser()
    base = ["--preset", "p", "--train", "t", "--validation", "v", "--output", "o"]
    args = parser.parse_args(["finetune", "classify", *base, "--text-columns", "q,s"])
    assert (args.text_columns, args.label_column, args.regression) == (("q", "s"), "label", False)
    args = parser.parse_args(["finetune", "classify", *base])
    assert args.text_columns == ("sentence",)
    args = parser.parse_args(["predict", "qa", "--model", "m", "--input", "i", "--output", "o"])
    assert (args.doc_stride, args.max_query_length) == (None, None)  # the run's
    assert (args.n_best_size, args.max_answer_length) == (20, 30)
    assert not hasattr(args, "regression")  # read from the run, never a predict flag


def test_an_alias_runs_its_task(monkeypatch):
    monkeypatch.setitem(SPECS, "tagger", dataclasses.replace(TAGGER, aliases=("ner",)))
    base = ["--preset", "p", "--train", "t", "--validation", "v", "--output", "o"]
    args = build_parser().parse_args(["finetune", "ner", *base])
    assert args.task == "tag" and registry.for_cli("ner").name == "tagger"


def test_register_refuses_names_taken_and_get_lists_the_known():
    with pytest.raises(ValueError, match="registered already"):
        registry.register(dataclasses.replace(TAGGER, cli_name="tag2"))  # its name is taken
    with pytest.raises(ValueError, match=r"command-line names \['tag'\]"):
        registry.register(dataclasses.replace(TAGGER, name="tagger2"))
    with pytest.raises(ValueError, match=r"Unknown task 'nope'. Expected one of \['classifier'"):
        registry.get("nope")
    assert registry.get("tagger") is TAGGER and registry.find("encoder") is None
    assert set(registry.names()) == set(SPECS) and "tagger2" not in SPECS


def test_the_built_in_models_are_the_registered_tasks():
    from keras_bert_zoo.tasks.models import TASK_MODELS

    assert set(TASK_MODELS) == set(SPECS)
    for name, model in TASK_MODELS.items():
        assert model.behaviour.spec is registry.get(name) and model.task_name == name
