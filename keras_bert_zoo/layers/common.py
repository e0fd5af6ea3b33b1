"""BERT's fixed constants and the small helpers every layer and builder shares.

The constants never vary between BERT checkpoints, so they stay in code rather than in
presets (what does vary, such as the GELU form, is an explicit argument).
"""

import contextlib
import contextvars

import keras
import ml_dtypes
import numpy as np
from keras import ops

from keras_bert_zoo.layers.backend import tensorflow_without_xla

INITIALIZER_STDDEV = 0.02  # BERT's truncated-normal initializer range.
LAYER_NORM_EPSILON = 1e-12  # BERT's LayerNorm epsilon.
MASK_BIAS = -1e9  # added to scores of padded positions; finite, so all-padding rows stay finite.


_WEIGHTS_FOLLOW = contextvars.ContextVar("kbz_weights_follow", default=False)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertTruncatedNormal(keras.initializers.TruncatedNormal):
    """Keras' `TruncatedNormal`, except inside `weights_follow()`: there it draws nothing and
    returns zeros from the host, because a checkpoint's values are assigned next. Under JAX
    each new shape's draw compiles a program, which made most of a preset's load time
    (benchmarks/RESULTS.md, "Command-line start-up")."""

    def __call__(self, shape, dtype=None):
        if _WEIGHTS_FOLLOW.get():
            dtype = keras.backend.standardize_dtype(dtype or keras.config.floatx())
            return np.zeros(shape, getattr(ml_dtypes, dtype, dtype))
        return super().__call__(shape, dtype)


@contextlib.contextmanager
def weights_follow():
    """Layers built inside start from zeros, not BERT's random draw (`BertTruncatedNormal`).

    For a model whose weights are assigned right after it is built: every variable built
    inside must then be assigned, or drawn again with its layer's initializer
    (`saving.weights.draw_again`, which `from_preset` and the checkpoint converters call for
    the few a file may lack, such as the pooler).
    """
    token = _WEIGHTS_FOLLOW.set(True)
    try:
        yield
    finally:
        _WEIGHTS_FOLLOW.reset(token)


def initializer() -> keras.initializers.Initializer:
    """A fresh truncated-normal initializer with BERT's standard deviation."""
    return BertTruncatedNormal(stddev=INITIALIZER_STDDEV)


def dense(units: int, name: str, dtype=None, **kwargs) -> keras.layers.Dense:
    """`keras.layers.Dense` initialized as BERT initializes every projection."""
    return keras.layers.Dense(
        units, kernel_initializer=initializer(), dtype=dtype, name=name, **kwargs
    )


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class LayerNorm(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` (the same weights and config) whose TensorFlow call
    runs fewer full-size ops.

    Keras computes `x * inv + (beta - mean * inv)` with `inv = rsqrt(var + eps) * gamma`, and
    both `inv` and `mean * inv` have the input's full shape; this computes
    `(x - mean) * inv + beta`. TensorFlow without XLA (`kbz embed`, `kbz predict`,
    SavedModels) runs every op on its own, and there this form and the encoder block's
    heads-first attention made MiniLM's embedding passes faster at the same vectors
    (benchmarks/RESULTS.md, "kbz embed vs sentence-transformers recipe"). XLA fuses either
    form and PyTorch runs its own kernel, so they, and any axis or option but BERT's, take
    Keras' call.
    """

    def call(self, inputs):
        lean = self.axis in (-1, [-1]) and self.center and self.scale and not self.rms_scaling
        if not (lean and tensorflow_without_xla()):
            return super().call(inputs)
        x = ops.cast(inputs, "float32")  # in float32 under mixed precision, as Keras does
        centered = x - ops.mean(x, axis=-1, keepdims=True)
        variance = ops.mean(ops.square(centered), axis=-1, keepdims=True)
        inverse = ops.rsqrt(variance + self.epsilon) * ops.cast(self.gamma, "float32")
        return ops.cast(centered * inverse + ops.cast(self.beta, "float32"), self.compute_dtype)


def layer_norm(name: str, dtype=None) -> LayerNorm:
    """`LayerNorm` (Keras' `LayerNormalization`) with BERT's epsilon."""
    return LayerNorm(epsilon=LAYER_NORM_EPSILON, dtype=dtype, name=name)


def check_positive_int(name: str, value) -> int:
    """Returns `value` if it is a positive integer (not a bool), else a Keras-style error."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}")
    return value


def check_rate(name: str, value) -> float:
    """Returns `value` as a float if it lies in [0, 1), else a Keras-style error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"`{name}` must be a number in [0, 1). Received: {name}={value!r}")
    return float(value)


def padding_bias(padding_mask, dtype="float32"):
    """`[batch, seq]` 1/0 mask to an additive `[batch, seq]` bias: 0 for real, MASK_BIAS else."""
    return (1.0 - ops.cast(padding_mask, dtype)) * MASK_BIAS
