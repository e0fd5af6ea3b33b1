"""Validates the encoder's integer inputs before any embedding lookup.

TensorFlow's gather returns zeros for out-of-range ids on GPU instead of failing, and a
too-long sequence fails deep in a slice op; this layer turns both, mismatched shapes and
left padding (which silently shifts positions) into errors that name the input and the fix.
On every backend, concrete values (NumPy arrays, eager TensorFlow tensors, JAX and PyTorch
arrays outside a trace) are read and the checks raise `ValueError`. Traced values (a
TensorFlow graph, a JAX tracer under `jax.jit` or Keras' compiled steps, `torch.compile`) have
no contents to read: their static shapes and dtypes are checked with the same messages, and on
TensorFlow only the value checks become `tf.debugging` assertions (`InvalidArgumentError` with
the same message; Keras has no backend-neutral assertion op). Under XLA (`jit_compile=True`,
and every JAX step) no assertion runs (XLA would drop them, logging a line for each, so none
is added to an XLA trace), so compiled steps rely on the data pipeline (whose
tokenizer can only emit in-range ids) and on `BertModel.fit`/`predict`, which check concrete
arrays with this layer before Keras compiles anything.
"""

import keras
import numpy as np

from keras_bert_zoo.layers.backend import in_xla_trace, is_traced, tf

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

    def _check_static(self, token_ids, segment_ids, padding_mask):
        """Shape and dtype checks: what is known of the inputs even while they are traced."""
        if any(getattr(t.shape, "rank", 0) is None for t in (token_ids, segment_ids, padding_mask)):
            return  # a TensorFlow graph tensor of unknown rank: the graph assertions check it
        shapes = [tuple(t.shape) for t in (token_ids, segment_ids, padding_mask)]
        known = [tuple(-1 if d is None else d for d in shape) for shape in shapes]
        ranks_ok = all(len(shape) == 2 for shape in shapes)
        dims_ok = ranks_ok and all(
            len({d for d in dims if d != -1}) <= 1 for dims in zip(*known, strict=True)
        )
        if not dims_ok:
            raise ValueError(
                "`token_ids`, `segment_ids` and `padding_mask` must all be [batch, sequence] "
                "with the same shape. Received shapes: "
                f"{dict(zip(INPUT_NAMES, shapes, strict=True))}"
            )
        lengths = [shape[1] for shape in shapes if shape[1] is not None]
        if lengths and lengths[0] > self.max_sequence_length:
            raise ValueError(self._length_message(lengths[0]))
        for name, values in zip(INPUT_NAMES, (token_ids, segment_ids, padding_mask), strict=True):
            dtype = keras.backend.standardize_dtype(values.dtype)
            if "int" not in dtype and not (name == "padding_mask" and dtype == "bool"):
                raise ValueError(
                    f"`{name}` must hold integer ids (int32). Received dtype {dtype}. Cast on "
                    "purpose if they are whole numbers."
                )

    def check_values(self, token_ids, segment_ids, padding_mask):
        """All checks on concrete values (NumPy or any backend's eager arrays)."""
        self._check_static(token_ids, segment_ids, padding_mask)
        for name, values, limit in (
            ("token_ids", token_ids, self.vocabulary_size),
            ("segment_ids", segment_ids, self.num_segments),
        ):
            values = keras.ops.convert_to_numpy(values)
            if values.size == 0:
                continue
            low, high = int(values.min()), int(values.max())
            if low < 0 or high >= limit:
                raise ValueError(self._range_message(name, limit, low, high))
        mask = keras.ops.convert_to_numpy(padding_mask).astype("int32")
        if not np.all(mask[:, 1:] <= mask[:, :-1]):
            raise ValueError(LEFT_PADDING)

    def _length_message(self, length):
        return (
            f"Sequences must be at most max_sequence_length={self.max_sequence_length} tokens. "
            f"Received: sequence length {length}. Truncate them (BertPreprocessor's "
            "`sequence_length`) or use a model with longer position embeddings."
        )

    def _check_graph(self, token_ids, segment_ids, padding_mask):
        """TensorFlow graph assertions of the value checks (TensorFlow backend only)."""
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
        mask = tf.cast(padding_mask, tf.int32)  # right padding: never 0 then 1 again
        checks.append(
            tf.debugging.Assert(tf.reduce_all(mask[:, 1:] <= mask[:, :-1]), [LEFT_PADDING])
        )
        with tf.control_dependencies(checks):
            return [tf.identity(t) for t in (token_ids, segment_ids, padding_mask)]

    def call(self, inputs):
        token_ids, segment_ids, padding_mask = inputs
        if not any(is_traced(t) for t in inputs):
            self.check_values(token_ids, segment_ids, padding_mask)
            return [token_ids, segment_ids, padding_mask]
        self._check_static(token_ids, segment_ids, padding_mask)
        if tf is not None and not in_xla_trace():  # XLA drops assertions, saying so per op
            return self._check_graph(token_ids, segment_ids, padding_mask)
        return [token_ids, segment_ids, padding_mask]

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
