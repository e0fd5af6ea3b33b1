"""`--strategy data-parallel` on JAX over processes (issue 27): two local processes on loopback,
joined by `keras.distribution.initialize`'s environment variables, end a `kbz finetune` with
the weights of one process trained on the same global batches (as tests/test_distributed.py
checks tf.distribute's MultiWorkerMirroredStrategy). Only collected when Keras runs on JAX.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
from conftest import save_tiny_preset

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main
from keras_bert_zoo.jobs.finetune import run_finetune
from keras_bert_zoo.training.processes import ADDRESS, COUNT, INDEX

# The jobs feed numpy batches on JAX. The two-process run unblocks TensorFlow (conftest) only
# because its processes, started where it is installed, write TensorBoard logs that the
# one-process run must match; the other tests run with it blocked.
UNBLOCKED = pytest.mark.tensorflow_data
ROOT = Path(__file__).resolve().parent.parent
# The processes sum float32 gradients in another order than one device (across processes, then
# devices): after these 8 steps the weights differed by at most 6e-8, while training moved them
# by up to 6e-2; 1e-6 leaves room for other summation orders and catches any wrong batch.
TOLERANCE = 1e-6
DATA = Path(__file__).parent / "data"
TRAIN = DATA / "finetune" / "sst2_train_head.tsv"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _finetune_argv(preset, train, output) -> list:
    # Packed rows (the classifier's default): these 128 sentences pack into 4 rows (of up to 64
    # tokens) per batch of 16, a multiple of the 4 devices, so the two runs' global batches
    # are the same arrays. (A batch filled up with empty rows for the devices trains on the
    # same examples and loss, but draws dropout masks for its own shape.)
    argv = ["finetune", "classify", "--preset", str(preset), "--train", str(train)]
    argv += ["--validation", str(train), "--output", str(output), "--epochs", "1"]
    argv += ["--batch-size", "16", "--sequence-length", "64", "--learning-rate", "1e-3"]
    return argv + ["--checkpoint-every", "4", "--no-export", "--seed", "3"]


def _weights(path) -> dict:
    return {w.path: keras.ops.convert_to_numpy(w) for w in kbz.load_model(path).weights}


@pytest.mark.e2e
@UNBLOCKED
def test_two_processes_end_with_the_weights_of_one(tmp_path):
    preset = save_tiny_preset(tmp_path / "tiny", num_layers=1, max_sequence_length=64)
    train = tmp_path / "train.tsv"  # 128 sentences: 8 steps of 16, validated after 4 and 8
    train.write_text("".join(TRAIN.read_text().splitlines(keepends=True)[:129]))
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(_finetune_argv(preset, train, one)) == 0  # one device, `--strategy none`

    command = [sys.executable, "-m", "keras_bert_zoo.cli", "-v"]  # -v: its packing line
    command += _finetune_argv(preset, train, two)
    command += ["--strategy", "data-parallel"]
    address = f"127.0.0.1:{_free_port()}"
    processes = []
    scratch = tmp_path / "scratch"  # the temporary folder of the processes
    scratch.mkdir()
    for index in range(2):  # each with the 2 host devices of conftest's XLA_FLAGS: 4 in all
        env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)}
        env["TMPDIR"] = str(scratch)
        env.update({ADDRESS: address, COUNT: "2", INDEX: str(index)})
        processes.append(
            subprocess.Popen(
                command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        )
    try:
        outputs = [p.communicate(timeout=900)[0] for p in processes]
    finally:
        for p in processes:
            p.kill()
    for p, output in zip(processes, outputs, strict=True):
        assert p.returncode == 0, output[-3000:]
        assert "Training on packed rows: 4 rows of" in output, output[-3000:]
        assert "empty row" not in output

    expected, got = _weights(one / "model.keras"), _weights(two / "model.keras")
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, atol=TOLERANCE, rtol=0, err_msg=name)
    metrics = [json.loads((run / "metrics.json").read_text()) for run in (one, two)]
    assert metrics[0]["history"] == metrics[1]["history"]  # the same predictions
    # Process 0 alone wrote: the same files as one process, one TensorBoard writer.
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir())
    events = [len(list((run / "logs").rglob("events.*"))) for run in (one, two)]
    assert events[0] == events[1]
    assert not list(scratch.glob("kbz-process-*"))  # process 1's scratch copy is gone


@pytest.mark.e2e
def test_kbz_pretrain_data_parallel_on_two_devices_equals_one_device(tmp_path):
    preset = save_tiny_preset(tmp_path / "tiny", num_layers=1, max_sequence_length=64)
    argv = ["pretrain", "--preset", str(preset), "--from-scratch", "--text-file"]
    argv += [str(DATA / "pretraining" / "sentences.txt"), "--num-train-steps", "3"]
    argv += ["--checkpoint-every", "3", "--batch-size", "4", "--max-seq-length", "32"]
    argv += ["--max-predictions-per-seq", "5", "--learning-rate", "1e-3"]
    weights = []
    for strategy in ("none", "data-parallel"):  # one device; then the 2 host devices
        output = tmp_path / strategy
        assert main([*argv, "--output", str(output), "--strategy", strategy]) == 0
        model = kbz.from_preset(str(output / "preset"), task="pretrainer")
        weights.append({w.path: keras.ops.convert_to_numpy(w) for w in model.weights})
    for name, value in weights[0].items():
        np.testing.assert_allclose(weights[1][name], value, atol=TOLERANCE, rtol=0, err_msg=name)


def test_a_global_batch_the_devices_cannot_split_names_batch_size(tmp_path):
    with pytest.raises(ValueError, match=r"--batch-size 3 must be a multiple of the 2 devices"):
        run_finetune(
            "classifier",
            "bert_tiny_en_uncased",
            str(TRAIN),
            str(TRAIN),
            str(tmp_path / "run"),
            batch_size=3,
            strategy="data-parallel",
        )
    assert not (tmp_path / "run").exists()  # checked before any work


def test_processes_need_an_address_and_an_index(tmp_path, monkeypatch):
    monkeypatch.setenv(COUNT, "2")
    monkeypatch.delenv(ADDRESS, raising=False)
    monkeypatch.delenv(INDEX, raising=False)
    with pytest.raises(ValueError, match=f"{ADDRESS}=<process 0's host>:<free port>"):
        run_finetune(
            "classifier",
            "bert_tiny_en_uncased",
            str(TRAIN),
            str(TRAIN),
            str(tmp_path / "r"),
            strategy="data-parallel",
        )
