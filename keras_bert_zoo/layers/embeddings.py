"""Learned absolute position embedding, sliced to the input's sequence length.

Token and segment embeddings are plain `keras.layers.Embedding` layers; this layer exists only
because the position table is indexed by position, not by an input tensor.
"""

import keras
from keras import ops

from keras_bert_zoo.layers.common import check_positive_int, initializer


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class PositionEmbedding(keras.layers.Layer):
    """Adds nothing: returns the learned rows for the input's positions, broadcast to its shape.

    The output has the input's shape `[batch, sequence_length, hidden_dim]` (so Keras reports
    the batch dimension as the input's, `None` when symbolic); under XLA the broadcast is
    fused into the sum that consumes it.

    Args:
        max_sequence_length: rows in the table; longer inputs are an error.
        hidden_dim: width of each row.

    Example:
    >>> layer = kbz.layers.PositionEmbedding(max_sequence_length=512, hidden_dim=128)
    >>> layer(token_embeddings).shape  # (batch, seq, 128)
    """

    def __init__(self, max_sequence_length: int, hidden_dim: int, **kwargs):
        super().__init__(**kwargs)
        self.max_sequence_length = check_positive_int("max_sequence_length", max_sequence_length)
        self.hidden_dim = check_positive_int("hidden_dim", hidden_dim)

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_sequence_length, self.hidden_dim),
            initializer=initializer(),
        )

    def call(self, inputs, position_ids=None):
        table = ops.cast(self.embeddings, self.compute_dtype)
        if position_ids is not None:  # packed rows: positions restart at each example
            return ops.take(table, position_ids, axis=0)
        sequence_length = ops.shape(inputs)[1]
        rows = ops.expand_dims(table[:sequence_length], 0)
        return ops.broadcast_to(rows, (ops.shape(inputs)[0], sequence_length, self.hidden_dim))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1], self.hidden_dim)

    def get_config(self):
        config = super().get_config()
        config.update(max_sequence_length=self.max_sequence_length, hidden_dim=self.hidden_dim)
        return config
