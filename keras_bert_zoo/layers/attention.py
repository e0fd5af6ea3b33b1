"""Scaled dot-product attention over padded keys: the fused op, and the explicit softmax.

`fused_attention` is `keras.ops.dot_product_attention`: the backend's fused kernel where it
has one (PyTorch's `scaled_dot_product_attention`; under JAX on NVIDIA GPUs Keras picks cuDNN
flash attention for bfloat16/float16 where cuDNN accepts the shapes, not yet run on a GPU
here), XLA's fusion of the same ops elsewhere. It cannot drop
attention probabilities, so `explicit_attention` (softmax(QK^T) written out, then dropout)
stays for training with attention dropout, as BERT was trained. Both take the query, key and
value as `[batch, length, heads, head_dim]`, mask the same keys and compute the softmax in
float32, and agree within float32 rounding (tested on TensorFlow, JAX and PyTorch).

The fused op is not always the faster one: `fused_is_faster` says where it is, as measured
(benchmarks/RESULTS.md, "Fused attention"), and the encoder block takes the explicit path
elsewhere unless told otherwise.
"""

import math

import keras
from keras import ops

from keras_bert_zoo.layers.backend import in_xla_trace, jax, jax_platform, tf
from keras_bert_zoo.layers.common import padding_bias


def attention_bias(padding_mask, dtype="float32"):
    """`[batch, seq]` 1/0 mask to an additive `[batch, 1, 1, seq]` bias over attended keys."""
    return ops.expand_dims(ops.expand_dims(padding_bias(padding_mask, dtype), 1), 1)


def explicit_attention(
    query, key, value, padding_mask, dropout=None, training=None, normalize_last=None
):
    """softmax(QK^T / sqrt(d) + padding bias), dropped out by `dropout`, times V.

    Args:
        query: `[batch, queries, heads, head_dim]`.
        key, value: `[batch, keys, heads, head_dim]`.
        padding_mask: `[batch, keys]` int, 1 for real tokens, 0 for padding.
        dropout: a `keras.layers.Dropout` applied to the attention probabilities, or None.
        training: passed to `dropout`.
        normalize_last: divide by the softmax's sums after the product with the values
            (`[.., queries, head_dim]`) instead of before it (`[.., queries, keys]`); the
            same result up to float32 rounding. None (the default) does so where it is the
            faster form: under JAX on a CPU in a pass that drops no probability, where XLA
            ran the op 1.4x faster so at bert_small's [32, 128] and 1.8x at MiniLM's
            [32, 256] (benchmarks/RESULTS.md, "Fused attention"); TensorFlow's graph and
            PyTorch run their own softmax kernel faster than its parts.

    Returns `[batch, queries, heads, head_dim]` in the query's dtype.

    >>> context = kbz.layers.attention.explicit_attention(q, k, v, mask)
    """
    # Heads first, then plain batched matmuls: XLA:CPU under JAX ran the einsums' batched dots
    # (their transposes inside) at half this speed; TensorFlow runs both forms alike.
    heads_first = [ops.transpose(x, (0, 2, 1, 3)) for x in (query, key, value)]
    context = heads_first_attention(*heads_first, padding_mask, dropout, training, normalize_last)
    return ops.transpose(context, (0, 2, 1, 3))


def heads_first_attention(
    query, key, value, padding_mask, dropout=None, training=None, normalize_last=None
):
    """`explicit_attention` with the query, key, value and result heads first:
    `[batch, heads, length, head_dim]`, the layout its batched matmuls read.

    The encoder block transposes its fused QKV projection to this layout once: TensorFlow's
    graph then takes each of the three as a view (a slice of the first axis) and folds the
    key's transpose into the matmul, where three slices and four transposes ran before
    (benchmarks/RESULTS.md, "kbz embed vs sentence-transformers recipe").

    >>> context = kbz.layers.attention.heads_first_attention(q, k, v, mask)
    """
    key = ops.transpose(key, (0, 1, 3, 2))  # [batch, heads, head_dim, keys]
    scores = ops.cast(ops.matmul(query, key), "float32") * (1.0 / math.sqrt(ops.shape(key)[2]))
    scores = scores + attention_bias(padding_mask)
    if normalize_last is None:
        drops = training and dropout is not None and dropout.rate > 0
        normalize_last = not drops and jax_platform() == "cpu"
    if normalize_last:
        # Dropout scales each weight, so it commutes with the division by each row's sum.
        weights = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True))
        sums = ops.sum(weights, axis=-1, keepdims=True)
        weights = ops.cast(weights, query.dtype)
    else:
        weights = ops.cast(ops.softmax(scores, axis=-1), query.dtype)
    if dropout is not None:
        weights = dropout(weights, training=training)
    context = ops.matmul(weights, value)
    if normalize_last:
        context = ops.cast(ops.cast(context, "float32") / sums, query.dtype)
    return context


def fused_attention(query, key, value, padding_mask):
    """`keras.ops.dot_product_attention` with padded keys masked out; no dropout.

    The same arguments and result as `explicit_attention` without `dropout`. The boolean
    mask (not an additive bias) keeps float16 finite, and it is broadcast over the queries
    because cuDNN reads a mask only in the full `[.., queries, keys]` layout. Keras'
    `keras.config.disable_flash_attention()` keeps the fused op but not the flash kernel.
    float16 under JAX on CPU takes the explicit path (XLA:CPU cannot compile the fused one).

    >>> context = kbz.layers.attention.fused_attention(q, k, v, mask)
    """
    if _xla_cpu_rejects(query.dtype):
        return explicit_attention(query, key, value, padding_mask)
    batch, queries, keys = ops.shape(query)[0], ops.shape(query)[1], ops.shape(key)[1]
    mask = ops.cast(padding_mask, "bool")[:, None, None, :]
    mask = ops.broadcast_to(mask, (batch, 1, queries, keys))
    return ops.dot_product_attention(
        query,
        key,
        value,
        mask=mask,
        scale=1.0 / math.sqrt(ops.shape(query)[-1]),
        flash_attention=_flash_attention(),
    )


def fused_is_faster() -> bool:
    """Whether `fused_attention` beats `explicit_attention` here (measured on a CPU and
    expected of the accelerators' kernels; benchmarks/RESULTS.md, "Fused attention").

    Yes on PyTorch (its fused SDPA kernel), under JAX on GPU and TPU (cuDNN, Splash) and in a
    TensorFlow trace under XLA. No under JAX on a CPU, where XLA writes the fused op out as
    einsums and ran MiniLM's attention at [32, 256] in 113 ms against the explicit path's 62,
    and in TensorFlow's graph without XLA (56 against 37 ms), the graph `kbz embed` and
    `kbz predict` run (`benchmarks/attention_paths.py`).
    """
    if jax is not None:
        return jax_platform() != "cpu"
    if tf is not None:
        return in_xla_trace()
    return True


def _xla_cpu_rejects(dtype) -> bool:
    """JAX's fused float16 attention asks XLA:CPU for an F16_F16_F32 dot it does not have."""
    return keras.backend.standardize_dtype(dtype) == "float16" and jax_platform() == "cpu"


def _flash_attention():
    """Keras' own choice of a flash kernel (None: where it applies), except where it is wrong."""
    # Keras' TPU Splash kernel reads the first sequence's padding mask for the whole batch.
    if jax_platform() == "tpu":
        return False
    return keras.config.is_flash_attention_enabled()
