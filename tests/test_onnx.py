"""ONNX export: ONNX Runtime's outputs equal the Keras model's for every task at any batch size
and sequence length; padding invariance holds in ONNX Runtime; int8 files are smaller and stay
close to float (the tiny model here, the real MiniLM checkpoint in a slow test); `kbz export
--format onnx` / `--quantize` / `--task embedder` end to end; bad input and a missing extra
are clear errors."""

import json
import sys
from pathlib import Path

import keras
import numpy as np
import onnxruntime as ort
import pytest
import tensorflow as tf

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main
from keras_bert_zoo.export import export_onnx, export_saved_model
from keras_bert_zoo.export.quantization import quantize_keras, quantize_onnx
from tests.conftest import TINY, random_inputs

# Two shapes (batch, length) per model: the ONNX graph has dynamic batch and sequence axes.
SHAPES = [(3, 12), (5, 40)]
TEXTS = ["The film was a delight from start to finish.", "naïve café in Zürich", "", "awful"]


def _session(directory):
    return ort.InferenceSession(str(directory / "model.onnx"), providers=["CPUExecutionProvider"])


def _run(session, inputs):
    names = [output.name for output in session.get_outputs()]
    feed = {name: np.asarray(value, np.int32) for name, value in inputs.items()}
    return dict(zip(names, session.run(None, feed), strict=True))


def _keras(model, inputs):
    outputs = model(inputs, training=False)
    outputs = outputs if isinstance(outputs, dict) else {"output_0": outputs}
    return {name: np.asarray(value) for name, value in outputs.items()}


def _model(task):
    keras.utils.set_random_seed(3)
    if task == "encoder":  # Google's tanh GELU; the task models use the exact erf GELU
        return kbz.build_encoder(**TINY, gelu_approximate=True)
    encoder = kbz.build_encoder(**TINY)
    builders = {
        "classifier": lambda: kbz.build_classifier(encoder, num_classes=3),
        "tagger": lambda: kbz.build_tagger(encoder, num_tags=5),
        "question_answerer": lambda: kbz.build_question_answerer(encoder),
        "embedder": lambda: kbz.build_embedder(encoder, pooling="mean"),
    }
    return builders[task]()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """`{task: (model, ONNX Runtime session, export directory)}`, exported once."""
    root = tmp_path_factory.mktemp("onnx")
    result = {}
    for task in ("classifier", "tagger", "question_answerer", "embedder", "encoder"):
        model = _model(task)
        path = export_onnx(model, root / task)
        result[task] = (model, _session(path), path)
    return result


@pytest.mark.parametrize(
    "task", ["classifier", "tagger", "question_answerer", "embedder", "encoder"]
)
@pytest.mark.e2e  # tf2onnx conversions and ONNX Runtime: another runtime's parity
def test_onnx_runtime_equals_keras_at_any_batch_and_length(exported, task, tmp_path):
    model, session, _ = exported[task]
    assert [i.name for i in session.get_inputs()] == ["token_ids", "segment_ids", "padding_mask"]
    assert all(i.type == "tensor(int32)" for i in session.get_inputs())
    assert all(i.shape == ["batch", "sequence"] for i in session.get_inputs())
    for batch, length in SHAPES:
        inputs = random_inputs(batch=batch, length=length, seed=length)
        expected, got = _keras(model, inputs), _run(session, inputs)
        assert set(got) == set(expected)
        for name, value in expected.items():
            assert got[name].shape == value.shape
            np.testing.assert_allclose(got[name], value, atol=1e-5, err_msg=f"{task} {name}")
    # the output names are those of the SavedModel's token-id signature
    export_saved_model(model, tmp_path / "sm" / "1", strings=False)
    signature = tf.saved_model.load(str(tmp_path / "sm" / "1")).signatures["serve_token_ids"]
    assert set(signature.structured_outputs) == {o.name for o in session.get_outputs()}


@pytest.mark.e2e  # tf2onnx conversions and ONNX Runtime: another runtime's parity
@pytest.mark.parametrize("task", ["classifier", "tagger", "embedder"])
def test_extra_padding_changes_nothing_in_onnx_runtime(exported, task):
    _, session, _ = exported[task]
    short = random_inputs(batch=3, length=12, lengths=[12, 7, 3])
    padded = {name: np.pad(value, ((0, 0), (0, 20))) for name, value in short.items()}
    a, b = _run(session, short)["output_0"], _run(session, padded)["output_0"]
    if task == "tagger":  # the real tokens' logits
        b, mask = b[:, :12], short["padding_mask"].astype(bool)
        a, b = a[mask], b[mask]
    np.testing.assert_allclose(b, a, atol=1e-5)


