"""The persistent XLA compilation cache (`kbz.training.enable_compile_cache`, `--compile-cache`).

TensorFlow reads its XLA flags once per process, at the first compile, so every check of the
cache itself runs in fresh processes; TensorFlow's own log line "Loading cached entry" (its
`device_executable_persistor` at verbosity 2) shows that a compiled program came from disk.
"""

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import save_tiny_preset

from keras_bert_zoo.cli import build_parser, common
from keras_bert_zoo.training import compile_cache

DATA = Path(__file__).parent / "data" / "finetune"
LOADED = "Loading cached entry"

# A tiny classifier's XLA train step, one step per process; the seed is the script's argument.
TRAIN_STEP = """
import sys
import keras, numpy as np
from keras_bert_zoo import training
import keras_bert_zoo as kbz
print("CACHE", training.enable_compile_cache(sys.argv[1]))
keras.utils.set_random_seed(int(sys.argv[2]))
encoder = kbz.build_encoder(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=8,
                            intermediate_dim=16, max_sequence_length=16)
model = kbz.build_classifier(encoder, num_classes=2)
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(True),
              jit_compile=True)
x = {"token_ids": np.full((4, 8), 5, "int32"), "segment_ids": np.zeros((4, 8), "int32"),
     "padding_mask": np.ones((4, 8), "int32")}
print("LOSS", float(model.train_on_batch(x, np.array([0, 1, 0, 1]))))
"""


