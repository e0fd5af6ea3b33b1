"""The post-LayerNorm transformer encoder block of BERT, with a fused QKV projection.

Differs from the original in layout only: query, key and value are one `[hidden, 3 * hidden]`
kernel (one matmul instead of three; the checkpoint converters split and join it), and the
attention softmax always runs in float32 so mixed precision cannot overflow it.
"""

import math

import keras
from keras import ops

from keras_bert_zoo.layers.dropout import Dropout
from keras_bert_zoo.layers.embeddings import INITIALIZER_STDDEV

LAYER_NORM_EPSILON = 1e-12  # BERT's LayerNorm epsilon; never varies between checkpoints.
MASK_BIAS = -1e9  # added to scores of padded keys; finite, so all-padding rows stay finite.


def _dense(units: int, name: str, dtype) -> keras.layers.Dense:
    return keras.layers.Dense(
        units,
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=INITIALIZER_STDDEV),
        dtype=dtype,
        name=name,
    )


def _layer_norm(name: str, dtype) -> keras.layers.LayerNormalization:
    return keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, dtype=dtype, name=name)


def attention_bias(padding_mask, dtype="float32"):
    """`[batch, seq]` 1/0 mask to an additive `[batch, 1, 1, seq]` bias over attended keys."""
    mask = ops.cast(padding_mask, dtype)
    return ops.expand_dims(ops.expand_dims((1.0 - mask) * MASK_BIAS, 1), 1)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class FirstToken(keras.layers.Layer):
    """`[batch, seq, hidden]` to `[batch, hidden]`: the `[CLS]` position the pooler reads."""

    def call(self, sequence):
        return sequence[:, 0, :]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class TransformerEncoderBlock(keras.layers.Layer):
    """Self-attention + feed-forward, each followed by dropout, residual add and LayerNorm.

    Args:
        num_heads: attention heads; must divide `hidden_dim`.
        hidden_dim: model width.
        intermediate_dim: feed-forward width (4 * hidden_dim in every BERT).
        dropout: dropout rate after attention probabilities and after each projection.
        gelu_approximate: tanh-approximated GELU (Google's original code) instead of the exact
            erf form (Hugging Face's "gelu").

    Call args:
        inputs: `[batch, seq, hidden_dim]` float.
        padding_mask: `[batch, seq]` int, 1 for real tokens, 0 for padding (keys only).

    Example:
    >>> block = kbz.layers.TransformerEncoderBlock(num_heads=2, hidden_dim=128,
    ...                                            intermediate_dim=512)
    >>> block(x, padding_mask=mask).shape
    """

    def __init__(
        self,
        num_heads: int,
        hidden_dim: int,
        intermediate_dim: int,
        dropout: float = 0.1,
        gelu_approximate: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if int(num_heads) < 1 or int(hidden_dim) % int(num_heads):
            raise ValueError(
                "`num_heads` must be positive and divide `hidden_dim`. Received: "
                f"num_heads={num_heads}, hidden_dim={hidden_dim}"
            )
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout}")
        self.num_heads = int(num_heads)
        self.hidden_dim = int(hidden_dim)
        self.intermediate_dim = int(intermediate_dim)
        self.dropout = float(dropout)
        self.gelu_approximate = bool(gelu_approximate)
        self.head_dim = self.hidden_dim // self.num_heads

        policy = self.dtype_policy  # sub-layers compute in the block's (mixed) precision
        self.attention_qkv = _dense(3 * self.hidden_dim, "attention_qkv", policy)
        self.attention_output = _dense(self.hidden_dim, "attention_output", policy)
        self.attention_layer_norm = _layer_norm("attention_layer_norm", policy)
        self.intermediate = _dense(self.intermediate_dim, "intermediate", policy)
        self.output_dense = _dense(self.hidden_dim, "output_dense", policy)
        self.output_layer_norm = _layer_norm("output_layer_norm", policy)
        self.attention_dropout = Dropout(self.dropout, dtype=policy)
        self.hidden_dropout = Dropout(self.dropout, dtype=policy)

    def build(self, input_shape):
        hidden_shape = (None, None, self.hidden_dim)
        self.attention_qkv.build(hidden_shape)
        self.attention_output.build(hidden_shape)
        self.attention_layer_norm.build(hidden_shape)
        self.intermediate.build(hidden_shape)
        self.output_dense.build((None, None, self.intermediate_dim))
        self.output_layer_norm.build(hidden_shape)

    def _self_attention(self, x, padding_mask, training):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        qkv = ops.reshape(
            self.attention_qkv(x), (batch, length, 3, self.num_heads, self.head_dim)
        )
        query, key, value = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        scores = ops.einsum("bqhd,bkhd->bhqk", query, key)
        scores = ops.cast(scores, "float32") * (1.0 / math.sqrt(self.head_dim))
        probs = ops.softmax(scores + attention_bias(padding_mask), axis=-1)
        probs = self.attention_dropout(ops.cast(probs, self.compute_dtype), training=training)
        context = ops.einsum("bhqk,bkhd->bqhd", probs, value)
        return ops.reshape(context, (batch, length, self.hidden_dim))

    def call(self, inputs, padding_mask, training=None):
        attended = self.attention_output(self._self_attention(inputs, padding_mask, training))
        x = self.attention_layer_norm(inputs + self.hidden_dropout(attended, training=training))
        hidden = keras.activations.gelu(self.intermediate(x), approximate=self.gelu_approximate)
        out = self.output_dense(hidden)
        return self.output_layer_norm(x + self.hidden_dropout(out, training=training))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            hidden_dim=self.hidden_dim,
            intermediate_dim=self.intermediate_dim,
            dropout=self.dropout,
            gelu_approximate=self.gelu_approximate,
        )
        return config