def test_bad_onnx_exports_are_clear_errors(tmp_path, monkeypatch):
    model = _model("classifier")
    with pytest.raises(ValueError, match="path is a directory"):
        export_onnx(model, tmp_path / "model.onnx")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "model.onnx").write_bytes(b"an earlier export")
    with pytest.raises(ValueError, match="already holds an ONNX export.*overwrite=True"):
        export_onnx(model, tmp_path / "taken")
    (tmp_path / "taken" / "notes.txt").write_text("mine")  # overwrite never deletes it
    with pytest.raises(ValueError, match=r"holds files kbz did not write \(notes.txt\)"):
        export_onnx(model, tmp_path / "taken", overwrite=True)
    assert (tmp_path / "taken" / "notes.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="`quantize` must be one of"):
        export_onnx(model, tmp_path / "q", quantize="int4")
    pretrainer = kbz.build_pretrainer(kbz.build_encoder(**TINY), max_predictions=2)
    with pytest.raises(ValueError, match="Pretraining models are not served"):
        export_onnx(pretrainer, tmp_path / "p")
    monkeypatch.setitem(sys.modules, "tf2onnx", None)  # as if the extra were not installed
    with pytest.raises(ImportError, match=r"pip install 'keras-bert-zoo\[onnx\]'"):
        export_onnx(model, tmp_path / "m")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def _tiny_preset(tmp_path, model):
    vocabulary = kbz.presets.load_preset_config("bert_tiny_en_uncased").vocabulary_path
    return kbz.save_preset(model, tmp_path / "preset", vocabulary=vocabulary, lowercase=True)


@pytest.mark.e2e  # tf2onnx conversions and ONNX Runtime: another runtime's parity
def test_kbz_export_onnx_from_a_preset_directory(tmp_path, capsys, monkeypatch):
    from tokenizers import BertWordPieceTokenizer

    keras.utils.set_random_seed(5)
    encoder = kbz.build_encoder(**{**TINY, "vocabulary_size": 30522})
    model = kbz.build_classifier(encoder, num_classes=2, label_names=["negative", "positive"])
    preset = _tiny_preset(tmp_path, model)
    destination = tmp_path / "onnx"
    run = ["export", str(preset), str(destination), "--format", "onnx", "--sequence-length", "16"]
    assert main(run) == 0
    assert "Exported" in capsys.readouterr().out
    config = json.loads((destination / "export.json").read_text())
    assert config["task"] == "classifier" and config["quantization"] is None
    assert config["task_config"]["label_names"] == ["negative", "positive"]
    assert (config["sequence_length"], config["lowercase"], config["outputs"]) == (
        16,
        True,
        ["output_0"],
    )
    # the sidecar is enough to tokenize without this package: Hugging Face `tokenizers`
    tokenizer = BertWordPieceTokenizer(str(destination / "vocab.txt"), lowercase=True)
    tokenizer.enable_truncation(config["sequence_length"])
    tokenizer.enable_padding(length=config["sequence_length"])
    encodings = tokenizer.encode_batch(TEXTS)
    ids = {
        "token_ids": np.array([e.ids for e in encodings], np.int32),
        "segment_ids": np.array([e.type_ids for e in encodings], np.int32),
        "padding_mask": np.array([e.attention_mask for e in encodings], np.int32),
    }
    pre = kbz.BertPreprocessor.from_preset(str(preset), sequence_length=16)
    ours = {name: value.numpy() for name, value in pre(tf.constant(TEXTS)).items()}
    for name in ids:
        np.testing.assert_array_equal(ids[name], ours[name])
    got = _run(_session(destination), ids)["output_0"]
    np.testing.assert_allclose(got, np.asarray(model(ours)), atol=1e-5)
    # a second export does not replace the first without --overwrite
    assert main(run) == 2
    assert "already holds an ONNX export. Choose another directory, or pass --overwrite" in (
        capsys.readouterr().err
    )
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert main([*run[:2], str(tmp_path / "other"), *run[3:]]) == 2
    assert "keras-bert-zoo[onnx]" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()


@pytest.mark.e2e  # tf2onnx conversions and ONNX Runtime: another runtime's parity
def test_kbz_export_int8_savedmodel_serves_the_keras_quantized_model(tmp_path):
    keras.utils.set_random_seed(6)
    encoder = kbz.build_encoder(**{**TINY, "vocabulary_size": 30522})
    preset = _tiny_preset(tmp_path, kbz.build_classifier(encoder, num_classes=2))
    destination = tmp_path / "sm" / "1"
    run = ["export", str(preset), str(destination), "--quantize", "int8", "--sequence-length", "32"]
    assert main(run) == 0
    quantized = quantize_keras(kbz.from_preset(str(preset), task="classifier"), "int8")
    assert any(w.dtype == "int8" for w in quantized.weights)
    pre = kbz.BertPreprocessor.from_preset(str(preset), sequence_length=32)
    serve = tf.saved_model.load(str(destination)).signatures["serving_default"]
    logits = np.asarray(quantized(pre(tf.constant(TEXTS))))
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    got = serve(text=tf.constant(TEXTS))["probabilities"].numpy()
    np.testing.assert_allclose(got, probabilities, atol=1e-5)


@pytest.mark.e2e  # tf2onnx conversions and ONNX Runtime: another runtime's parity
def test_kbz_export_embedder_of_a_plain_encoder_preset(tmp_path, capsys):
    keras.utils.set_random_seed(8)
    encoder = kbz.build_encoder(**{**TINY, "vocabulary_size": 30522})
    preset = _tiny_preset(tmp_path, encoder)
    destination = tmp_path / "emb" / "1"
    run = ["export", str(preset), str(destination), "--task", "embedder", "--sequence-length", "32"]
    assert main(run) == 0
    assert "(embedder, 32 tokens)" in capsys.readouterr().out  # the task and the length cut to
    serve = tf.saved_model.load(str(destination)).signatures["serving_default"]
    got = serve(text=tf.constant(TEXTS))["embeddings"].numpy()
    pre = kbz.BertPreprocessor.from_preset(str(preset), sequence_length=32)
    expected = np.asarray(kbz.build_embedder(encoder)(pre(tf.constant(TEXTS))))
    np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=-1), 1.0, atol=1e-5)
    model = tmp_path / "m.keras"
    encoder.save(model)
    assert main(["export", str(model), str(tmp_path / "k" / "1"), "--task", "embedder"]) == 2
    assert "--task applies to a preset directory" in capsys.readouterr().err


