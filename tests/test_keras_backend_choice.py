"""`kbz` runs on an installed backend: Keras' configured one (`KERAS_BACKEND`, `keras.json`,
else TensorFlow) when its library is installed, else the first installed of TensorFlow, JAX
and PyTorch, with a line saying so; a `KERAS_BACKEND` that names a missing library is an
error naming the fix. `kbz embed` chosen onto JAX with TensorFlow blocked end to end:
tests/test_backend_jax_notf.py."""

import json
import os
import subprocess
import sys

import pytest

from keras_bert_zoo.extras import (
    MissingExtraError,
    backend_installed,
    backend_to_run,
    configured_backend,
)

BLOCKING = "import sys\nfor name in {names!r}:\n    sys.modules[name] = None  # not installed\n"


def test_an_installed_configured_backend_is_kept_without_a_note():
    assert backend_to_run("torch", "KERAS_BACKEND", {"tensorflow", "jax", "torch"}) == (
        "torch",
        None,
    )
    assert backend_to_run("jax", "/home/u/.keras/keras.json", {"jax"}) == ("jax", None)


@pytest.mark.parametrize(
    ("installed", "expected"),
    [({"jax", "torch"}, "jax"), ({"torch"}, "torch"), ({"torch", "numpy"}, "torch")],
)
def test_a_missing_default_backend_falls_to_the_first_installed_with_a_note(installed, expected):
    backend, note = backend_to_run("tensorflow", "Keras' default", installed)
    assert backend == expected
    assert "tensorflow (Keras' default) is not installed" in note
    assert f"kbz runs on {expected}" in note and "KERAS_BACKEND" in note


def test_a_keras_json_backend_that_is_missing_falls_back_too():
    backend, note = backend_to_run("jax", "/home/u/.keras/keras.json", {"torch"})
    assert backend == "torch" and "jax (/home/u/.keras/keras.json) is not installed" in note


def test_a_missing_backend_named_in_keras_backend_is_an_error_naming_the_fix():
    with pytest.raises(MissingExtraError) as error:
        backend_to_run("jax", "KERAS_BACKEND", {"torch"})
    message = str(error.value)
    assert "KERAS_BACKEND=jax, but jax is not installed" in message
    assert "pip install 'keras-bert-zoo[jax]'" in message and "(torch)" in message


def test_no_backend_at_all_is_an_error_naming_the_extras():
    with pytest.raises(MissingExtraError, match=r"\[tensorflow\]' \(or \[jax\], or \[torch\]\)"):
        backend_to_run("tensorflow", "Keras' default", set())


def test_configured_backend_reads_what_keras_reads(tmp_path):
    assert configured_backend({"KERAS_BACKEND": "torch"}) == ("torch", "KERAS_BACKEND")
    home = {"KERAS_HOME": str(tmp_path)}
    assert configured_backend(home) == ("tensorflow", "Keras' default")  # no keras.json
    (tmp_path / "keras.json").write_text("{not json")
    assert configured_backend(home) == ("tensorflow", "Keras' default")
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "jax", "floatx": "float32"}))
    assert configured_backend(home) == ("jax", str(tmp_path / "keras.json"))
    assert configured_backend({**home, "KERAS_BACKEND": "torch"})[0] == "torch"
    # Keras itself, imported with the same file and no KERAS_BACKEND, takes the same one.
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"} | home
    code = "import keras; print(keras.backend.backend())"
    keras_reads = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert keras_reads.stdout.split()[-1] == "jax"


def test_backend_installed_finds_libraries_without_importing_them(monkeypatch):
    assert backend_installed("numpy")
    assert not backend_installed("no_such_backend_library")
    monkeypatch.setitem(sys.modules, "numpy", None)  # how a blocked import looks
    assert not backend_installed("numpy")


def test_kbz_with_keras_backend_naming_a_missing_library_stops_before_any_work(tmp_path):
    script = BLOCKING.format(names=("jax",))
    script += "from keras_bert_zoo.cli import run\nsys.argv[0] = 'kbz'\nrun()\n"
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    argv = ["embed", "--model", "bert_tiny_en_uncased", "--input", str(tmp_path / "in.txt")]
    done = subprocess.run(
        [sys.executable, "-c", script, *argv, "--output", str(tmp_path / "v.npy")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "kbz embed: error: KERAS_BACKEND=jax, but jax is not installed" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "v.npy").exists()


def test_an_exported_runtime_puts_keras_on_numpy_unless_a_backend_is_named():
    probe = (
        "import os, sys\n"
        "from keras_bert_zoo.extras import choose_light_backend\n"
        "chose = choose_light_backend()\n"
        "print(json.dumps([chose, os.environ.get('KERAS_BACKEND'), 'keras' in sys.modules]))"
    )
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    for named, expected in ((None, [True, "numpy", False]), ("torch", [False, "torch", False])):
        extra = {"KERAS_BACKEND": named} if named else {}
        done = subprocess.run(
            [sys.executable, "-c", "import json\n" + probe],
            env={**env, **extra}, capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert json.loads(done.stdout) == expected
