"""`kbz finetune`'s per-task defaults (epochs, batch size, learning rate, warmup, sequence
length): one table for the command line and `run_finetune`, shown in `--help`, recorded in
the run's settings, and (slow) learning on a bundled real-data sample from the real MiniLM."""

import json
from pathlib import Path

import pytest
from conftest import save_tiny_preset

from keras_bert_zoo.choices import FINETUNE_DEFAULTS
from keras_bert_zoo.cli import build_parser, main
from keras_bert_zoo.cli.finetune_flags import FLAGS, resolve
from keras_bert_zoo.cli.task_flags import FINETUNE_TASKS
from keras_bert_zoo.finetuning import task_training
from keras_bert_zoo.training import create_optimizer

DATA = Path(__file__).parent / "data"
EXAMPLES = Path(__file__).parents[1] / "examples" / "data"


def _parse(task, *flags):
    base = ["finetune", task, "--preset", "p", "--train", "t", "--validation", "v"]
    return resolve(build_parser().parse_args([*base, "--output", "o", *flags]))


@pytest.mark.parametrize("task", sorted(FINETUNE_TASKS))
def test_each_task_takes_its_own_defaults_and_explicit_flags_win(task):
    defaults = FINETUNE_DEFAULTS[FINETUNE_TASKS[task]]
    assert set(defaults) == set(FLAGS)
    args = _parse(task)
    assert {name: getattr(args, name) for name in FLAGS} == defaults
    args = _parse(task, "--learning-rate", "3e-5", "--epochs", "7")
    assert (args.learning_rate, args.epochs, args.batch_size) == (3e-5, 7, defaults["batch_size"])


@pytest.mark.parametrize("task", sorted(FINETUNE_TASKS))
def test_each_tasks_help_lists_its_own_defaults_and_flags_only(task, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["finetune", task, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in FLAGS:
        value = FINETUNE_DEFAULTS[FINETUNE_TASKS[task]][name]
        assert f"--{name.replace('_', '-')}" in text and f"(default: {value:g}" in text, name
    only = {"classify": "--text-columns", "qa": "--doc-stride", "embed": "--scale"}
    for other, flag in only.items():
        assert (flag in text) == (other == task), flag


def test_a_run_records_its_resolved_defaults(tmp_path, caplog, monkeypatch):
    # Left out or given with the default's value: the same run (it says "already complete").
    decays = []  # what the job hands the optimizer
    monkeypatch.setattr(
        task_training,  # the task models' default compile, which kbz finetune runs
        "create_optimizer",
        lambda *a, **k: decays.append(k["weight_decay"]) or create_optimizer(*a, **k),
    )
    preset = save_tiny_preset(tmp_path / "tiny")
    command = ["finetune", "tag", "--preset", str(preset), "--output", str(tmp_path / "run")]
    command += ["--train", str(DATA / "finetune" / "wnut17_train_head.conll")]
    command += ["--validation", str(DATA / "finetune" / "wnut17_dev_head.conll")]
    command += ["--epochs", "1", "--sequence-length", "32", "--no-export", "--no-jit-compile"]
    assert main(command) == 0
    settings = json.loads((tmp_path / "run" / "run.json").read_text())["settings"]
    defaults = FINETUNE_DEFAULTS["tagger"]
    for name in ("learning_rate", "batch_size", "warmup_fraction"):
        assert settings[name] == defaults[name], name
    assert settings["weight_decay"] == 0.01 and decays == [0.01]  # BERT's
    explicit = ["--learning-rate", "1e-4", "--batch-size", "16", "--warmup-fraction", "0.1"]
    assert main([*command, *explicit, "--weight-decay", "0.01"]) == 0
    assert "already complete" in caplog.text
    assert main([*command, "--learning-rate", "5e-5"]) == 2  # another run: refused
    # transformers' Trainer default: another run, and the optimizer gets it
    assert main([*command, "--weight-decay", "0", "--overwrite"]) == 0
    assert decays == [0.01, 0.0]
    settings = json.loads((tmp_path / "run" / "run.json").read_text())["settings"]
    assert settings["weight_decay"] == 0.0


@pytest.mark.slow
def test_the_tagger_defaults_learn_wnut17_from_minilm(minilm_preset, tmp_path):
    # The previous defaults (lr 2e-5, batch 32) tagged every word O (F1 0.0). These learn:
    # entity F1 on the 300 dev sentences 0.2979 / 0.3709 / 0.3476 for seeds 0 / 1 / 2
    # (2026-11-26; RESULTS.md, "Outcome parity at short recipes"). The bar sits below that
    # seed spread and far above 0.0: the bar of 0.3 first set from one run (0.367) was inside
    # the spread, and seed 0 missed it by 0.002.
    command = ["finetune", "tag", "--preset", str(minilm_preset), "--output", str(tmp_path)]
    command += ["--train", str(EXAMPLES / "wnut17_train_sample.conll")]
    command += ["--validation", str(EXAMPLES / "wnut17_dev_sample.conll"), "--no-export"]
    assert main([*command, "--overwrite"]) == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["f1"] > 0.25, metrics
