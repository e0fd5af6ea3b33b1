"""`kbz finetune classify|tag|qa|rerank|embed`, `kbz predict`, `kbz embed` and `kbz pretrain
--text-file` on JAX with TensorFlow's import blocked (issue 28): numpy batches (query groups
too), the host tokenizer, exact resume. Collected only with `KERAS_BACKEND=jax`
(tests/conftest.py); the checks are tests/jobs_without_tensorflow.py.
"""

import os
import subprocess
import sys

import jobs_without_tensorflow as jobs
import keras
import numpy as np
import pytest

from keras_bert_zoo.jobs.embed import load_embedder

# What `kbz` sees in a `pip install "keras-bert-zoo[jax]"` environment.
WITHOUT_TENSORFLOW = """import sys
for name in ("tensorflow", "tensorflow_text"):
    sys.modules[name] = None  # not installed
from keras_bert_zoo.cli import run
sys.argv[0] = "kbz"
run()
"""


@pytest.fixture(autouse=True)
def blocked():
    jobs.check_tensorflow_is_blocked()


def test_finetune_classify_then_predict_gives_the_run_s_predictions(tmp_path):
    jobs.check_classify(tmp_path)


def test_finetune_tag_then_predict_gives_the_run_s_predictions(tmp_path):
    jobs.check_tag(tmp_path)


def test_finetune_qa_then_predict_gives_the_run_s_answers(tmp_path):
    jobs.check_qa(tmp_path)


def test_finetune_rerank_listwise_then_predict_gives_the_run_s_scores(tmp_path):
    jobs.check_rerank(tmp_path)


def test_embed_equals_one_batch_of_the_model(tmp_path):
    jobs.check_embed(tmp_path)


def test_finetune_embed_then_embed_with_the_run(tmp_path):
    jobs.check_finetune_embed(tmp_path)


@pytest.mark.e2e  # a kill, then the run again
def test_a_killed_finetune_embed_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    jobs.check_finetune_embed_resumes(tmp_path)


@pytest.mark.e2e  # a kill, then the run again
def test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    jobs.check_exact_resume(tmp_path)


@pytest.mark.e2e  # a kill, then the run again
def test_pretrain_from_text_then_a_killed_run_resumes_to_the_same_weights(tmp_path):
    jobs.check_pretrain_from_text(tmp_path)


def test_kbz_with_no_backend_set_runs_on_jax_where_tensorflow_is_missing(tmp_path):
    """No `KERAS_BACKEND`, no `keras.json`: Keras' default (TensorFlow) would stop `import
    keras`; `kbz embed` says it runs on JAX and writes the model's vectors."""
    preset = jobs.tiny_preset(tmp_path / "tiny")
    lines = [f"sentence number {i} of the test" for i in range(12)]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["KERAS_HOME"] = str(tmp_path / "keras_home")  # no keras.json there yet
    argv = ["embed", "--model", str(preset), "--input", str(tmp_path / "in.txt")]
    argv += ["--output", str(tmp_path / "v.npy"), "--sequence-length", "32"]
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_TENSORFLOW, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    note = "Keras' backend tensorflow (Keras' default) is not installed: kbz runs on jax"
    assert note in done.stdout
    embedder, preprocessor = load_embedder(preset, sequence_length=32)
    expected = keras.ops.convert_to_numpy(embedder(preprocessor(lines)))
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), expected, atol=1e-5)


def test_a_first_runtime_export_without_tensorflow_names_the_extra_before_any_work(tmp_path):
    """`kbz embed --runtime onnx` runs Keras on numpy, but its first run must export with
    tf2onnx, which converts TensorFlow's graph: without TensorFlow, exit 2 naming the extra,
    and no output written."""
    preset = jobs.tiny_preset(tmp_path / "tiny")
    (tmp_path / "in.txt").write_text("one sentence\n")
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["KBZ_CACHE_DIR"] = str(tmp_path / "cache")  # no export there yet
    argv = ["embed", "--model", str(preset), "--input", str(tmp_path / "in.txt")]
    argv += ["--output", str(tmp_path / "v.npy"), "--runtime", "onnx"]
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_TENSORFLOW, *argv],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "tf2onnx converts its TensorFlow graph" in done.stderr
    assert "pip install 'keras-bert-zoo[tensorflow]'" in done.stderr
    assert not (tmp_path / "v.npy").exists()
