"""Fused attention (`keras.ops.dot_product_attention`) against the explicit softmax, on TensorFlow.

The fused path runs in every pass that drops no attention probability; it must equal the
explicit path within float32 rounding (1e-5) with padding, all-padding rows and the
classifier's `[CLS]`-only last block, in prediction and in training with attention dropout 0.
JAX and PyTorch run the same checks in tests/test_backend_jax.py and test_backend_torch.py.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import TINY, random_inputs

import keras_bert_zoo as kbz
from keras_bert_zoo.layers.attention import explicit_attention, fused_attention


@pytest.fixture
def fused_calls(monkeypatch):
    """Counts the traces that call `keras.ops.dot_product_attention`."""
    calls = []
    original = keras.ops.dot_product_attention

    def counted(*args, **kwargs):
        calls.append(kwargs.get("mask").shape)
        return original(*args, **kwargs)

    monkeypatch.setattr(keras.ops, "dot_product_attention", counted)
    return calls


def qkv_and_mask(queries=9, keys=9, seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(3, queries, 2, 8)).astype("float32")
    key, value = (rng.normal(size=(3, keys, 2, 8)).astype("float32") for _ in range(2))
    mask = random_inputs(batch=3, length=keys, lengths=[keys, 4, 0])["padding_mask"]
    return query, key, value, mask


@pytest.mark.parametrize("queries", [9, 1])  # 1: the `[CLS]`-only last block's query
def test_fused_equals_explicit_attention(queries):
    query, key, value, mask = qkv_and_mask(queries)
    explicit = keras.ops.convert_to_numpy(explicit_attention(query, key, value, mask))
    fused = keras.ops.convert_to_numpy(fused_attention(query, key, value, mask))
    assert fused.shape == (3, queries, 2, 8)
    np.testing.assert_allclose(fused, explicit, atol=1e-5)
    assert np.isfinite(fused).all()  # the all-padding row too


def test_fused_attention_ignores_padded_keys():
    query, key, value, mask = qkv_and_mask()
    changed_key, changed_value = key.copy(), value.copy()
    changed_key[1, 4:], changed_value[1, 4:] = 100.0, -100.0  # row 1's padded positions
    before = keras.ops.convert_to_numpy(fused_attention(query, key, value, mask))
    after = keras.ops.convert_to_numpy(fused_attention(query, changed_key, changed_value, mask))
    np.testing.assert_array_equal(before[:2], after[:2])


def model_pair(task="encoder", **architecture):
    """Two models with the same weights: fused attention on, and off. A classifier runs its
    last block at `[CLS]` only."""
    keras.utils.set_random_seed(4)
    models = [kbz.build_encoder(**{**TINY, **architecture}) for _ in range(2)]
    if task == "classifier":
        models = [kbz.build_classifier(m, num_classes=3, dropout=0.0) for m in models]
    models[1].set_weights(models[0].get_weights())
    return models[0], kbz.encoder.set_fused_attention(models[1], False)


@pytest.mark.parametrize("task", ["encoder", "classifier"])
def test_prediction_is_fused_and_equals_the_explicit_path(task, fused_calls):
    fused, explicit = model_pair(task)  # BERT's dropout 0.1: prediction still runs fused
    x = random_inputs(batch=4, length=10, lengths=[10, 7, 2, 1])
    fused_calls.clear()  # building the functional models traced the blocks once
    a = fused.predict(x, verbose=0)
    traced = len(fused_calls)
    b = explicit.predict(x, verbose=0)
    assert traced > 0 and len(fused_calls) == traced  # the explicit model never called it
    if task == "classifier":
        assert (4, 1, 1, 10) in fused_calls  # the `[CLS]`-only block: one query row
        np.testing.assert_allclose(a, b, atol=1e-5)
        return
    real = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(a["sequence_output"][real], b["sequence_output"][real], atol=1e-5)
    np.testing.assert_allclose(a["pooled_output"], b["pooled_output"], atol=1e-5)


def gradients(model, x, y):
    loss = kbz.tasks.classifier_loss(3)
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        value = loss(y, logits)
    return logits, tape.gradient(value, model.trainable_variables)


def test_training_with_attention_dropout_0_is_fused_and_equals_the_explicit_path(fused_calls):
    models = model_pair("classifier", dropout=0.0, attention_dropout=0.0)
    x, y = random_inputs(batch=4, length=9, lengths=[9, 6, 2, 1]), np.array([0, 1, 2, 1])
    fused_calls.clear()  # building the functional models traced the blocks once
    a, a_gradients = gradients(models[0], x, y)
    assert fused_calls  # the training pass ran the fused op
    b, b_gradients = gradients(models[1], x, y)
    np.testing.assert_allclose(a, b, atol=1e-5)
    for g, h in zip(a_gradients, b_gradients, strict=True):
        np.testing.assert_allclose(tf.convert_to_tensor(g), tf.convert_to_tensor(h), atol=1e-5)


def test_training_with_attention_dropout_keeps_the_explicit_path(fused_calls):
    keras.utils.set_random_seed(5)
    encoder = kbz.build_encoder(**TINY, dropout=0.0, attention_dropout=0.5)
    x = random_inputs()
    fused_calls.clear()  # building the functional model traced the blocks once
    encoder(x, training=True)
    assert not fused_calls
    encoder(x, training=False)
    assert fused_calls
    dropped = [encoder(x, training=True)["sequence_output"] for _ in range(2)]
    assert np.abs(np.asarray(dropped[0]) - np.asarray(dropped[1])).max() > 1e-3


def test_attention_dropout_defaults_to_dropout_and_survives_saving(tmp_path):
    default = kbz.build_encoder(**TINY, dropout=0.2)
    assert kbz.encoder.architecture_of(default)["attention_dropout"] == 0.2
    encoder = kbz.build_encoder(**TINY, attention_dropout=0.0)
    block = encoder.get_layer("transformer_layer_0")
    assert (block.dropout, block.attention_dropout_rate, block.attention_dropout.rate) == (
        0.1,
        0.0,
        0.0,
    )
    encoder.save(tmp_path / "encoder.keras")
    restored = keras.models.load_model(tmp_path / "encoder.keras")
    assert kbz.encoder.architecture_of(restored)["attention_dropout"] == 0.0
    with pytest.raises(ValueError, match=r"`attention_dropout` must be a number in \[0, 1\)"):
        kbz.build_encoder(**TINY, attention_dropout=1.0)


def test_normalized_architectures_resolve_attention_dropout():
    bundled = {**TINY, "dropout": 0.1}  # the bundled presets do not name attention_dropout
    converted = {**bundled, "attention_dropout": 0.1}
    assert kbz.architecture.normalized(bundled) == kbz.architecture.normalized(converted)
    assert kbz.architecture.normalized(bundled) != kbz.architecture.normalized(
        {**bundled, "attention_dropout": 0.0}
    )
    assert kbz.architecture.attention_dropout_rate({**bundled, "dropout": 0.3}) == 0.3


def test_mixed_float16_fused_attention_stays_finite():
    encoder = kbz.build_encoder(**TINY, dtype="mixed_float16")
    out = encoder.predict(random_inputs(batch=2, length=8, lengths=[8, 0]), verbose=0)
    assert np.isfinite(np.asarray(out["sequence_output"], np.float32)).all()
