"""Inference runtimes (`keras_bert_zoo.runtimes`, `--runtime`, `--precision`): ONNX Runtime and
OpenVINO in float32 equal the Keras task model (1e-5) for every predicting task, through the
length buckets; int8 models are measured against float32 when written, and one that loses
too much says so; exports are made once and reused; bad flags and missing extras are clear
errors before any work.

The models are tiny random presets (no training). OpenVINO tests need the `openvino` extra
(openvino, nncf) and are skipped without it.
"""

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
from conftest import save_tiny_preset

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main
from keras_bert_zoo.extras import MissingExtraError
from keras_bert_zoo.jobs import embed
from keras_bert_zoo.runtimes import cache, loading, quality
from keras_bert_zoo.tokenization import BertPreprocessor
from keras_bert_zoo.tokenization.arrays import packed_arrays
from keras_bert_zoo.training import bucketed_prediction

DATA = Path(__file__).parent / "data" / "finetune"
TASK_KWARGS = {
    "classifier": {"num_classes": 2, "label_names": ["0", "1"]},
    "tagger": {"num_tags": 5},
    "question_answerer": {},
}
LENGTH = 64


def _openvino(runtime):
    if runtime == "openvino":
        pytest.importorskip("openvino")
        pytest.importorskip("nncf")


@pytest.fixture(scope="module")
def presets(tmp_path_factory):
    """`{task: preset}`: a tiny random encoder (for the embedder) and task presets of it."""
    root = tmp_path_factory.mktemp("runtimes")
    saved = {"embedder": save_tiny_preset(root / "encoder")}
    for task, kwargs in TASK_KWARGS.items():
        model = kbz.from_preset(str(saved["embedder"]), task=task, **kwargs)
        saved[task] = kbz.save_preset(model, root / task)
    return saved


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    """One cache for the module, so each export is made once here too."""
    root = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KBZ_CACHE_DIR", str(root))
        yield root


@pytest.fixture(scope="module")
def sample(presets):
    """Real sentences of varied length (SST-2), paired with themselves for the QA model."""
    lines = (DATA / "sst2_train_head.tsv").read_text().splitlines()[1:]
    texts = [line.split("\t")[0] for line in lines]
    preprocessor = BertPreprocessor.from_preset(presets["embedder"], sequence_length=LENGTH)
    return {
        "single": packed_arrays(preprocessor, texts),
        "pair": packed_arrays(preprocessor, texts[:150], texts[150:]),
    }


def _inputs(sample, task):
    return sample["pair" if task == "question_answerer" else "single"]


def _bucketed(runner, x, task):
    buckets = bucketed_prediction.prediction_buckets(runner, LENGTH)
    sequence_outputs = task in ("tagger", "question_answerer")
    return bucketed_prediction.predict(runner, x, 16, buckets, sequence_outputs)


def _real(outputs, x, task):
    """Outputs where they mean something: per-token outputs on real tokens only."""
    outputs = outputs if isinstance(outputs, dict) else {"output": outputs}
    mask = np.asarray(x["padding_mask"]) > 0
    if task in ("tagger", "question_answerer"):
        return {k: np.asarray(v)[mask] for k, v in outputs.items()}
    return {k: np.asarray(v) for k, v in outputs.items()}


@pytest.mark.e2e  # tf2onnx conversions, ONNX Runtime and OpenVINO: other runtimes' parity
@pytest.mark.parametrize("runtime", ["onnx", "openvino"])
@pytest.mark.parametrize("task", ["classifier", "tagger", "question_answerer", "embedder"])
def test_float32_runtime_equals_keras_through_the_length_buckets(
    presets, cache_root, sample, runtime, task
):
    _openvino(runtime)
    x = _inputs(sample, task)
    network = kbz.from_preset(presets[task], task=task)
    expected = _real(network.predict(x, batch_size=64, verbose=0), x, task)  # full padding
    runner = loading.load_runner(presets[task], task, runtime, "float32")
    assert runner.task == task and runner.precision == "float32"
    actual = _real(_bucketed(runner, x, task), x, task)
    assert actual.keys() == expected.keys()
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], atol=1e-5, rtol=0)
    # one call on a batch trimmed to its own length (dynamic axes): the same outputs
    few = {k: v[:5, :24] for k, v in x.items()}
    direct = _real(runner(few), few, task)
    reference = _real(network(few, training=False), few, task)
    for name in reference:
        np.testing.assert_allclose(direct[name], reference[name], atol=1e-5, rtol=0)


