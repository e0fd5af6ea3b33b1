"""Run settings as frozen dataclasses (`jobs.config`): one place for a flag's name, type,
default and help; `identity()` says what defines a run, the rest only how it executes."""

import argparse
import dataclasses
import json

import pytest

from keras_bert_zoo.cli import build_parser
from keras_bert_zoo.cli.config_flags import config_from_args
from keras_bert_zoo.jobs.config import FinetuneConfig, PretrainConfig
from keras_bert_zoo.jobs.rundir import RunDirectory
from keras_bert_zoo.tasks.embedder.spec import EMBEDDER
from keras_bert_zoo.tasks.question_answerer.spec import QUESTION_ANSWERER

BASE = ["--preset", "p", "--train", "t", "--validation", "v", "--output", "o"]


def _subparser(*names):
    parser = build_parser()
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def test_a_config_takes_its_tasks_defaults_and_is_frozen():
    config = FinetuneConfig("question_answerer", "p", "t", "v", "o", epochs=1)
    expected = {**QUESTION_ANSWERER.defaults, "epochs": 1}
    assert {name: getattr(config, name) for name in expected} == expected
    assert FinetuneConfig("tagger", "p", "t", "v", "o", lora_rank=4).learning_rate == 5e-4
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.epochs = 3


def test_identity_leaves_out_how_a_run_executes():
    config = FinetuneConfig("classifier", "p", "t", "v", "o", task_options={"text_columns": ("a",)})
    settings, identity = config.settings(), config.identity()
    assert settings["text_columns"] == ["a"] and "task_options" not in settings  # flat, JSON
    assert "output" not in settings and "overwrite" not in settings
    execution = set(settings) - set(identity)
    assert execution == {
        "jit_compile", "strategy", "tpu", "verbose", "keep_checkpoints",
        "checkpoint_every_minutes", "export",
    }  # fmt: skip
    again = dataclasses.replace(config, jit_compile=False, strategy="mirrored", verbose=0)
    assert again.identity() == identity and again.settings() != settings
    assert dataclasses.replace(config, seed=1).identity() != identity


def test_the_embedder_is_a_finetune_config_with_every_engine_flag():
    """`kbz finetune embed` runs through `jobs.finetune` (issue 29): its flags become a
    `FinetuneConfig` with the embedder's defaults, `--scale` a task option recorded flat, and
    the engine's settings (strategy, precision, keep, checkpoints) taken, no longer refused."""
    flags = ["--strategy", "mirrored", "--mixed-precision", "mixed_bfloat16", "--keep", "last"]
    flags += ["--checkpoint-every", "3", "--scale", "10"]
    args = build_parser().parse_args(["finetune", "embed", *BASE, *flags])
    args.jit_compile = True  # the backend's default, resolved before a command runs
    config = config_from_args(FinetuneConfig, args, task="embedder", task_options={"scale": 10.0})
    assert {name: getattr(config, name) for name in EMBEDDER.defaults} == EMBEDDER.defaults
    assert (config.strategy, config.mixed_precision, config.keep) == (
        "mirrored",
        "mixed_bfloat16",
        "last",
    )
    identity = config.identity()
    assert identity["scale"] == 10.0 and identity["checkpoint_every"] == 3
    assert {"mixed_precision", "keep", "bucketing"} <= set(identity) and "strategy" not in identity


def test_a_run_of_the_former_embed_engine_is_another_run(tmp_path):
    """A `finetune_embed` run directory (the embedder's own engine before issue 29) trained
    other batches without checkpoints: the engine of every task names the difference."""
    record = {"command": "finetune_embed", "settings": {}, "inputs": {}, "status": "complete"}
    (tmp_path / "run.json").write_text(json.dumps(record))
    config = FinetuneConfig("embedder", "p", "t", "v", str(tmp_path))
    with pytest.raises(ValueError, match="command: was finetune_embed, now finetune.*--overwrite"):
        RunDirectory(tmp_path, "finetune", config, {}).__enter__()


def test_a_run_directory_resumes_across_execution_settings_only(tmp_path):
    config = PretrainConfig("p", str(tmp_path), num_train_steps=4)
    with RunDirectory(tmp_path, "pretrain", config, {}) as run:
        run.complete({"loss": 1.0})
    quicker = dataclasses.replace(config, jit_compile=False, keep_checkpoints=1)
    with RunDirectory(tmp_path, "pretrain", quicker, {}) as run:
        assert run.finished == {"loss": 1.0}
    longer = dataclasses.replace(config, num_train_steps=6)
    with pytest.raises(ValueError, match="num_train_steps: was 4, now 6"):
        RunDirectory(tmp_path, "pretrain", longer, {}).__enter__()


@pytest.mark.parametrize(
    ("command", "config", "skip"),
    [
        (("finetune", "classify"), FinetuneConfig, {"task", "verbose", "task_options"}),
        (("finetune", "embed"), FinetuneConfig, {"task", "verbose", "task_options"}),
        (("pretrain",), PretrainConfig, {"verbose"}),
    ],
)
def test_every_field_is_a_flag_with_the_fields_help(command, config, skip):
    actions = {a.dest: a for a in _subparser(*command)._actions}
    for field in dataclasses.fields(config):
        if field.name in skip:
            continue
        assert field.name in actions, field.name
        if field.name not in ("train", "validation"):  # the task's file, in its words
            assert actions[field.name].help.startswith(field.metadata["help"]), field.name


def test_flags_become_the_config_the_job_runs():
    args = build_parser().parse_args(["finetune", "tag", *BASE, "--epochs", "1", "--no-export"])
    args.jit_compile = True  # the backend's default, resolved before a command runs
    config = config_from_args(FinetuneConfig, args, task="tagger")
    assert (config.task, config.epochs, config.export, config.batch_size) == (
        "tagger",
        1,
        False,
        16,
    )
    assert config.verbose == "auto"  # `kbz -v` is logging, never Keras' progress
    args = build_parser().parse_args(["pretrain", "--preset", "p", "--output", "o"])
    args.jit_compile = True
    assert config_from_args(PretrainConfig, args) == PretrainConfig("p", "o")


def test_a_run_recorded_before_a_setting_existed_ran_with_its_default(tmp_path):
    """`--weight-decay` came after runs had recorded their settings without it: such a run is
    the same run at the default (0.01, what it trained with), another run at another value."""
    config = FinetuneConfig("classifier", "p", "t", "v", str(tmp_path), epochs=1)
    settings = config.settings()
    del settings["weight_decay"]
    record = {"command": "finetune", "settings": settings, "inputs": {}, "status": "complete"}
    (tmp_path / "run.json").write_text(json.dumps({**record, "metrics": {"accuracy": 0.5}}))
    with RunDirectory(tmp_path, "finetune", config, {}) as run:
        assert run.finished == {"accuracy": 0.5}
    other = dataclasses.replace(config, weight_decay=0.0)
    with pytest.raises(ValueError, match=r"weight_decay: was 0\.01, now 0\.0\b"):
        RunDirectory(tmp_path, "finetune", other, {}).__enter__()