@pytest.mark.slow  # tf2onnx takes ~40 s to convert the 22M-parameter MiniLM on 2 cores
def test_minilm_onnx_embedder_equals_sentence_transformers_and_int8_stays_close(
    minilm_preset, tmp_path
):
    """The converted all-MiniLM-L6-v2 preset exports as an embedder by default (its
    sentence-transformers pooling); fp32 ONNX Runtime equals `SentenceTransformer.encode`
    (tests/fixtures/minilm_st_embeddings.*, 1e-5). int8 weights cannot keep 1e-5: each
    sentence's int8 vector must point where the float one does (cosine >= 0.95; measured
    0.974-0.995 per channel) and the nearest neighbours among the 8 sentences must stay the
    same, at under a third of the file size."""
    reference = dict(np.load(Path(__file__).parent / "fixtures" / "minilm_st_embeddings.npz"))
    ids = {k: reference[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    assert main(["export", str(minilm_preset), str(tmp_path / "fp32"), "--format", "onnx"]) == 0
    assert json.loads((tmp_path / "fp32" / "export.json").read_text())["task"] == "embedder"
    quantize_onnx(tmp_path / "fp32" / "model.onnx", tmp_path / "int8.onnx", "int8")
    vectors = {
        "fp32": _run(_session(tmp_path / "fp32"), ids)["output_0"],
        "int8": _run(ort.InferenceSession(str(tmp_path / "int8.onnx")), ids)["output_0"],
    }
    np.testing.assert_allclose(vectors["fp32"], reference["embeddings"], atol=1e-5)
    cosine = (vectors["fp32"] * vectors["int8"]).sum(-1)
    assert cosine.min() >= 0.95, cosine
    neighbours = {
        name: np.argsort(-(v @ v.T) + 2 * np.eye(len(v)), axis=1)[:, 0]
        for name, v in vectors.items()
    }
    np.testing.assert_array_equal(neighbours["int8"], neighbours["fp32"])
    size = (tmp_path / "int8.onnx").stat().st_size
    assert size < (tmp_path / "fp32" / "model.onnx").stat().st_size / 3


@pytest.mark.e2e  # tf2onnx conversions and ONNX Runtime: another runtime's parity
def test_kbz_export_of_a_sentence_transformers_preset_serves_embeddings(minilm_preset, tmp_path):
    """`kbz export` of the converted all-MiniLM-L6-v2 gives the embedder by default: the
    string-in SavedModel returns `embeddings` equal to `SentenceTransformer.encode`."""
    reference = dict(np.load(Path(__file__).parent / "fixtures" / "minilm_st_embeddings.npz"))
    provenance = json.loads(
        (Path(__file__).parent / "fixtures" / "minilm_st_embeddings.json").read_text()
    )
    destination = tmp_path / "emb" / "1"
    assert main(["export", str(minilm_preset), str(destination), "--sequence-length", "64"]) == 0
    serve = tf.saved_model.load(str(destination)).signatures["serving_default"]
    served = serve(text=tf.constant(provenance["sentences"]))["embeddings"].numpy()
    np.testing.assert_allclose(served, reference["embeddings"], atol=1e-5)


@pytest.mark.e2e  # tf2onnx conversions and ONNX Runtime: another runtime's parity
def test_int8_onnx_is_smaller_and_close_to_float(exported, tmp_path):
    """Dynamic int8 on the tiny embedder: per-channel weight rounding is at most half of
    1/127 of a channel's largest weight, so the unit vectors keep their direction (cosine
    >= 0.99) though not 1e-5; the file shrinks (the tiny model's size is mostly weights)."""
    model, session, float_path = exported["embedder"]
    path = export_onnx(model, tmp_path / "int8", quantize="int8")
    assert json.loads((path / "export.json").read_text())["quantization"] == "int8"
    inputs = random_inputs(batch=4, length=20)
    fp32, int8 = _run(session, inputs)["output_0"], _run(_session(path), inputs)["output_0"]
    assert not np.allclose(fp32, int8, atol=1e-5)  # the int8 file really is another model
    assert (fp32 * int8).sum(-1).min() >= 0.99
    sizes = [(p / "model.onnx").stat().st_size for p in (float_path, path)]
    assert sizes[1] < 0.7 * sizes[0], sizes
