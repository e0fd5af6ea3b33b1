"""Validates the encoder's integer inputs before any embedding lookup.

TensorFlow's gather returns zeros for out-of-range ids on GPU instead of failing, and a
too-long sequence fails deep in a slice op; this layer turns both, mismatched shapes and
left padding (which silently shifts positions) into errors that name the input and the fix.
It is the one layer written with TensorFlow ops rather than `keras.ops`: Keras has no
assertion op. Eagerly the checks raise `ValueError`;
in a graph they are `tf.debugging` assertions (`InvalidArgumentError` with the same message);
under XLA (`jit_compile=True`) TensorFlow drops assertions, so compiled training steps rely on
the data pipeline (whose tokenizer can only emit in-range ids).
"""

import keras
import tensorflow as tf

INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")
LEFT_PADDING = (
    "`padding_mask` must be 1 for real tokens first and 0 for padding after them (right "
    "padding, as BERT was trained); left or interleaved padding shifts the positions. "
    "Pad on the right (kbz.BertPreprocessor does)."
)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class InputChecks(keras.layers.Layer):
    """Passes the list `[token_ids, segment_ids, padding_mask]` through after validating them.

    Args:
        vocabulary_size: token ids must lie in `[0, vocabulary_size)`.
        num_segments: segment ids must lie in `[0, num_segments)`.
        max_sequence_length: the longest accepted sequence.
    """

    def __init__(self, vocabulary_size: int, num_segments: int, max_sequence_length: int, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = int(vocabulary_size)
        self.num_segments = int(num_segments)
        self.max_sequence_length = int(max_sequence_length)

    def _range_message(self, name, limit, low, high):
        fix = (
            "Tokenize with this model's own vocabulary (kbz.BertTokenizer.from_preset(...))."
            if name == "token_ids"
            else "Segment ids are 0 for the first segment and 1 for the second."
        )
        return f"`{name}` must lie in [0, {limit}). Received: values from {low} to {high}. {fix}"

    def _check_eager(self, token_ids, segment_ids, padding_mask):
        shapes = [tuple(t.shape) for t in (token_ids, segment_ids, padding_mask)]
        if len(set(shapes)) != 1 or len(shapes[0]) != 2:
            raise ValueError(
                "`token_ids`, `segment_ids` and `padding_mask` must all be [batch, sequence] "
                "with the same shape. Received shapes: "
                f"{dict(zip(INPUT_NAMES, shapes, strict=True))}"
            )
        if shapes[0][1] > self.max_sequence_length:
            raise ValueError(self._length_message(shapes[0][1]))
        for name, values, limit in (
            ("token_ids", token_ids, self.vocabulary_size),
            ("segment_ids", segment_ids, self.num_segments),
        ):
            if tf.size(values) == 0:
                continue
            low, high = int(tf.reduce_min(values)), int(tf.reduce_max(values))
            if low < 0 or high >= limit:
                raise ValueError(self._range_message(name, limit, low, high))
        if not bool(tf.reduce_all(self._right_padded(padding_mask))):
            raise ValueError(LEFT_PADDING)

    def _length_message(self, length):
        return (
            f"Sequences must be at most max_sequence_length={self.max_sequence_length} tokens. "
            f"Received: sequence length {length}. Truncate them (BertPreprocessor's "
            "`sequence_length`) or use a model with longer position embeddings."
        )

    @staticmethod
    def _right_padded(padding_mask):
        """True where a row's mask never turns from 0 back to 1 (real tokens first)."""
        mask = tf.cast(padding_mask, tf.int32)
        return tf.reduce_all(mask[:, 1:] <= mask[:, :-1], axis=1)

    def _check_graph(self, token_ids, segment_ids, padding_mask):
        checks = [
            tf.debugging.assert_equal(
                tf.shape(token_ids),
                tf.shape(segment_ids),
                message=(
                    "`token_ids` and `segment_ids` must have the same [batch, sequence] shape."
                ),
            ),
            tf.debugging.assert_equal(
                tf.shape(token_ids),
                tf.shape(padding_mask),
                message=(
                    "`token_ids` and `padding_mask` must have the same [batch, sequence] shape."
                ),
            ),
            tf.debugging.assert_less_equal(
                tf.shape(token_ids)[1],
                self.max_sequence_length,
                message=self._length_message("above the maximum"),
            ),
        ]
        for name, values, limit in (
            ("token_ids", token_ids, self.vocabulary_size),
            ("segment_ids", segment_ids, self.num_segments),
        ):
            message = self._range_message(name, limit, "below 0", f"{limit} or more")
            checks.append(tf.debugging.assert_non_negative(values, message=message))
            checks.append(
                tf.debugging.assert_less(values, tf.cast(limit, values.dtype), message=message)
            )
        checks.append(
            tf.debugging.Assert(tf.reduce_all(self._right_padded(padding_mask)), [LEFT_PADDING])
        )
        with tf.control_dependencies(checks):
            return [tf.identity(t) for t in (token_ids, segment_ids, padding_mask)]

    def call(self, inputs):
        token_ids, segment_ids, padding_mask = inputs
        if tf.executing_eagerly():
            self._check_eager(token_ids, segment_ids, padding_mask)
            return [token_ids, segment_ids, padding_mask]
        return self._check_graph(token_ids, segment_ids, padding_mask)

    def compute_output_shape(self, input_shape):
        return list(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary_size=self.vocabulary_size,
            num_segments=self.num_segments,
            max_sequence_length=self.max_sequence_length,
        )
        return config