@pytest.mark.e2e  # tf2onnx conversions, ONNX Runtime and OpenVINO: other runtimes' parity
@pytest.mark.parametrize("runtime", ["onnx", "openvino", "keras"])
@pytest.mark.parametrize("task", ["classifier", "embedder"])
def test_int8_is_measured_against_float32_when_written(
    presets, cache_root, sample, runtime, task, caplog, monkeypatch
):
    _openvino(runtime)
    monkeypatch.setattr(logging.getLogger("keras_bert_zoo.status"), "propagate", True)
    x = _inputs(sample, task)
    with caplog.at_level(logging.INFO):
        runner = loading.load_runner(presets[task], task, runtime, "int8", sample=x)
    metric = "recall@1 agreement" if task == "embedder" else "label agreement"
    measured = [r.getMessage() for r in caplog.records if metric in r.getMessage()]
    assert measured and "held-out rows" in measured[0], caplog.text
    outputs = np.asarray(_bucketed(runner, x, task))
    reference = np.asarray(_bucketed(loading.load_runner(presets[task], task, "keras"), x, task))
    assert 0 < np.abs(outputs - reference).max() < 0.05  # quantized, and close
    if runtime != "keras":  # the record kept beside the int8 model
        record = json.loads((runner.directory / quality.QUALITY_FILE).read_text())
        assert record["metric"] == metric and record["within_tolerance"]
        assert record["held_out"] and record["rows"] >= 100


@pytest.mark.e2e  # tf2onnx conversions and ONNX Runtime
def test_a_quantization_that_loses_too_much_is_reported_when_written_and_reused(
    tmp_path, cache_root, sample, caplog
):
    """Outlier weights (one large value per kernel, as real transformers grow) quantized with
    one scale per tensor instead of per channel: most weights round to zero."""
    keras.utils.set_random_seed(1)
    encoder = kbz.from_preset(save_tiny_preset(tmp_path / "plain", seed=1))
    for layer in encoder.layers:
        for variable in layer.weights:
            if variable.path.endswith("kernel"):
                values = np.array(variable.numpy())
                values.flat[0] = 50.0
                variable.assign(values)
    preset = kbz.save_preset(encoder, tmp_path / "outliers")
    bad = {"per_channel": False}
    with caplog.at_level(logging.WARNING, logger="keras_bert_zoo.runtimes"):
        runner = loading.load_runner(
            preset, "embedder", "onnx", "int8", sample=sample["single"], quantization_options=bad
        )
    record = json.loads((runner.directory / quality.QUALITY_FILE).read_text())
    assert not record["within_tolerance"] and record["loss"] > quality.DEFAULT_TOLERANCE
    assert "QUALITY LOSS" in caplog.text and "--precision float32" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="keras_bert_zoo.runtimes"):
        loading.load_runner(preset, "embedder", "onnx", "int8", quantization_options=bad)
    assert "QUALITY LOSS" in caplog.text  # said again whenever the model is used
    # the default (per channel) keeps this model within the tolerance
    kept = loading.load_runner(preset, "embedder", "onnx", "int8", sample=sample["single"])
    assert json.loads((kept.directory / quality.QUALITY_FILE).read_text())["within_tolerance"]


