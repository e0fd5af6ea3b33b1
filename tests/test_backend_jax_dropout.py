"""`kbz.layers.Dropout` on JAX: masks from XLA's Threefry, Keras' contract (issue 27).

Collected only in `make test`'s JAX process (conftest.py).
"""

import jax
import keras
import numpy as np
import pytest

from keras_bert_zoo.layers import Dropout


def _stateless_step(layer):
    """One jitted training call, as Keras' JAX trainer runs it: the seed state goes in and out."""

    @jax.jit
    def step(state, x):
        out, state = layer.stateless_call([], state, x, training=True)
        return out, state

    return step


@pytest.mark.parametrize("jit", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_masks_drop_the_rate_and_rescale_the_rest(jit, dtype):
    rate = 0.1
    layer = Dropout(rate, seed=7, dtype=dtype)
    x = keras.ops.ones([64, 4096], dtype)
    if jit:
        step, state = _stateless_step(layer), [v.value for v in layer.non_trainable_variables]
        first, state = step(state, x)
        second, state = step(state, x)
    else:
        first, second = layer(x, training=True), layer(x, training=True)
    first, second = (np.asarray(out, "float32") for out in (first, second))
    for out in (first, second):
        dropped = np.mean(out == 0)
        # 262,144 draws: the standard error of the dropped fraction is 5.9e-4.
        assert abs(dropped - rate) < 0.003, dropped
        np.testing.assert_allclose(out[out != 0], 1 / (1 - rate), rtol=4e-3)
    assert np.mean((first == 0) != (second == 0)) > 0.1  # the seed advances every call
    assert np.array_equal(np.asarray(layer(x, training=False)), np.asarray(x))


def test_masks_are_deterministic_for_a_seed():
    def masks(seed):
        layer = Dropout(0.5, seed=seed)
        return [np.asarray(layer(keras.ops.ones([8, 128]), training=True)) for _ in range(2)]

    first, again, other = masks(3), masks(3), masks(4)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not np.array_equal(first[0], other[0])
