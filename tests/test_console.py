"""The command line is quiet by default: TensorFlow's C++ log lines are filtered out of the
terminal, everything else (errors, tracebacks, progress) still shows; `--verbose` shows all."""

import os
import subprocess
import sys

import pytest

from keras_bert_zoo.console import is_native_log

NOISE = [
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    b"I0000 00:00:1795474869.596942    4627 port.cc:153] oneDNN custom operations are on.",
    b"E0000 00:00:1795474871.679334    4627 cuda_platform.cc:52] failed call to cuInit: INTERNAL",
    b"W1123 22:50:28.123456  31 graph_launch.cc:671] Ignoring Assert operator assert_equal",
]
KEPT = [
    b"kbz finetune: error: --batch-size must be positive",
    b"Traceback (most recent call",
    b"Epoch 1/3",
    b"I think so",
    b"W0000 is not a log line without its file:line] part",
    b"  0%|          | 0/10 [00:00<?, ?it/s]",
]


@pytest.mark.parametrize("line", NOISE)
def test_native_log_lines_are_recognised(line):
    assert is_native_log(line)


@pytest.mark.parametrize("line", KEPT)
def test_other_lines_are_kept(line):
    assert not is_native_log(line)


def _kbz(*argv):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run(
        [sys.executable, "-m", "keras_bert_zoo.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.e2e
def test_a_command_that_loads_tensorflow_prints_no_native_lines(tmp_path):
    argv = [
        "finetune",
        "classify",
        "--preset",
        "bert_tiny_en_uncased",
        "--train",
        str(tmp_path / "missing.tsv"),
        "--validation",
        str(tmp_path / "missing.tsv"),
        "--output",
        str(tmp_path / "out"),
    ]
    quiet = _kbz(*argv)  # imports TensorFlow and tf-text, then stops on the missing file
    assert quiet.returncode == 2
    lines = quiet.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith("kbz finetune: error: ")
        and "missing.tsv" in lines[0]
    ), quiet.stderr
    verbose = _kbz("--verbose", *argv)
    assert any(is_native_log(line.encode()) for line in verbose.stderr.splitlines())
    version = _kbz("--version")
    assert version.returncode == 0 and version.stdout.startswith("kbz ")