def _verbose_env(**extra):
    """This environment with TensorFlow's cache loader logging, and no cache inherited."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_XLA_FLAGS", compile_cache.ENV)}
    return {
        **env,
        "TF_CPP_MIN_LOG_LEVEL": "0",
        "TF_CPP_VMODULE": "device_executable_persistor=2",
        "KERAS_BACKEND": "tensorflow",
        **extra,
    }


def _step(directory, seed):
    return subprocess.run(
        [sys.executable, "-c", TRAIN_STEP, str(directory), str(seed)],
        env=_verbose_env(),
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[1],
    )


def _entries(directory: Path) -> dict:
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir() if p.is_file()}


@pytest.mark.e2e
def test_second_process_loads_the_train_step_from_disk_whatever_its_seed(tmp_path):
    first = _step(tmp_path / "xla", seed=0)
    assert f"CACHE {tmp_path / 'xla'}" in first.stdout
    written = _entries(tmp_path / "xla")
    assert written, "the first process wrote no compiled program"
    assert LOADED not in first.stderr

    again = _step(tmp_path / "xla", seed=1)  # seeds are variables: the same program
    assert LOADED in again.stderr
    assert _entries(tmp_path / "xla") == written  # nothing compiled, nothing rewritten
    loss = lambda done: float(done.stdout.split("LOSS")[1])  # noqa: E731
    assert np.isfinite(loss(again)) and loss(again) != loss(first)  # seed 1's own init, dropout


def test_unusable_directory_switches_the_cache_off_with_a_warning(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger=compile_cache.__name__):
        assert compile_cache.enable_compile_cache(blocker / "xla") is None
    assert "XLA compilation cache" in caplog.text and "cannot be written" in caplog.text
    assert compile_cache.ENV in caplog.text  # names the way out
    assert "TF_XLA_FLAGS" not in os.environ  # TensorFlow would fail every compile


def test_low_disk_switches_the_cache_off(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    monkeypatch.setattr(compile_cache, "MIN_FREE_BYTES", 1 << 62)
    with caplog.at_level(logging.WARNING, logger=compile_cache.__name__):
        assert compile_cache.enable_compile_cache(tmp_path / "xla") is None
    assert "free" in caplog.text


def test_enabling_sets_tensorflows_flag_once_and_respects_one_given(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=0")
    assert compile_cache.enable_compile_cache(tmp_path / "a") == tmp_path / "a"
    assert os.environ["TF_XLA_FLAGS"].split() == [
        "--tf_xla_auto_jit=0",
        f"--tf_xla_persistent_cache_directory={tmp_path / 'a'}",
    ]
    # a directory already set (by the user, or a parent kbz process) stays in force
    assert compile_cache.enable_compile_cache(tmp_path / "b") == tmp_path / "a"
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("value", ["off", "0", "OFF", "none"])
def test_environment_switches_it_off(value, tmp_path, monkeypatch):
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    monkeypatch.setenv(compile_cache.ENV, value)
    assert compile_cache.enable_compile_cache() is None
    assert "TF_XLA_FLAGS" not in os.environ


def test_default_directory_names_backend_version_and_cpu(tmp_path, monkeypatch):
    import tensorflow as tf

    monkeypatch.delenv(compile_cache.ENV, raising=False)
    monkeypatch.setenv("KBZ_CACHE_DIR", str(tmp_path))
    directory = compile_cache.default_directory("tensorflow")
    assert directory.parent == tmp_path / "xla"
    assert directory.name.startswith(f"tensorflow-{tf.__version__}-")
    monkeypatch.setattr(compile_cache, "_cpu_features", lambda: "avx2 fma sse4_2")
    assert compile_cache.default_directory("tensorflow") != directory  # another CPU
    monkeypatch.setenv(compile_cache.ENV, str(tmp_path / "mine"))
    assert compile_cache.default_directory("tensorflow") == tmp_path / "mine"


def test_prune_removes_the_oldest_entries_past_the_limit(tmp_path):
    for age, name in enumerate(["newest", "middle", "oldest"]):
        path = tmp_path / name
        path.write_bytes(b"x" * 100)
        os.utime(path, (1_000_000 - age * 100, 1_000_000 - age * 100))
    (tmp_path / ".probe-left").write_bytes(b"x" * 1000)  # not an entry: never counted
    assert compile_cache.prune(tmp_path, max_bytes=250) == 1
    assert sorted(_entries(tmp_path)) == [".probe-left", "middle", "newest"]
    assert compile_cache.prune(tmp_path, max_bytes=250) == 0


@pytest.mark.parametrize(
    "argv, expected",
    [
        ([], "default"),
        (["--compile-cache", "DIR"], "DIR"),
        (["--compile-cache", "off"], None),
        (["--no-jit-compile"], None),
    ],
)
def test_commands_enable_the_cache_unless_told_not_to(argv, expected, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(compile_cache, "enable_compile_cache", lambda d=None: calls.append(d))
    for command in (
        ["finetune", "classify", "--preset", "p", "--train", "t", "--validation", "v"],
        ["pretrain", "--preset", "p", "--text-file", "t"],
        ["predict", "classify", "--model", "m", "--input", "i"],
        ["embed", "--model", "m", "--input", "i"],  # XLA on JAX; no --jit-compile
    ):
        if command[0] == "embed" and "--no-jit-compile" in argv:
            continue
        args = build_parser().parse_args([*command, "--output", "o", *argv])
        calls.clear()
        common.use_compile_cache(args)
        assert calls == ([] if expected is None else [None if expected == "default" else "DIR"])


@pytest.mark.e2e
def test_kbz_finetune_run_again_loads_its_compiled_programs(tmp_path):
    """The user-facing promise: the same command again (another seed) skips its compiles."""
    preset = save_tiny_preset(tmp_path / "preset")
    cache = tmp_path / "xla"

    def finetune(output, seed):
        command = [sys.executable, "-m", "keras_bert_zoo.cli", "--verbose"]
        command += ["finetune", "classify"]
        command += ["--preset", str(preset), "--train", str(DATA / "sst2_train_head.tsv")]
        command += ["--validation", str(DATA / "sst2_train_head.tsv"), "--no-export"]
        command += ["--epochs", "1", "--batch-size", "8", "--sequence-length", "32"]
        command += ["--output", str(tmp_path / output), "--seed", str(seed)]
        command += ["--compile-cache", str(cache)]
        return subprocess.run(command, env=_verbose_env(), capture_output=True, text=True)

    first = finetune("run0", seed=0)
    assert first.returncode == 0, first.stderr[-3000:]
    written = _entries(cache)
    assert len(written) >= 1  # the train step (on CPU prediction runs as one graph)
    again = finetune("run1", seed=1)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count(LOADED) >= len(written)
    assert _entries(cache) == written
