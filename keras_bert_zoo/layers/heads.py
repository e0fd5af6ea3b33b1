"""Task heads: the masked-LM transform, its output bias, and the span logits of QA.

The MLM decoder matrix is the token embedding itself (`token_embedding(h, reverse=True)`),
as in the original BERT, so the head owns only the transform and the output bias.
"""

import keras
from keras import ops

from keras_bert_zoo.layers.common import check_positive_int, dense, layer_norm, padding_bias


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MaskedLMHead(keras.layers.Layer):
    """Gathers `mask_positions` from the sequence, then dense + GELU + LayerNorm.

    Args:
        hidden_dim: width of the encoder.
        gelu_approximate: the encoder's GELU variant (the original head uses the same).

    Call args:
        sequence_output: `[batch, seq, hidden_dim]`.
        mask_positions: int `[batch, max_predictions]`.

    Returns `[batch, max_predictions, hidden_dim]`, ready for the tied decoder.
    """

    def __init__(self, hidden_dim: int, gelu_approximate: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = check_positive_int("hidden_dim", hidden_dim)
        self.gelu_approximate = bool(gelu_approximate)

    def build(self, sequence_output_shape, mask_positions_shape=None):
        width = sequence_output_shape[-1]
        if width is not None and width != self.hidden_dim:
            raise ValueError(
                f"Layer '{self.name}' expects a sequence of width hidden_dim={self.hidden_dim}. "
                f"Received: sequence_output shape {tuple(sequence_output_shape)}"
            )
        self.dense = dense(self.hidden_dim, "dense", self.dtype_policy)
        self.dense.build((None, None, self.hidden_dim))
        self.layer_norm = layer_norm("layer_norm", self.dtype_policy)
        self.layer_norm.build((None, None, self.hidden_dim))

    def call(self, sequence_output, mask_positions):
        gathered = ops.take_along_axis(
            sequence_output, ops.expand_dims(ops.cast(mask_positions, "int32"), -1), axis=1
        )
        hidden = keras.activations.gelu(self.dense(gathered), approximate=self.gelu_approximate)
        return self.layer_norm(hidden)

    def compute_output_shape(self, sequence_output_shape, mask_positions_shape):
        return (sequence_output_shape[0], mask_positions_shape[1], self.hidden_dim)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_dim=self.hidden_dim, gelu_approximate=self.gelu_approximate)
        return config


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class OutputBias(keras.layers.Layer):
    """Adds a learned bias over the last axis (the MLM head's per-token output bias).

    Computes in float32 so the logits that feed the loss are float32 under mixed precision.
    """

    def __init__(self, units: int, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)

    def build(self, input_shape):
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")

    def call(self, inputs):
        return ops.cast(inputs, "float32") + self.bias

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units)
        config.pop("dtype", None)
        return config


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SpanLogits(keras.layers.Layer):
    """`[batch, seq, 2]` span scores -> float32 start and end logits, padding masked out.

    Call args:
        scores: `[batch, seq, 2]` from a dense layer over the sequence output.
        padding_mask: `[batch, seq]` int, 1 for real tokens.
    """

    def __init__(self, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)

    def call(self, scores, padding_mask):
        bias = padding_bias(padding_mask)
        scores = ops.cast(scores, "float32")
        return {"start_logits": scores[..., 0] + bias, "end_logits": scores[..., 1] + bias}

    def compute_output_shape(self, scores_shape, padding_mask_shape):
        return {"start_logits": scores_shape[:2], "end_logits": scores_shape[:2]}

    def get_config(self):
        config = super().get_config()
        config.pop("dtype", None)
        return config
