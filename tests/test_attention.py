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
from conftest import (
    TINY,
    attention_inputs,
    check_fused_prediction,
    check_fused_training_step,
    check_normalize_last,
    fused_and_explicit,
    random_inputs,
)

import keras_bert_zoo as kbz
from keras_bert_zoo.layers.attention import explicit_attention, fused_attention, fused_kernel


@pytest.mark.parametrize("queries", [9, 1])  # 1: the `[CLS]`-only last block's query
def test_fused_equals_explicit_attention(queries):
    query, key, value, mask = attention_inputs(queries)
    explicit = keras.ops.convert_to_numpy(explicit_attention(query, key, value, mask))
    fused = keras.ops.convert_to_numpy(fused_attention(query, key, value, mask))
    assert fused.shape == (3, queries, 2, 8)
    np.testing.assert_allclose(fused, explicit, atol=1e-5)
    assert np.isfinite(fused).all()  # the all-padding row too


@pytest.mark.parametrize("queries", [9, 1])
def test_normalizing_after_the_values_equals_the_softmax_first(queries):
    check_normalize_last(queries)


def test_fused_attention_ignores_padded_keys():
    query, key, value, mask = attention_inputs()
    changed_key, changed_value = key.copy(), value.copy()
    changed_key[1, 4:], changed_value[1, 4:] = 100.0, -100.0  # row 1's padded positions
    before = keras.ops.convert_to_numpy(fused_attention(query, key, value, mask))
    after = keras.ops.convert_to_numpy(fused_attention(query, changed_key, changed_value, mask))
    np.testing.assert_array_equal(before[:2], after[:2])


@pytest.mark.parametrize("task", ["encoder", "classifier"])
def test_prediction_is_fused_and_equals_the_explicit_path(task, fused_calls):
    check_fused_prediction(task, fused_calls)


def test_training_with_attention_dropout_0_is_fused_and_equals_the_explicit_path(fused_calls):
    check_fused_training_step(fused_calls)


def test_training_gradients_with_attention_dropout_0_equal_the_explicit_path():
    models = fused_and_explicit("classifier", dropout=0.0, attention_dropout=0.0)
    x, y = random_inputs(batch=4, length=9, lengths=[9, 6, 2, 1]), np.array([0, 1, 2, 1])
    loss = kbz.tasks.classifier_loss(3)
    results = []
    for model in models:
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            value = loss(y, logits)
        results.append((logits, tape.gradient(value, model.trainable_variables)))
    (a, a_gradients), (b, b_gradients) = results
    np.testing.assert_allclose(a, b, atol=1e-5)
    for g, h in zip(a_gradients, b_gradients, strict=True):
        np.testing.assert_allclose(tf.convert_to_tensor(g), tf.convert_to_tensor(h), atol=1e-5)


def test_training_with_attention_dropout_keeps_the_explicit_path(fused_calls):
    keras.utils.set_random_seed(5)
    encoder = kbz.build_encoder(**TINY, dropout=0.0, attention_dropout=0.5)
    kbz.encoder.set_attention(encoder, "fused")  # fused wherever no probability is dropped
    x = random_inputs()
    fused_calls.clear()  # building the functional model traced the blocks once
    encoder(x, training=True)
    assert not fused_calls
    encoder(x, training=False)
    assert fused_calls
    dropped = [encoder(x, training=True)["sequence_output"] for _ in range(2)]
    assert np.abs(np.asarray(dropped[0]) - np.asarray(dropped[1])).max() > 1e-3


def test_by_default_tensorflow_runs_the_explicit_softmax_and_fused_when_asked(fused_calls):
    """TensorFlow has no fused attention kernel (Keras writes the fused op out as einsums and
    a softmax), so "auto" takes the explicit softmax in its graph, eagerly and under XLA;
    `attention="fused"` takes the fused op in each, with the same outputs."""
    assert not fused_kernel()
    keras.utils.set_random_seed(5)
    encoder = kbz.build_encoder(**TINY)
    fused = kbz.build_encoder(**TINY, attention="fused")
    fused.set_weights(encoder.get_weights())
    x = random_inputs()
    real = x["padding_mask"].astype(bool)
    fused_calls.clear()
    expected = encoder(x)["sequence_output"]
    for model, calls in ((encoder, 0), (fused, 2)):  # TINY has 2 blocks
        for jit_compile in (False, True):
            fused_calls.clear()
            run = tf.function(lambda x, m=model: m(x)["sequence_output"], jit_compile=jit_compile)
            out = np.asarray(run(x))
            assert len(fused_calls) == calls, (model.name, jit_compile)
            np.testing.assert_allclose(out[real], np.asarray(expected)[real], atol=1e-5)


def test_the_attention_option_is_checked_and_saved(tmp_path):
    with pytest.raises(ValueError, match="`attention` must be one of 'auto', 'fused', 'explicit'"):
        kbz.build_encoder(**TINY, attention="flash")
    encoder = kbz.build_encoder(**TINY, attention="fused")
    encoder.save(tmp_path / "encoder.keras")
    restored = keras.models.load_model(tmp_path / "encoder.keras")
    assert restored.get_layer("transformer_layer_1").attention == "fused"
    kbz.encoder.set_attention(restored, "explicit")
    assert {b.attention for b in restored.layers if b.name.startswith("transformer_")} == {
        "explicit"
    }
    with pytest.raises(ValueError, match="Received: attention='fast'"):
        kbz.encoder.set_attention(restored, "fast")


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
