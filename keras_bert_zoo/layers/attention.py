"""Scaled dot-product attention over padded keys: the fused op, and the explicit softmax.

`fused_attention` is `keras.ops.dot_product_attention`: the backend's fused kernel where it
has one (PyTorch's `scaled_dot_product_attention`; under JAX on NVIDIA GPUs Keras picks cuDNN
flash attention for bfloat16/float16 where cuDNN accepts the shapes, not yet run on a GPU
here), XLA's fusion of the same ops elsewhere. It cannot drop
attention probabilities, so `explicit_attention` (softmax(QK^T) written out, then dropout)
stays for training with attention dropout, as BERT was trained. Both take the query, key and
value as `[batch, length, heads, head_dim]`, mask the same keys and compute the softmax in
float32, and agree within float32 rounding (tested on TensorFlow, JAX and PyTorch).

Which one a model runs is its `attention` option ("auto", "fused" or "explicit"; an argument
of `kbz.build_encoder`, recorded in each block's config), resolved by `uses_fused_attention`.
"auto" follows one rule: the fused op where the backend has a fused attention kernel
(`fused_kernel`), the explicit form elsewhere, where Keras' fused op is the same matmuls and
softmax written out and the explicit form lays them out for batched matmuls
(benchmarks/RESULTS.md, "Fused attention", has the timings behind it).
"""

import math

import keras
from keras import ops

from keras_bert_zoo.layers.backend import jax, jax_platform, torch
from keras_bert_zoo.layers.common import padding_bias

ATTENTION = ("auto", "fused", "explicit")  # the `attention` option of a model


def attention_bias(padding_mask, dtype="float32"):
    """`[batch, seq]` 1/0 mask to an additive `[batch, 1, 1, seq]` bias over attended keys;
    a `[batch, queries, keys]` mask (packed rows, `kbz.packed_encoder`) to `[batch, 1, q, k]`."""
    bias = padding_bias(padding_mask, dtype)
    if len(padding_mask.shape) == 3:
        return ops.expand_dims(bias, 1)
    return ops.expand_dims(ops.expand_dims(bias, 1), 1)


def explicit_attention(
    query, key, value, padding_mask, dropout=None, training=None, normalize_last=None
):
    """softmax(QK^T / sqrt(d) + padding bias), dropped out by `dropout`, times V.

    Args:
        query: `[batch, queries, heads, head_dim]`.
        key, value: `[batch, keys, heads, head_dim]`.
        padding_mask: `[batch, keys]` int, 1 for real tokens, 0 for padding; or
            `[batch, queries, keys]`, 1 where a query attends to a key (packed rows).
        dropout: a `keras.layers.Dropout` applied to the attention probabilities, or None.
        training: passed to `dropout`.
        normalize_last: divide by the softmax's sums after the product with the values
            (`[.., queries, head_dim]`) instead of before it (`[.., queries, keys]`); the
            same result up to float32 rounding. None (the default) does so under JAX in a
            pass that drops no probability: XLA compiles the softmax from its parts there,
            and the division then reads `head_dim` values per query instead of one per key.
            TensorFlow and PyTorch run their own softmax kernel, which the parts would
            replace (benchmarks/RESULTS.md, "Fused attention").

    Returns `[batch, queries, heads, head_dim]` in the query's dtype.

    >>> q = k = v = keras.ops.ones((2, 4, 3, 8))  # batch 2, length 4, 3 heads of 8
    >>> mask = keras.ops.convert_to_tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    >>> tuple(kbz.layers.attention.explicit_attention(q, k, v, mask).shape)
    (2, 4, 3, 8)
    """
    # Heads first, then plain batched matmuls: XLA:CPU under JAX ran the einsums' batched dots
    # (their transposes inside) much slower (benchmarks/RESULTS.md, "Fused attention").
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
    key's transpose into the matmul, instead of three slices and four transposes.

    >>> q = k = v = keras.ops.ones((2, 3, 4, 8))  # batch 2, 3 heads, length 4, 8 each
    >>> mask = keras.ops.convert_to_tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    >>> tuple(kbz.layers.attention.heads_first_attention(q, k, v, mask).shape)
    (2, 3, 4, 8)
    """
    key = ops.transpose(key, (0, 1, 3, 2))  # [batch, heads, head_dim, keys]
    scores = ops.cast(ops.matmul(query, key), "float32") * (1.0 / math.sqrt(ops.shape(key)[2]))
    scores = scores + attention_bias(padding_mask)
    if normalize_last is None:
        drops = training and dropout is not None and dropout.rate > 0
        normalize_last = not drops and jax is not None
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

    >>> q = k = v = keras.ops.ones((2, 4, 3, 8))
    >>> mask = keras.ops.convert_to_tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    >>> tuple(kbz.layers.attention.fused_attention(q, k, v, mask).shape)
    (2, 4, 3, 8)
    """
    if _xla_cpu_rejects(query.dtype):
        return explicit_attention(query, key, value, padding_mask)
    batch, queries, keys = ops.shape(query)[0], ops.shape(query)[1], ops.shape(key)[1]
    mask = ops.cast(padding_mask, "bool")
    # `[batch, queries, keys]` masks come from packed rows (`kbz.packed_encoder`)
    mask = mask[:, None] if len(padding_mask.shape) == 3 else mask[:, None, None, :]
    mask = ops.broadcast_to(mask, (batch, 1, queries, keys))
    return ops.dot_product_attention(
        query,
        key,
        value,
        mask=mask,
        scale=1.0 / math.sqrt(ops.shape(query)[-1]),
        flash_attention=_flash_attention(),
    )


def fused_kernel() -> bool:
    """Whether the backend runs `keras.ops.dot_product_attention` as a fused attention kernel
    on this device: PyTorch (`scaled_dot_product_attention`, any device) and JAX on GPU and TPU
    (XLA's and cuDNN's fused attention, Splash on TPU). Not TensorFlow, where Keras writes the
    op out as einsums and a softmax, nor JAX on a CPU, where XLA:CPU does the same.
    """
    if jax is not None:
        return jax_platform() != "cpu"
    return torch is not None


def check_attention(attention: str) -> str:
    """`attention` if it is one of `ATTENTION`, else a ValueError naming the choices."""
    if attention not in ATTENTION:
        raise ValueError(
            f"`attention` must be one of {', '.join(map(repr, ATTENTION))}. "
            f"Received: attention={attention!r}"
        )
    return attention


def uses_fused_attention(attention: str) -> bool:
    """Whether a model with this `attention` option runs the fused op in passes that drop no
    attention probability (the fused op cannot drop them: those passes stay explicit):
    "fused" yes, "explicit" no, "auto" where the backend has a fused kernel (`fused_kernel`).

    >>> uses_fused_attention("explicit")
    False
    """
    if check_attention(attention) == "auto":
        return fused_kernel()
    return attention == "fused"


def _xla_cpu_rejects(dtype) -> bool:
    """JAX's fused float16 attention asks XLA:CPU for an F16_F16_F32 dot it does not have."""
    return keras.backend.standardize_dtype(dtype) == "float16" and jax_platform() == "cpu"


def _flash_attention():
    """Keras' own choice of a flash kernel (None: where it applies), except where it is wrong."""
    # Keras' TPU Splash kernel reads the first sequence's padding mask for the whole batch.
    if jax_platform() == "tpu":
        return False
    return keras.config.is_flash_attention_enabled()
