"""Numerical robustness at full size (slow: `make test-slow`): the bert_base shape at
sequence length 512 trains a few steps in mixed precision and stays finite; XLA equals eager."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_zoo as kbz

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _restore_policy():
    yield
    keras.mixed_precision.set_global_policy("float32")


def _batch(length=512, batch=2):
    rng = np.random.default_rng(0)
    mask = (np.arange(length)[None] < np.array([[length], [length - 100]])).astype("int32")
    return (
        {
            "token_ids": rng.integers(1000, 30522, (batch, length)).astype("int32") * mask,
            "segment_ids": (np.arange(length)[None] >= 256).astype("int32").repeat(batch, 0) * mask,
            "padding_mask": mask,
        },
        np.array([0, 1]),
    )


@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_bert_base_seq512_mixed_precision_trains_finite(precision):
    keras.mixed_precision.set_global_policy(precision)
    keras.utils.set_random_seed(0)
    model = kbz.from_preset(
        "bert_base_en_uncased", task="classifier", num_classes=2, load_weights=False
    )
    model.compile(
        kbz.training.create_optimizer(5e-5, total_steps=3, loss_scale=precision == "mixed_float16"),
        kbz.tasks.classifier_loss(2),
        jit_compile=True,
    )
    x, y = _batch()
    history = model.fit(x, y, epochs=3, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert np.isfinite(np.asarray(model(x), np.float32)).all()


def test_bert_base_seq512_xla_equals_eager():
    keras.utils.set_random_seed(0)
    encoder = kbz.from_preset("bert_base_en_uncased", load_weights=False)
    x, _ = _batch()
    eager = encoder(x)
    compiled = tf.function(encoder, jit_compile=True)(x)
    mask = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(
        np.asarray(compiled["sequence_output"])[mask],
        np.asarray(eager["sequence_output"])[mask],
        atol=1e-4,
    )
