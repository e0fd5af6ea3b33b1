"""Faults during `kbz pretrain` and exact resume: timed checkpoints (`--checkpoint-every-
minutes`) and several `kill -9` per run, at random moments and during checkpoint writes,
with TFRecord input; the same command then ends with an uninterrupted run's weights."""

import itertools
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
from conftest import Kill, powers_of_two_buckets
from safetensors.numpy import load_file

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main
from keras_bert_zoo.jobs import pretrain as pretrain_runs
from keras_bert_zoo.presets import builtin_presets_dir
from keras_bert_zoo.training import checkpoint_files

DATA = Path(__file__).parent / "data" / "pretraining"
FINETUNE = Path(__file__).parent / "data" / "finetune"


def kbz_build_encoder():
    """A 1-layer random BERT on the real uncased vocabulary."""
    return kbz.build_encoder(
        vocabulary_size=30522,
        num_layers=1,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=128,
    )


def kbz_save_preset(encoder, directory):
    vocabulary = builtin_presets_dir() / "vocab" / "uncased.txt"
    return kbz.save_preset(encoder, directory, vocabulary=vocabulary, lowercase=True)


def _pretrain(output, **overrides):
    arguments = dict(
        text_file=str(DATA / "sentences.txt"),
        from_scratch=True,
        num_train_steps=10,
        batch_size=4,
        max_seq_length=32,
        max_predictions_per_seq=5,
        checkpoint_every=5,
        learning_rate=1e-3,
        verbose=0,
    )
    arguments.update(overrides)
    return pretrain_runs.run_pretrain("bert_tiny_en_uncased", str(output), **arguments)


def _assert_same_weights(first: Path, second: Path):
    a = load_file(first / "preset" / "model.weights.safetensors")
    b = load_file(second / "preset" / "model.weights.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(b[name], a[name], atol=1e-6, err_msg=name)


def _checkpoints(output: Path) -> list:
    state = output / "checkpoints" / "state.json"
    return json.loads(state.read_text())["checkpoints"] if state.exists() else []


@pytest.mark.e2e  # a kill, then the run again
def test_a_timed_checkpoint_inside_an_interval_resumes_exactly(tmp_path, monkeypatch):
    _pretrain(tmp_path / "straight")
    ticks = itertools.count(0, 50)  # a fake clock: 50 s pass at every look
    monkeypatch.setattr(checkpoint_files, "_clock", lambda: float(next(ticks)))
    monkeypatch.setattr(pretrain_runs, "tensorboard", lambda output: Kill(step=8))
    with pytest.raises(KeyboardInterrupt):
        _pretrain(tmp_path / "timed", checkpoint_every_minutes=1)
    saved = [(c["step"], c["interval"], c["weights"]) for c in _checkpoints(tmp_path / "timed")]
    assert saved == [  # steps 2 and 4 timed, 5 the interval's end, 7 timed; 8 lost
        (4, None, "ckpt-step-4.weights.h5"),
        (5, 1, "ckpt-1.weights.h5"),
        (7, None, "ckpt-step-7.weights.h5"),
    ]
    monkeypatch.undo()
    _pretrain(tmp_path / "timed", checkpoint_every_minutes=1)  # resumes at step 7 exactly
    _assert_same_weights(tmp_path / "straight", tmp_path / "timed")


def test_checkpoint_every_minutes_must_be_positive(tmp_path, capsys):
    with pytest.raises(ValueError, match="--checkpoint-every-minutes must be a positive"):
        _pretrain(tmp_path / "bad", checkpoint_every_minutes=0)
    assert not (tmp_path / "bad").exists()
    command = ["pretrain", "--preset", "bert_tiny_en_uncased", "--output", str(tmp_path / "o")]
    status = main([*command, "--text-file", str(DATA / "sentences.txt"),
                   "--checkpoint-every-minutes", "-1"])  # fmt: skip
    assert status == 2 and "--checkpoint-every-minutes must be a positive number" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "o").exists()


# `kbz` in a child process whose checkpoint writes hold 30 s after the weights are written
# to their temporary file (before the rename), so a test can kill the process inside a write.
PAUSED_KBZ = """
import sys, time, keras
from keras_bert_zoo import cli
save_weights = keras.Model.save_weights
def paused(self, path, *args, **kwargs):
    save_weights(self, path, *args, **kwargs)
    if "/.ckpt-" in str(path):
        time.sleep(30)
keras.Model.save_weights = paused
sys.argv[0] = "kbz"
cli.run()
"""


def _command(records: Path, output: Path, steps: int, paused: bool = False) -> list:
    start = ["-c", PAUSED_KBZ] if paused else ["-m", "keras_bert_zoo.cli"]
    return [
        sys.executable,
        *start,
        "pretrain",
        "--preset",
        "bert_tiny_en_uncased",
        "--from-scratch",
        "--input-file",
        str(records / "shard-*"),
        "--output",
        str(output),
        "--num-train-steps",
        str(steps),
        "--checkpoint-every",
        "4",
        "--batch-size",
        "4",
        "--max-seq-length",
        "32",
        "--max-predictions-per-seq",
        "5",
        "--learning-rate",
        "1e-3",
        "--no-jit-compile",
    ]


