"""Learned absolute position embedding, sliced to the input's sequence length.

Token and segment embeddings are plain `keras.layers.Embedding` layers; this layer exists only
because the position table is indexed by position, not by an input tensor.
"""

import keras
from keras import ops

INITIALIZER_STDDEV = 0.02  # BERT's truncated-normal initializer range; never varies.


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class PositionEmbedding(keras.layers.Layer):
    """Adds nothing: returns the `[1, sequence_length, hidden_dim]` slice of a learned table.

    Args:
        max_sequence_length: rows in the table; longer inputs are an error.
        hidden_dim: width of each row.

    Example:
    >>> layer = kbz.layers.PositionEmbedding(max_sequence_length=512, hidden_dim=128)
    >>> layer(token_embeddings).shape  # (1, seq, 128), broadcast against the token embeddings
    """

    def __init__(self, max_sequence_length: int, hidden_dim: int, **kwargs):
        super().__init__(**kwargs)
        if int(max_sequence_length) < 1 or int(hidden_dim) < 1:
            raise ValueError(
                "`max_sequence_length` and `hidden_dim` must be positive integers. Received: "
                f"max_sequence_length={max_sequence_length}, hidden_dim={hidden_dim}"
            )
        self.max_sequence_length = int(max_sequence_length)
        self.hidden_dim = int(hidden_dim)

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_sequence_length, self.hidden_dim),
            initializer=keras.initializers.TruncatedNormal(stddev=INITIALIZER_STDDEV),
        )

    def call(self, inputs):
        sequence_length = ops.shape(inputs)[1]
        table = ops.cast(self.embeddings, self.compute_dtype)
        return ops.expand_dims(table[:sequence_length], 0)

    def compute_output_shape(self, input_shape):
        return (1, input_shape[1], self.hidden_dim)

    def get_config(self):
        config = super().get_config()
        config.update(max_sequence_length=self.max_sequence_length, hidden_dim=self.hidden_dim)
        return config
