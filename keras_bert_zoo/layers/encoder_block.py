"""The post-LayerNorm transformer encoder block of BERT, with a fused QKV projection.

Differs from the original in layout only: query, key and value are one `[hidden, 3 * hidden]`
kernel (one matmul instead of three; the checkpoint converters split and join it), the
attention softmax always runs in float32 so mixed precision cannot overflow it, and the
`attention` option chooses between the fused op (`keras.ops.dot_product_attention`) and the
explicit softmax in passes that drop no attention probability (`layers.attention`).
"""

import keras
from keras import ops

from keras_bert_zoo.layers.attention import (
    check_attention,
    explicit_attention,
    fused_attention,
    heads_first_attention,
    uses_fused_attention,
)
from keras_bert_zoo.layers.backend import tensorflow_without_xla
from keras_bert_zoo.layers.common import check_positive_int, check_rate, dense, layer_norm
from keras_bert_zoo.layers.dropout import Dropout


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
        hidden_dim: model width; the input's last axis must equal it.
        intermediate_dim: feed-forward width (4 * hidden_dim in every BERT).
        dropout: dropout rate after each projection (and attention probabilities by default).
        attention_dropout: dropout rate of the attention probabilities; None (the default)
            uses `dropout`, as BERT does. A pass that drops them runs the explicit softmax.
        gelu_approximate: tanh-approximated GELU (Google's original code) instead of the exact
            erf form (Hugging Face's "gelu").
        attention: the attention of passes that drop no attention probability (prediction,
            evaluation, training with `attention_dropout` 0): "fused"
            (`keras.ops.dot_product_attention`), "explicit" (softmax(QK^T) written out), or
            "auto" (the default), fused where the backend has a fused attention kernel
            (`kbz.layers.attention.fused_kernel`: PyTorch, JAX on GPU and TPU), explicit
            elsewhere. The same outputs within float32 rounding; saved in the config.

    Call args:
        inputs: `[batch, seq, hidden_dim]` float.
        padding_mask: `[batch, seq]` int, 1 for real tokens, 0 for padding (keys only).
        first_token_only: compute the output at the first position only (`[batch, 1,
            hidden_dim]`; its attention still reads every real token). A classifier reads
            nothing else from the last block, and the feed-forward, attention output and
            scores of the other positions are most of that block's work (Model Garden's
            `output_range=1`).

    Example:
    >>> block = kbz.layers.TransformerEncoderBlock(num_heads=2, hidden_dim=16,
    ...                                            intermediate_dim=32)
    >>> out = block(keras.ops.ones((2, 5, 16)), padding_mask=keras.ops.ones((2, 5), "int32"))
    >>> tuple(out.shape)
    (2, 5, 16)
    """

    def __init__(
        self,
        num_heads: int,
        hidden_dim: int,
        intermediate_dim: int,
        dropout: float = 0.1,
        gelu_approximate: bool = False,
        attention_dropout: float | None = None,
        attention: str = "auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.hidden_dim = check_positive_int("hidden_dim", hidden_dim)
        self.intermediate_dim = check_positive_int("intermediate_dim", intermediate_dim)
        if hidden_dim % num_heads:
            raise ValueError(
                "`num_heads` must divide `hidden_dim`. Received: "
                f"num_heads={num_heads}, hidden_dim={hidden_dim}"
            )
        self.dropout = check_rate("dropout", dropout)
        self.attention_dropout_rate = (
            self.dropout
            if attention_dropout is None
            else check_rate("attention_dropout", attention_dropout)
        )
        self.attention = check_attention(attention)
        self.gelu_approximate = bool(gelu_approximate)
        self.head_dim = self.hidden_dim // self.num_heads

    def build(self, input_shape):
        width = input_shape[-1]
        if width is not None and width != self.hidden_dim:
            raise ValueError(
                f"Layer '{self.name}' expects inputs of width hidden_dim={self.hidden_dim}. "
                f"Received: input shape {tuple(input_shape)}"
            )
        policy = self.dtype_policy  # sub-layers compute in the block's (mixed) precision
        hidden_shape = (None, None, self.hidden_dim)
        self.attention_qkv = dense(3 * self.hidden_dim, "attention_qkv", policy)
        self.attention_qkv.build(hidden_shape)
        self.attention_output = dense(self.hidden_dim, "attention_output", policy)
        self.attention_output.build(hidden_shape)
        self.attention_layer_norm = layer_norm("attention_layer_norm", policy)
        self.attention_layer_norm.build(hidden_shape)
        self.intermediate = dense(self.intermediate_dim, "intermediate", policy)
        self.intermediate.build(hidden_shape)
        self.output_dense = dense(self.hidden_dim, "output_dense", policy)
        self.output_dense.build((None, None, self.intermediate_dim))
        self.output_layer_norm = layer_norm("output_layer_norm", policy)
        self.output_layer_norm.build(hidden_shape)
        # One dropout layer per place it is applied (each has its own seed generator).
        self.attention_dropout = Dropout(
            self.attention_dropout_rate, dtype=policy, name="attention_dropout"
        )
        self.attention_output_dropout = Dropout(
            self.dropout, dtype=policy, name="attention_output_dropout"
        )
        self.output_dropout = Dropout(self.dropout, dtype=policy, name="output_dropout")

    def _self_attention(self, tokens, batch, length, padding_mask, training, first_token_only):
        """Attention of `tokens` (`[batch * length, hidden]`); `[batch * queries, hidden]`."""
        qkv = self.attention_qkv(tokens)
        qkv = ops.reshape(qkv, (batch, length, 3, self.num_heads, self.head_dim))
        dropping = training and self.attention_dropout_rate > 0
        if not dropping and uses_fused_attention(self.attention):
            context = fused_attention(*_split(qkv, first_token_only), padding_mask)
        elif tensorflow_without_xla():
            # heads first in one transpose; the three are then slices of its first axis,
            # which TensorFlow hands over as views, and the key's transpose folds into the
            # matmul (XLA fuses the slices and transposes below itself, and ran this form
            # slower under JAX)
            qkv = ops.transpose(qkv, (2, 0, 3, 1, 4))  # [3, batch, heads, length, head_dim]
            query = qkv[0, :, :, :1] if first_token_only else qkv[0]
            context = heads_first_attention(
                query, qkv[1], qkv[2], padding_mask, self.attention_dropout, training
            )
            context = ops.transpose(context, (0, 2, 1, 3))
        else:
            context = explicit_attention(
                *_split(qkv, first_token_only), padding_mask, self.attention_dropout, training
            )
        return ops.reshape(context, (-1, self.hidden_dim))

    def call(self, inputs, padding_mask, training=None, first_token_only=False):
        # The projections, feed-forward and LayerNorms run on `[batch * length, hidden]`:
        # a 2-D matmul is one TensorFlow MatMul that oneDNN fuses with its bias add and GELU
        # (a 3-D input goes through Tensordot's reshapes, which block that fusion;
        # benchmarks/RESULTS.md, "kbz embed vs sentence-transformers recipe"); under XLA the
        # reshapes are free.
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        tokens = ops.reshape(inputs, (-1, self.hidden_dim))
        attended = self.attention_output(
            self._self_attention(tokens, batch, length, padding_mask, training, first_token_only)
        )
        queries = 1 if first_token_only else length
        residual = ops.reshape(inputs[:, :1], (-1, self.hidden_dim)) if first_token_only else tokens
        x = self.attention_layer_norm(
            residual + self.attention_output_dropout(attended, training=training)
        )
        hidden = keras.activations.gelu(self.intermediate(x), approximate=self.gelu_approximate)
        out = self.output_dense(hidden)
        out = self.output_layer_norm(x + self.output_dropout(out, training=training))
        return ops.reshape(out, (batch, queries, self.hidden_dim))

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            hidden_dim=self.hidden_dim,
            intermediate_dim=self.intermediate_dim,
            dropout=self.dropout,
            gelu_approximate=self.gelu_approximate,
            attention_dropout=self.attention_dropout_rate,
            attention=self.attention,
        )
        return config


def _split(qkv, first_token_only: bool):
    """Query, key and value (`[batch, length, heads, head_dim]`) of the fused projection's
    `[batch, length, 3, heads, head_dim]`; the query at the first position only if asked.

    `first_token_only` still projects every query (slicing the projection would bypass LoRA
    and int8 Dense); what goes is the scores, output and feed-forward of the others.
    """
    query = qkv[:, :1, 0] if first_token_only else qkv[:, :, 0]
    return query, qkv[:, :, 1], qkv[:, :, 2]