def _wait_for(condition, process, seconds=120.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _newest_step(output: Path) -> int:
    try:
        return max((c["step"] for c in _checkpoints(output)), default=0)
    except (json.JSONDecodeError, OSError):  # state.json is replaced atomically; be safe
        return 0


def _kill_during_a_checkpoint_write(command, output) -> int:
    """Starts `command` with checkpoint writes held open and kills it inside the first
    one it writes after the newest checkpoint: returns the newest intact step and the
    half-written files left behind."""
    before = _newest_step(output)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    staged = lambda: list((output / "checkpoints").glob(".ckpt-*.weights.h5*"))  # noqa: E731
    assert _wait_for(staged, process), "no checkpoint write started"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert _newest_step(output) == before  # the half-written checkpoint is not in force
    left = staged()
    assert left, "the kill did not land inside the write"
    return before, left


def _kill_at_a_random_moment(command, output, rng) -> int:
    """Kills `command` at a random moment after it wrote a new checkpoint."""
    before = _newest_step(output)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert _wait_for(lambda: _newest_step(output) > before, process), "no progress"
    time.sleep(rng.uniform(0.0, 0.5))
    process.send_signal(signal.SIGKILL)
    process.wait()
    return _newest_step(output)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """Two TFRecord shards of the sample text (`kbz create-pretraining-data`)."""
    directory = tmp_path_factory.mktemp("records")
    flags = {
        "--input_file": DATA / "sentences.txt",
        "--output_file": f"{directory}/shard@2",
        "--vocab_file": builtin_presets_dir() / "vocab" / "uncased.txt",
        "--max_seq_length": 32,
        "--max_predictions_per_seq": 5,
        "--dupe_factor": 1,
    }
    arguments = [str(part) for pair in flags.items() for part in pair]
    assert main(["create-pretraining-data", *arguments]) == 0
    return directory


# 60-160 s: in `make test-slow`; one SIGKILL then the same command runs in every `make test`
# (tests/test_runs.py::test_sigkill_at_a_random_moment_then_same_command_resumes_exactly).
@pytest.mark.slow
def test_several_sigkills_at_random_moments_and_during_writes_then_same_command(records, tmp_path):
    """Four `kill -9` in one run (two inside a checkpoint write, two at seeded random
    moments), then the same command: the weights of one uninterrupted run (1e-6)."""
    steps, rng = 160, random.Random(17)  # far more than trained within a random delay
    pretrain_runs.run_pretrain(  # the uninterrupted run, in this process: what kbz runs
        "bert_tiny_en_uncased",
        str(tmp_path / "straight"),
        input_file=str(records / "shard-*"),
        from_scratch=True,
        num_train_steps=steps,
        checkpoint_every=4,
        batch_size=4,
        max_seq_length=32,
        max_predictions_per_seq=5,
        learning_rate=1e-3,
        jit_compile=False,
        verbose=0,
    )
    output = tmp_path / "killed"
    command = _command(records, output, steps)
    paused = _command(records, output, steps, paused=True)
    first, left = _kill_during_a_checkpoint_write(paused, output)  # the very first write
    progress = [
        first,
        _kill_at_a_random_moment(command, output, rng),
        _kill_during_a_checkpoint_write(paused, output)[0],
        _kill_at_a_random_moment(command, output, rng),
    ]
    assert progress[0] == 0 and 0 < progress[1] <= progress[2] < progress[3] < steps
    assert not any(path.exists() for path in left)  # removed by the next attempt
    assert not (output / "preset").exists()
    subprocess.run(command, check=True, capture_output=True)
    _assert_same_weights(tmp_path / "straight", output)


@pytest.mark.e2e  # a kill, then the run again
@pytest.mark.parametrize("bucketing", [False, True])
def test_a_timed_checkpoint_inside_a_finetuning_epoch_resumes_exactly(
    tmp_path, monkeypatch, bucketing
):
    from keras_bert_zoo.jobs import finetune as runs  # noqa: PLC0415 (only this test patches it)

    keras.utils.set_random_seed(0)
    encoder = kbz_build_encoder()
    preset = kbz_save_preset(encoder, tmp_path / "preset")
    train = tmp_path / "train.tsv"
    lines = (FINETUNE / "sst2_train_head.tsv").read_text().splitlines(True)[:65]
    train.write_text("".join(lines))  # 64 examples: 4 steps of 16 per epoch (fewer, bucketed)

    def finetune(output, **extra):
        return runs.run_finetune(
            "classifier", str(preset), str(train), str(train), str(output), epochs=2,
            batch_size=16, sequence_length=32, learning_rate=1e-3, export=False,
            jit_compile=False, verbose=0, bucketing=bucketing, packing=False, **extra,
        )  # fmt: skip

    powers_of_two_buckets(monkeypatch)  # bucketed: two lengths (16, 32) in so small a run
    finetune(tmp_path / "straight")
    ticks = itertools.count(0, 50)
    monkeypatch.setattr(checkpoint_files, "_clock", lambda: float(next(ticks)))
    monkeypatch.setattr(runs, "tensorboard", lambda output: Kill(step=6 if bucketing else 7))
    with pytest.raises(KeyboardInterrupt):
        finetune(tmp_path / "timed", checkpoint_every_minutes=1)
    saved = [(c["step"], c["interval"]) for c in _checkpoints(tmp_path / "timed")]
    # 4 steps an epoch (3 bucketed): 2 and 6 (5) timed, 4 (3) the epoch's end; 7 (6) lost
    assert saved == (
        [(2, None), (3, 1), (5, None)] if bucketing else [(2, None), (4, 1), (6, None)]
    )
    monkeypatch.undo()
    powers_of_two_buckets(monkeypatch)
    finetune(tmp_path / "timed", checkpoint_every_minutes=1)  # resumes inside the epoch
    _assert_same_weights(tmp_path / "straight", tmp_path / "timed")
