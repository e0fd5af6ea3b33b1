"""The Threefry dropout of XLA-compiled steps: same statistics and contract as Keras' Dropout."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_zoo as kbz
from keras_bert_zoo.layers import Dropout
from keras_bert_zoo.layers.backend import in_xla_trace


def test_xla_traces_are_recognised():
    """If TensorFlow moves its XLA-context helper this fails (the layer would silently fall
    back to the slow generator)."""
    seen = {}

    def probe(x, key):
        seen[key] = in_xla_trace()
        return x

    tf.function(lambda x: probe(x, "xla"), jit_compile=True)(tf.ones(2))
    tf.function(lambda x: probe(x, "graph"))(tf.ones(2))
    probe(tf.ones(2), "eager")
    assert seen == {"xla": True, "graph": False, "eager": False}


@pytest.mark.parametrize("jit_compile", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_masks_drop_the_rate_and_rescale_the_rest(jit_compile, dtype):
    rate = 0.1
    layer = Dropout(rate, seed=7, dtype=dtype)
    step = tf.function(lambda x: layer(x, training=True), jit_compile=jit_compile)
    x = tf.ones([64, 4096], dtype)
    first, second = (step(x).numpy().astype("float32") for _ in range(2))
    for out in (first, second):
        dropped = np.mean(out == 0)
        # 262,144 draws: the standard error of the dropped fraction is 5.9e-4.
        assert abs(dropped - rate) < 0.003, dropped
        np.testing.assert_allclose(out[out != 0], 1 / (1 - rate), rtol=2e-3)
    assert np.mean((first == 0) != (second == 0)) > 0.1  # the seed advances every step
    assert np.array_equal(layer(x, training=False).numpy(), x.numpy())


def test_masks_are_deterministic_for_a_seed():
    def masks(seed):
        layer = Dropout(0.5, seed=seed)
        step = tf.function(lambda x: layer(x, training=True), jit_compile=True)
        return [step(tf.ones([8, 128])).numpy() for _ in range(2)]

    first, again, other = masks(3), masks(3), masks(4)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not np.array_equal(first[0], other[0])


def test_every_dropout_of_the_models_is_ours(tiny_architecture):
    """Embeddings, attention, hidden and head dropouts all take the fast path under XLA."""
    encoder = kbz.build_encoder(**tiny_architecture)
    models = [kbz.build_classifier(encoder, 2), kbz.build_tagger(encoder, 3)]
    found = [
        layer
        for model in models
        for layer in model._flatten_layers()
        if isinstance(layer, keras.layers.Dropout)
    ]
    # per model: embeddings, three per block (one per call site), the head
    assert len(found) == 2 * (1 + 3 * tiny_architecture["num_layers"]) + 2
    assert all(isinstance(layer, Dropout) for layer in found)
