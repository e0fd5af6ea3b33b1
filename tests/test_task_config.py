"""The task and its settings are part of the model's Keras config: a `.keras` round trip
keeps them, presets write them, and `kbz export` reads them instead of guessing from output
shapes (which exported a multi-label classifier with softmax before)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_zoo as kbz
from keras_bert_zoo.cli import main

LENGTH = 16
TEXTS = ["a fine film", "dull and long", "Steve Jobs founded Apple ."]
CONTEXTS = ["Apple was founded in Cupertino.", "It rained.", "In 1976."]
BUILDERS = {
    "multi_label": lambda e: kbz.build_classifier(
        e, 3, multi_label=True, label_names=["a", "b", "c"]
    ),
    "regression": lambda e: kbz.build_classifier(e, 1),
    "tagger": lambda e: kbz.build_tagger(e, 4, label_names=["O", "B-x", "I-x", "B-y"]),
    "question_answerer": kbz.build_question_answerer,
    "pretrainer": lambda e: kbz.build_pretrainer(e, max_predictions=5),
    "encoder": lambda e: e,
}


def _encoder():
    keras.utils.set_random_seed(3)
    return kbz.build_encoder(
        vocabulary_size=30522,
        num_layers=1,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=64,
    )


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("keras_files")
    models = {}
    for name, build in BUILDERS.items():
        model = build(_encoder())
        model.save(root / f"{name}.keras")
        models[name] = (model, root / f"{name}.keras")
    return models


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_task_and_settings_survive_a_keras_round_trip(saved, name):
    model, path = saved[name]
    loaded = kbz.load_model(path)
    assert (loaded.task, dict(loaded.task_config)) == (model.task, dict(model.task_config))
    shapes = loaded.output_shape  # one shape, or one per output (a dict or a list)
    shapes = list(shapes.values()) if isinstance(shapes, dict) else shapes
    for shape in shapes if isinstance(shapes[0], (tuple, list)) else [shapes]:
        assert shape[0] is None  # the batch is unknown, not 1
    plain = keras.models.load_model(path, safe_mode=True)  # registered: a BertModel too
    assert plain.task == model.task


def test_settings_are_the_builders_arguments(saved):
    assert saved["multi_label"][0].task_config == {
        "num_classes": 3,
        "dropout": 0.1,
        "multi_label": True,
        "label_names": ["a", "b", "c"],
    }
    assert saved["pretrainer"][0].task_config == {"max_predictions": 5}
    with pytest.raises(ValueError, match="must name each of the 3 classes"):
        kbz.build_classifier(_encoder(), 3, label_names=["a", "b"])


def _export(path, tmp_path, name):
    destination = tmp_path / name / "1"
    assert (
        main(
            [
                "export",
                str(path),
                str(destination),
                "--preset",
                "bert_tiny_en_uncased",
                "--sequence-length",
                str(LENGTH),
            ]
        )
        == 0
    )
    return tf.saved_model.load(str(destination)).signatures["serving_default"]


def _inputs(texts, pairs=None):
    pre = kbz.BertPreprocessor.from_preset("bert_tiny_en_uncased", sequence_length=LENGTH)
    return (
        pre(tf.constant(texts)) if pairs is None else pre((tf.constant(texts), tf.constant(pairs)))
    )


def test_multi_label_keras_file_exports_sigmoid_probabilities(saved, tmp_path):
    model, path = saved["multi_label"]
    out = _export(path, tmp_path, "multi_label")(text=tf.constant(TEXTS))
    logits = np.asarray(model(_inputs(TEXTS)))
    np.testing.assert_allclose(out["probabilities"].numpy(), 1 / (1 + np.exp(-logits)), atol=1e-5)
    assert not np.allclose(out["probabilities"].numpy().sum(-1), 1.0)
    assert set(out["label_name"].numpy().astype(str)) <= {"a", "b", "c"}


def test_regression_tagger_and_qa_keras_files_export_their_own_outputs(saved, tmp_path):
    model, path = saved["regression"]
    out = _export(path, tmp_path, "regression")(text=tf.constant(TEXTS))
    np.testing.assert_allclose(
        out["score"].numpy(), np.asarray(model(_inputs(TEXTS)))[:, 0], atol=1e-5
    )
    model, path = saved["tagger"]
    out = _export(path, tmp_path, "tagger")(text=tf.constant(TEXTS))
    tags = np.asarray(model(_inputs(TEXTS))).argmax(-1)
    np.testing.assert_array_equal(out["tags"].numpy()[:, 0], tags[:, 0])
    assert out["word_tag_names"].numpy()[2, 0].decode() in {"O", "B-x", "I-x", "B-y"}
    model, path = saved["question_answerer"]
    out = _export(path, tmp_path, "qa")(text=tf.constant(TEXTS), text_pair=tf.constant(CONTEXTS))
    expected = model(_inputs(TEXTS, CONTEXTS))
    np.testing.assert_allclose(out["start_logits"].numpy(), expected["start_logits"], atol=1e-5)
    assert all(
        text.decode() in context
        for text, context in zip(out["answer_text"].numpy(), CONTEXTS, strict=True)
    )


def test_a_pretrainer_or_a_plain_keras_model_is_not_guessed(saved, tmp_path, capsys):
    _, path = saved["pretrainer"]
    assert main(["export", str(path), str(tmp_path / "p" / "1"), "--ids-only"]) == 2
    assert "Pretraining models are not served" in capsys.readouterr().err
    inputs = keras.Input((4,))
    plain = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    with pytest.raises(ValueError, match="records no servable task"):
        kbz.export_saved_model(plain, tmp_path / "q" / "1", strings=False)
