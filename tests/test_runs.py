"""The training jobs (`kbz finetune`, `kbz pretrain`) on tiny models and real data samples:
outputs written, metrics computed, exact resume after an interruption, NaN handling."""

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main
from keras_bert_zoo.training import runs

DATA = Path(__file__).parent / "data"
VOCABULARY = kbz.presets.builtin_presets_dir() / "vocab" / "uncased.txt"


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory):
    """A 1-layer random BERT on the real uncased vocabulary, as a preset directory."""
    keras.utils.set_random_seed(0)
    encoder = kbz.build_encoder(
        vocabulary_size=30522,
        num_layers=1,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=128,
    )
    directory = tmp_path_factory.mktemp("tiny") / "preset"
    return kbz.save_preset(encoder, directory, vocabulary=VOCABULARY, lowercase=True)


def _lines(source: Path, destination: Path, count: int) -> Path:
    destination.write_text("".join(source.read_text().splitlines(True)[:count]))
    return destination


@pytest.mark.parametrize(
    "task, train, validation, keys",
    [
        ("classify", "sst2_train_head.tsv", "sst2_train_head.tsv", {"accuracy", "f1"}),
        ("tag", "wnut17_train_head.conll", "wnut17_dev_head.conll", {"precision", "recall", "f1"}),
        ("qa", "squad_v1.1_sample.json", "squad_v1.1_sample.json", {"exact_match", "f1"}),
    ],
)
def test_finetune_cli_writes_everything(tiny_preset, tmp_path, task, train, validation, keys):
    train_path = DATA / "finetune" / train
    if task == "classify":
        train_path = _lines(train_path, tmp_path / "train.tsv", 65)
    output = tmp_path / "out"
    status = main(
        [
            "finetune",
            task,
            "--preset",
            str(tiny_preset),
            "--train",
            str(train_path),
            "--validation",
            str(DATA / "finetune" / validation),
            "--output",
            str(output),
            "--epochs",
            "1",
            "--batch-size",
            "16",
            "--sequence-length",
            "64" if task != "qa" else "96",
            "--learning-rate",
            "1e-3",
        ]
    )
    assert status == 0
    metrics = json.loads((output / "metrics.json").read_text())
    assert set(metrics) == keys and all(np.isfinite(list(metrics.values())))
    assert (output / "model.keras").is_file() and (
        output / "export" / "1" / "saved_model.pb"
    ).is_file()
    task_name = {"classify": "classifier", "tag": "tagger", "qa": "question_answerer"}[task]
    restored = kbz.from_preset(str(output / "preset"), task=task_name)
    reloaded = keras.models.load_model(output / "model.keras", safe_mode=True)
    x = {
        "token_ids": np.full((2, 16), 1000, "int32"),
        "segment_ids": np.zeros((2, 16), "int32"),
        "padding_mask": np.ones((2, 16), "int32"),
    }
    for a, b in zip(keras.tree.flatten(restored(x)), keras.tree.flatten(reloaded(x)), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)


def _pretrain(output, **overrides):
    arguments = dict(
        text_file=str(DATA / "pretraining" / "sentences.txt"),
        from_scratch=True,
        num_train_steps=6,
        batch_size=4,
        max_seq_length=32,
        max_predictions_per_seq=5,
        checkpoint_every=2,
        learning_rate=1e-3,
        verbose=0,
    )
    arguments.update(overrides)
    return runs.run_pretrain("bert_tiny_en_uncased", str(output), **arguments)


