"""What the pretraining streams share, without TensorFlow: features, model inputs, positions.

- `feature_shapes` and `instance_features`: an instance as padded numpy arrays under
  google-research/bert's feature names (the schema of `records`' TFRecords);
- `model_inputs`: a batch of those features as the pretrainer's `(x, y, sample_weight)`, in
  numpy (dynamic masking, `masking.MaskingStream`) or, given `tf.cast`, inside a tf.data graph
  (TFRecords, `datasets.RecordStream`): one mapping for both;
- `stream_seed` and `locate`: a stream's seed, and the pass and offset of a step (resume).

>>> x, y, weights = model_inputs({name: np.stack([f[name] for f in rows]) for name in rows[0]})
"""

import numpy as np

from keras_bert_zoo.data.pretraining.instances import Instance


def feature_shapes(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """google-research/bert's features (`name_to_features` of run_pretraining.py): name ->
    `(length, dtype)`, int64 but for the float32 `masked_lm_weights`."""
    tokens, predictions = (max_seq_length, np.int64), (max_predictions_per_seq, np.int64)
    return {
        "input_ids": tokens,
        "input_mask": tokens,
        "segment_ids": tokens,
        "masked_lm_positions": predictions,
        "masked_lm_ids": predictions,
        "masked_lm_weights": (max_predictions_per_seq, np.float32),
        "next_sentence_labels": (1, np.int64),
    }


def _pad(values, length: int, dtype) -> np.ndarray:
    padded = np.zeros(length, dtype)
    padded[: len(values)] = values
    return padded


def instance_features(
    instance: Instance, max_seq_length: int, max_predictions_per_seq: int
) -> dict:
    """An instance as padded numpy arrays keyed by the original feature names."""
    values = {
        "input_ids": instance.token_ids,
        "input_mask": np.ones(len(instance.token_ids)),
        "segment_ids": instance.segment_ids,
        "masked_lm_positions": instance.masked_positions,
        "masked_lm_ids": instance.masked_ids,
        "masked_lm_weights": np.ones(len(instance.masked_positions)),
        "next_sentence_labels": [int(instance.is_random_next)],
    }
    shapes = feature_shapes(max_seq_length, max_predictions_per_seq)
    return {name: _pad(values[name], *shape) for name, shape in shapes.items()}


def _numpy_cast(values, dtype: str) -> np.ndarray:
    return np.asarray(values, dtype)


def model_inputs(features: dict, cast=_numpy_cast) -> tuple:
    """Batched features (original names) -> `(x, y, sample_weight)` for the pretrainer:
    `x = {"token_ids", "segment_ids", "padding_mask", "mask_positions"}` and
    `y = {"mlm_logits", "nsp_logits"}` int32, `sample_weight` float32 (1 for each NSP label).

    `cast(values, dtype)` makes the arrays: numpy's by default, `tf.cast` in a tf.data graph.
    """
    as_int = lambda name: cast(features[name], "int32")  # noqa: E731
    x = {
        "token_ids": as_int("input_ids"),
        "segment_ids": as_int("segment_ids"),
        "padding_mask": as_int("input_mask"),
        "mask_positions": as_int("masked_lm_positions"),
    }
    labels = as_int("next_sentence_labels")[:, 0]
    y = {"mlm_logits": as_int("masked_lm_ids"), "nsp_logits": labels}
    weights = {
        "mlm_logits": cast(features["masked_lm_weights"], "float32"),
        "nsp_logits": cast(labels * 0 + 1, "float32"),  # ones, in numpy or in the graph
    }
    return x, y, weights


def stream_seed(seed) -> int:
    """A 31-bit seed from `seed` (None: a fresh random one)."""
    return int(np.random.SeedSequence(seed).generate_state(1)[0]) % 2**31


def locate(start_step: int, batch_size: int, pass_size, repeat: bool) -> tuple[int, int]:
    """`(pass, offset)` of the first example of `start_step`; `pass_size()` is only
    called when the step is not 0 (it may cost a scan of the data)."""
    if start_step < 0:
        raise ValueError(f"start_step must be >= 0. Received: {start_step}.")
    first = start_step * batch_size
    if not first:
        return 0, 0
    size = pass_size()
    if not repeat and first >= size:
        raise ValueError(
            f"start_step {start_step} is past the end of the data ({size} examples, "
            f"batches of {batch_size}, repeat=False)."
        )
    return divmod(first, size)