@pytest.mark.e2e  # subprocess-free CLI runs with tf2onnx conversions and two runtimes
@pytest.mark.parametrize("runtime", ["onnx", "openvino"])
def test_kbz_embed_runtime_equals_keras_and_reuses_its_export(
    presets, cache_root, tmp_path, capsys, monkeypatch, runtime
):
    _openvino(runtime)
    lines = (DATA / "sst2_train_head.tsv").read_text().splitlines()[1:]
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(line.split("\t")[0] for line in lines) + "\n\n")  # a blank line
    model = str(presets["embedder"])

    def run(*flags):
        out = tmp_path / f"{'_'.join(flags) or 'keras'}.npy"
        argv = ["embed", "--model", model, "--input", str(texts), "--output", str(out), *flags]
        assert main([*argv, "--sequence-length", "64"]) == 0
        return np.load(out), capsys.readouterr()

    expected, _ = run()
    actual, printed = run("--runtime", runtime, "--precision", "float32")
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=0)
    assert f"({runtime} float32)" in printed.out
    assert f"embed [{runtime} float32]: 301 texts in " in printed.err  # one line, its runtime
    from keras_bert_zoo.export import onnx  # the exporter, which a reuse never calls

    monkeypatch.setattr(onnx, "export_onnx", None)
    again, _ = run("--runtime", runtime)
    np.testing.assert_array_equal(again, actual)