class _Kill(keras.callbacks.Callback):
    """Stands for a crash: raises after `step` optimizer steps."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations) == self.step:
            raise KeyboardInterrupt("killed")


def test_interrupted_pretraining_resumes_to_the_same_weights(tmp_path, monkeypatch):
    _pretrain(tmp_path / "straight")
    monkeypatch.setattr(runs, "_tensorboard", lambda output: _Kill(step=3))
    with pytest.raises(KeyboardInterrupt):
        _pretrain(tmp_path / "interrupted")
    state = json.loads((tmp_path / "interrupted" / "checkpoints" / "state.json").read_text())
    assert state["interval"] == 1  # the step-2 checkpoint; step 3 was lost with the crash
    monkeypatch.undo()
    _pretrain(tmp_path / "interrupted")  # the same command again
    straight = load_file(tmp_path / "straight" / "preset" / "model.weights.safetensors")
    resumed = load_file(tmp_path / "interrupted" / "preset" / "model.weights.safetensors")
    assert straight.keys() == resumed.keys()
    for name in straight:
        np.testing.assert_allclose(resumed[name], straight[name], atol=1e-6, err_msg=name)


def test_nan_loss_stops_with_a_clear_error_and_keeps_the_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="NaN or Inf.*last good checkpoint"):
        _pretrain(tmp_path / "nan", learning_rate=1e12, num_train_steps=8)
    state = tmp_path / "nan" / "checkpoints" / "state.json"
    if state.exists():  # whatever was written is a complete, finite checkpoint
        name = json.loads(state.read_text())["weights"]
        assert (tmp_path / "nan" / "checkpoints" / name).is_file()


def _weights(output):
    return load_file(output / "preset" / "model.weights.safetensors")


def test_a_shorter_last_interval_trains_exactly_the_steps_of_one_straight_run(tmp_path):
    # 5 steps in intervals of 2, 2 and 1 equal 5 steps in one interval: same data order,
    # dropout masks and learning-rate schedule (which reaches zero on the last step).
    _pretrain(tmp_path / "intervals", num_train_steps=5, checkpoint_every=2)
    _pretrain(tmp_path / "straight", num_train_steps=5, checkpoint_every=5)
    state = json.loads((tmp_path / "intervals" / "checkpoints" / "state.json").read_text())
    assert state["interval"] == 3
    straight, intervals = _weights(tmp_path / "straight"), _weights(tmp_path / "intervals")
    for name in straight:
        np.testing.assert_allclose(intervals[name], straight[name], atol=1e-6, err_msg=name)


def test_an_interval_longer_than_the_run_is_an_error_before_any_work(tmp_path):
    with pytest.raises(
        ValueError,
        match=r"interval \(5 steps\) is longer than "
        r"--num-train-steps 4 \(4 steps\).*--checkpoint-every 4",
    ):
        _pretrain(tmp_path / "bad", num_train_steps=4, checkpoint_every=5)
    assert not (tmp_path / "bad").exists()


def test_finetune_with_an_interval_longer_than_the_run_stops_before_training(
    tiny_preset, tmp_path, capsys
):
    train = _lines(DATA / "finetune" / "sst2_train_head.tsv", tmp_path / "train.tsv", 65)
    status = main(
        [
            "finetune",
            "classify",
            "--preset",
            str(tiny_preset),
            "--train",
            str(train),
            "--validation",
            str(train),
            "--output",
            str(tmp_path / "out"),
            "--epochs",
            "2",
            "--batch-size",
            "16",
            "--sequence-length",
            "32",
            "--checkpoint-every",
            "100",
        ]
    )
    error = capsys.readouterr().err
    assert status == 2 and "(100 steps) is longer than the run (2 epochs of 4 steps)" in error
    assert "--checkpoint-every 8 or less" in error and not (tmp_path / "out").exists()


def _pretrain_command(output):
    return [
        sys.executable,
        "-m",
        "keras_bert_zoo.cli",
        "pretrain",
        "--preset",
        "bert_tiny_en_uncased",
        "--from-scratch",
        "--text-file",
        str(DATA / "pretraining" / "sentences.txt"),
        "--output",
        str(output),
        "--num-train-steps",
        "12",
        "--checkpoint-every",
        "3",
        "--batch-size",
        "4",
        "--max-seq-length",
        "32",
        "--max-predictions-per-seq",
        "5",
        "--learning-rate",
        "1e-3",
    ]


def test_sigkill_at_a_random_moment_then_same_command_resumes_exactly(tmp_path):
    """A real `kill -9` of `kbz pretrain` after its first checkpoint, at a seeded random
    delay, then the same command: the final weights equal an uninterrupted run's."""
    subprocess.run(_pretrain_command(tmp_path / "straight"), check=True, capture_output=True)
    output = tmp_path / "killed"
    process = subprocess.Popen(
        _pretrain_command(output), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    state = output / "checkpoints" / "state.json"
    deadline = time.monotonic() + 300
    while not state.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(random.Random(7).uniform(0.0, 1.5))
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (output / "preset").exists(), "the run finished before it could be killed"
    subprocess.run(_pretrain_command(output), check=True, capture_output=True)
    straight = load_file(tmp_path / "straight" / "preset" / "model.weights.safetensors")
    resumed = load_file(output / "preset" / "model.weights.safetensors")
    for name in straight:
        np.testing.assert_allclose(resumed[name], straight[name], atol=1e-6, err_msg=name)