@pytest.mark.e2e  # four kbz processes: an export made on TensorFlow, then reuses
def test_kbz_embed_on_an_exported_runtime_leaves_tensorflow_out_once_exported(presets, tmp_path):
    lines = (DATA / "sst2_train_head.tsv").read_text().splitlines()[1:40]
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(line.split("\t")[0] for line in lines) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(KBZ_CACHE_DIR=str(tmp_path / "cache"), PYTHONPROFILEIMPORTTIME="1")

    def kbz_embed(name, backend=None):
        argv = [sys.executable, "-m", "keras_bert_zoo.cli", "embed", "--runtime", "onnx"]
        argv += ["--model", str(presets["embedder"]), "--input", str(texts)]
        argv += ["--output", str(tmp_path / f"{name}.npy"), "--sequence-length", "64"]
        extra = {"KERAS_BACKEND": backend} if backend else {}
        done = subprocess.run(argv, env={**env, **extra}, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        imported = {
            line.split("|")[-1].strip()
            for line in done.stderr.splitlines()
            if line.startswith("import time:")
        }
        return np.load(tmp_path / f"{name}.npy"), imported, done.stdout

    first, imported, printed = kbz_embed("first")  # exports: runs itself again on TensorFlow
    assert "tensorflow" in imported and "this run goes on TensorFlow" in printed
    again, imported, printed = kbz_embed("again")
    assert "tensorflow" not in imported and "keras.src.backend.numpy" in imported
    assert "goes on TensorFlow" not in printed
    np.testing.assert_array_equal(again, first)
    chosen, imported, _ = kbz_embed("chosen", backend="tensorflow")  # the user's choice stays
    assert "tensorflow" in imported
    np.testing.assert_array_equal(chosen, first)
    env["KBZ_CACHE_DIR"] = str(tmp_path / "empty_cache")  # no export, and a backend chosen
    argv = [sys.executable, "-m", "keras_bert_zoo.cli", "embed", "--runtime", "onnx"]
    argv += ["--model", str(presets["embedder"]), "--input", str(texts)]
    argv += ["--output", str(tmp_path / "refused.npy")]
    done = subprocess.run(
        argv, env={**env, "KERAS_BACKEND": "numpy"}, capture_output=True, text=True
    )
    assert (
        done.returncode == 2 and "run this first call with KERAS_BACKEND=tensorflow" in done.stderr
    )
    assert not (tmp_path / "refused.npy").exists()


@pytest.mark.e2e  # CLI runs with tf2onnx conversions
@pytest.mark.parametrize("runtime", ["onnx", "openvino"])
@pytest.mark.parametrize(
    "task, command, data, suffix",
    [("classifier", "classify", "sst2_train_head.tsv", "tsv"),
     ("tagger", "tag", "wnut17_dev_head.conll", "conll")],
)  # fmt: skip
def test_kbz_predict_runtime_writes_keras_predictions(
    presets, cache_root, tmp_path, capsys, runtime, task, command, data, suffix
):
    _openvino(runtime)
    files = {}
    for flags in ([], ["--runtime", runtime, "--precision", "float32"]):
        out = tmp_path / f"{flags[1] if flags else 'keras'}.{suffix}"
        argv = ["predict", command, "--model", str(presets[task]), "--input", str(DATA / data)]
        assert main([*argv, "--output", str(out), "--no-jit-compile", *flags]) == 0
        files[flags[1] if flags else "keras"] = out.read_text().splitlines()
    expected, actual = files["keras"], files[runtime]
    assert len(actual) == len(expected)
    for want, got in zip(expected, actual, strict=True):
        want, got = want.split("\t"), got.split("\t")
        assert len(want) == len(got)
        for a, b in zip(want, got, strict=True):  # labels equal, probabilities within 1e-5
            try:
                assert abs(float(a) - float(b)) <= 1e-5
            except ValueError:
                assert a == b


@pytest.mark.e2e  # tf2onnx conversions, ONNX Runtime and OpenVINO
@pytest.mark.parametrize("runtime", ["onnx", "openvino"])
def test_a_task_model_predicts_in_a_runtime_as_in_keras_and_exports_its_new_weights(
    presets, cache_root, runtime
):
    _openvino(runtime)
    lines = (DATA / "sst2_train_head.tsv").read_text().splitlines()[1:121]
    texts = [line.split("\t")[0] for line in lines]
    classifier = kbz.BertClassifier.from_preset(presets["classifier"], sequence_length=LENGTH)
    expected, names = classifier.predict(texts), classifier.classify(texts)
    assert classifier.use_runtime(runtime) is classifier
    np.testing.assert_allclose(classifier.predict(texts), expected, atol=1e-5, rtol=0)
    assert classifier.classify(texts) == names
    runner = classifier.runner({})
    assert (runner.runtime, runner.precision) == (runtime, "float32")
    assert classifier.runner({}) is runner  # the same weights: the same runner, no export
    head = classifier.get_layer("classifier_head")
    head.kernel.assign(np.asarray(head.kernel) * -3.0)  # as a fit would: new weights
    moved = classifier.predict(texts)
    assert classifier.runner({}) is not runner and np.abs(moved - expected).max() > 1e-3
    np.testing.assert_allclose(moved, classifier.use_runtime().predict(texts), atol=1e-5, rtol=0)
    embedder = kbz.BertEmbedder.from_preset(presets["embedder"], sequence_length=LENGTH)
    reference = embedder.encode(texts)
    vectors = embedder.use_runtime(runtime, "int8").encode(texts)  # calibrated on these texts
    assert embedder.runner({}).precision == "int8"
    cosine = np.sum(reference * vectors, axis=1)
    assert cosine.min() > 0.9, cosine.min()  # int8 of a random tiny model: close, not equal


def test_use_runtime_names_what_is_wrong_before_any_export(presets):
    classifier = kbz.BertClassifier.from_preset(presets["classifier"], sequence_length=LENGTH)
    with pytest.raises(ValueError, match="--runtime must be one of keras, onnx, openvino"):
        classifier.use_runtime("tensorrt")
    with pytest.raises(ValueError, match=r"model.quantize\('int8'\)"):
        classifier.use_runtime("keras", "int8")
    assert classifier.runtime == "keras" and classifier.runner({}) is classifier


def test_bad_runtime_flags_and_missing_extras_are_clear_errors_before_any_work(
    presets, tmp_path, capsys, monkeypatch
):
    texts = tmp_path / "texts.txt"
    texts.write_text("a sentence\n")
    argv = ["embed", "--model", str(presets["embedder"]), "--input", str(texts)]
    argv += ["--output", str(tmp_path / "v.npy")]
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--runtime", "tensorrt"])
    assert exit_.value.code == 2 and "--runtime" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--precision must be one of float32, int8"):
        embed.run_embed(presets["embedder"], texts, tmp_path / "v.npy", precision="fp16")
    real = loading.importlib.util.find_spec
    monkeypatch.setattr(
        loading.importlib.util, "find_spec", lambda n: None if n == "nncf" else real(n)
    )
    with pytest.raises(MissingExtraError, match=r"nncf.*keras-bert-zoo\[openvino\]"):
        loading.check_runtime("openvino", "int8")
    monkeypatch.setattr(
        loading.importlib.util, "find_spec", lambda n: None if n == "tf2onnx" else real(n)
    )
    monkeypatch.setenv("KBZ_CACHE_DIR", str(tmp_path / "empty_cache"))
    assert main([*argv, "--runtime", "onnx"]) == 2  # no export cached: tf2onnx is needed
    assert "tf2onnx to export the model once" in capsys.readouterr().err
    assert not (tmp_path / "v.npy").exists()


def test_the_cache_key_is_what_the_model_computes(presets, tmp_path):
    source = Path(presets["classifier"])
    key = cache.fingerprint(source, "classifier")
    copy = shutil.copytree(source, tmp_path / "copy")
    assert cache.fingerprint(copy, "classifier") == key  # a copy: the same export
    assert cache.fingerprint(source, "embedder") != key
    assert cache.fingerprint(source, "classifier", {"dropout": 0.2}) != key
    model = kbz.from_preset(str(copy))
    model.get_layer("token_embedding").embeddings.assign(
        model.get_layer("token_embedding").embeddings * 2
    )
    kbz.save_preset(model, copy, overwrite=True)
    assert cache.fingerprint(copy, "classifier") != key  # new weights: a new export


def test_agreement_counts_changed_decisions():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(50, 8)).astype("float32")
    assert quality.agreement("embedder", vectors, vectors + 1e-4, {})["agreement"] == 1.0
    swapped = vectors.copy()
    swapped[[0, 1]] = vectors[[1, 0]]
    assert quality.agreement("embedder", vectors, swapped, {})["agreement"] == 0.96
    logits = rng.normal(size=(50, 3))
    flipped = logits.copy()
    flipped[:5] = -flipped[:5]
    changed = np.mean(logits[:5].argmax(-1) != flipped[:5].argmax(-1)) * 5 / 50
    assert quality.agreement("classifier", logits, flipped, {})["agreement"] == 1 - changed
    scores = np.arange(10.0)[:, None]
    assert quality.agreement("reranker", scores, scores[::-1], {})["agreement"] == 0.0
    rows = quality.split_rows(600, calibrate=True)
    assert len(rows[0]) == 300 and len(rows[1]) == 200 and rows[2]
    assert not set(rows[0]) & set(rows[1])


def test_span_agreement_compares_each_rows_best_token():
    """Regression: the question answerer's check compared per-row argmaxes with a per-token
    mask, which broadcast for one row and failed for several (200 held-out windows)."""
    rng = np.random.default_rng(0)
    start = rng.normal(size=(5, 8)).astype("float32")
    mask = np.ones((5, 8), dtype="int32")
    mask[:, 6:] = 0
    moved = start.copy()
    moved[0, 0] = moved[0].max() + 1.0  # row 0's best start changes
    moved[1:, 7] = 100.0  # a padding position: not a real token, no change
    reference = {"start_logits": start, "end_logits": start}
    quantized = {"start_logits": moved, "end_logits": start}
    record = quality.agreement("question_answerer", reference, quantized, {"padding_mask": mask})
    assert record["agreement"] == pytest.approx((4 / 5 + 1.0) / 2)
