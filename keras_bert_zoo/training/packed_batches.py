"""Packed training batches: a fixed number of packed rows per step, examples of any length.

`PackedSchedule` is `batching.BatchSchedule`'s counterpart for sequence packing
(`training.packing`): each epoch packs the training examples, taken in an order drawn from
the seed, into rows of `row_length` tokens (best-fit decreasing), shuffles the rows and cuts
them into batches of `rows_per_batch` rows (the last incomplete batch is dropped for that
epoch, as bucketing drops each bucket's remainder). Batch k of the run is a pure function of
(seed, k), so a resumed run starts at any step. The shapes are static for XLA: every batch is
`[rows_per_batch, row_length]` tokens, and targets per example (`[rows_per_batch, slots]`
example places, `example_start` each example's `[CLS]` in its row, the unused places weighted
0 in the loss and the metrics: the batch's `sample_weight`) or per token (`[rows_per_batch,
row_length]`, a tagger's: each token's target at its place). `rows_per_batch` makes a batch hold
`batch_size` examples on average, so the steps per epoch and the learning-rate schedule stay
those of unpacked batches.

>>> schedule = PackedSchedule(lengths, batch_size=32, row_length=128, seed=0)
>>> x_batch, y_batch, weights = next(training_stream(x, y, schedule)(0))
"""

import itertools
import logging

import keras
import numpy as np

from keras_bert_zoo.extras import TF_DATA_PIPELINES, require_tensorflow
from keras_bert_zoo.training.packing import pack, pack_rows

# Keras on TensorFlow imported it already; other backends feed numpy.
tf = require_tensorflow(TF_DATA_PIPELINES) if keras.backend.backend() == "tensorflow" else None

logger = logging.getLogger(__name__)

ROW_INPUTS = ("token_ids", "segment_ids", "padding_mask", "sequence_ids", "position_ids")


class PackedSchedule:
    """The packed training batches of every epoch, reproducible from `seed`.

    Args:
        lengths: the real length of each training example (at most `row_length`).
        batch_size: examples per batch on average (`--batch-size`).
        row_length: the most tokens a packed row may hold (the run's sequence length);
            rows are as long as the longest example, rounded up to a multiple of 8, as
            attention costs each token the row's length.
        seed: the run's seed; epoch `e` uses `numpy.random.default_rng([seed, e])`.
        multiple: each batch is filled up with empty rows (no example, weight 0) to a
            multiple of it: the devices a batch is split over. The batches' examples do not
            depend on it, so a data-parallel run trains on the examples and the loss of one
            device's batches (with empty rows its dropout masks differ: they are drawn for
            the batch's shape).

    `rows_per_batch` is the rows of examples per batch; `batch_size` the rows a batch holds
    with the empty ones (what the stream's batches count, as for `BatchSchedule`); `slots`
    the example places per row (the most examples a row of `row_length` can hold, given the
    shortest example).
    """

    def __init__(self, lengths, batch_size: int, row_length: int, seed: int, multiple: int = 1):
        self.lengths = np.asarray(lengths, np.int64)
        longest = -(-int(self.lengths.max()) // 8) * 8
        self.row_length, self.seed = min(row_length, longest), seed % 2**63
        row_length = self.row_length
        # Best-fit decreasing only looks at lengths, so every epoch's order packs into the
        # same number of rows (equal lengths trade places).
        rows = len(pack_rows(self.lengths, row_length))
        # About the steps of unpacked batches (`len // batch_size`, what the learning-rate
        # schedule was made for), each of the rows' share, rounded to whole rows.
        steps = len(self.lengths) // batch_size
        self.rows_per_batch = max(1, round(rows / steps)) if steps else 0
        self.batch_size = -(-self.rows_per_batch // multiple) * multiple
        self.slots = row_length // max(1, int(self.lengths.min()))
        self.steps_per_epoch = min(steps, rows // max(1, self.rows_per_batch))
        if not self.steps_per_epoch:
            raise ValueError(
                f"The {len(self.lengths)} training examples (packed into {rows} rows of "
                f"{row_length} tokens) make fewer than one batch of {batch_size} examples; "
                "pass more examples, a smaller batch size, or packing=False (--no-packing)."
            )
        self._epochs: dict = {}

    def epoch(self, epoch: int) -> list:
        """The rows (lists of example indices) of `epoch`'s batches, in order."""
        if epoch not in self._epochs:
            rng = np.random.default_rng([self.seed, epoch])
            order = rng.permutation(len(self.lengths))
            rows = [order[row] for row in pack_rows(self.lengths[order], self.row_length)]
            shuffle = rng.permutation(len(rows))[: self.steps_per_epoch * self.rows_per_batch]
            # the newest two: the stream runs ahead of the epoch the report asks about
            self._epochs = {**{e: r for e, r in self._epochs.items() if e == epoch - 1},
                            epoch: [rows[i] for i in shuffle]}  # fmt: skip
        return self._epochs[epoch]

    def batch(self, step: int) -> list:
        """The rows of batch `step` of the run."""
        rows = self.epoch(step // self.steps_per_epoch)
        start = step % self.steps_per_epoch * self.rows_per_batch
        return rows[start : start + self.rows_per_batch]

    def tokens_per_position(self, epoch: int) -> float:
        """Real tokens over the token positions computed in `epoch` (1: no padding)."""
        real = sum(int(self.lengths[row].sum()) for row in self.epoch(epoch))
        return real / (self.steps_per_epoch * self.batch_size * self.row_length)  # empty rows too


def packed_batch(x: dict, y, rows: list, slots: int, row_length: int, size: int = 0,
                 token_fill=None):  # fmt: skip
    """`(inputs, targets, sample_weight)` of one batch of `rows` of example indices, filled
    up to `size` rows with empty ones (all padding): `ROW_INPUTS` `[size, row_length]`.

    Targets per example (`token_fill` None: a class or score each): `example_start`
    `[size, slots]` among the inputs (each example's `[CLS]` in its row), the targets of each
    place `[size, slots, ...]` and its weight (1 for an example, 0 for an unused place), for
    a loss averaged with these weights. Targets per token (`token_fill`: the target of a
    position that counts for nothing, a tagger's `IGNORE_LABEL`): `[size, row_length]`, each
    example's at its tokens' places, `token_fill` elsewhere, and one weight per row (`[size,
    1]`), the batch's rows over its examples (0 for an empty row): a loss summed over each row's
    tokens and averaged over the rows (`sum_over_batch_size`) is then the mean over the
    batch's examples, as over an unpacked batch, also when its rows are split over devices.
    An example that is a group of sequences (`x` `[examples, group, length]`: the embedder's
    (query, positive) pairs; targets per example) is packed whole into one row, its sequences
    one after the other: `example_start` then has `group` places per example (`[size, slots *
    group]`, each sequence's first token), the targets and weights one.
    """
    rows = list(rows) + [[]] * max(0, size - len(rows))
    members = np.concatenate(rows).astype(np.int64)
    sizes = np.cumsum([0] + [len(row) for row in rows])
    # an example of `group` sequences (`[examples, group, length]`: the embedder's pairs) is
    # `group` consecutive sequences of one row; its place is the first one's
    group = np.shape(x["token_ids"])[1] if np.ndim(x["token_ids"]) == 3 else 1
    local = [list(range(sizes[r] * group, sizes[r + 1] * group)) for r in range(len(rows))]
    examples = {
        key: np.asarray(x[key])[members].reshape(len(members) * group, -1) for key in ROW_INPUTS[:3]
    }
    out = pack(examples, row_length, local)
    inputs = {key: out[key] for key in ROW_INPUTS}
    y = np.asarray(y)
    if token_fill is not None:
        targets = np.full((len(rows), row_length), token_fill, y.dtype)
        real = out["sequence_ids"] > 0  # row-major: each example's tokens in `members` order
        owner = np.repeat(members, out["example_length"])
        targets[real] = y[owner, out["position_ids"][real]]
        filled = np.diff(sizes)[:, None] > 0  # `[size, 1]`: a loss per row or per token
        weights = np.where(filled, len(rows) / max(1, len(members)), 0.0).astype(np.float32)
        return inputs, targets, weights
    starts = np.zeros((len(rows), slots * group), np.int32)
    starts[out["example_row"], out["example_sequence"] - 1] = out["example_start"]
    row, place = out["example_row"][::group], (out["example_sequence"][::group] - 1) // group
    weights = np.zeros((len(rows), slots), np.float32)
    weights[row, place] = 1.0
    if y.ndim == 1 and np.issubdtype(y.dtype, np.floating):
        # regression scores: `[.., 1]` as the outputs, so the loss averages over the examples
        # (class ids stay `[..]`, as sparse cross-entropy takes them)
        y = y[:, None]
    targets = np.zeros((len(rows), slots, *y.shape[1:]), y.dtype)
    targets[row, place] = y[members]
    return {**inputs, "example_start": starts}, targets, weights


def training_stream(x: dict, y, schedule: PackedSchedule, token_fill=None):
    """A callable `start_step -> dataset` of packed `(x, y, sample_weight)` batches from that
    step on, endless (`batching.training_stream`'s interface): a `tf.data.Dataset` on the
    TensorFlow backend, a generator of numpy batches on the others. `token_fill`: targets
    per token (`packed_batch`)."""

    def batches(start):
        for step in itertools.count(int(start)):
            rows = schedule.batch(step)
            length, size = schedule.row_length, schedule.batch_size
            yield packed_batch(x, y, rows, schedule.slots, length, size, token_fill)

    if tf is None:
        return batches
    first = next(batches(0))
    signature = tf.nest.map_structure(lambda a: tf.TensorSpec(a.shape, tf.as_dtype(a.dtype)), first)

    def stream(start: int) -> tf.data.Dataset:
        dataset = tf.data.Dataset.from_generator(batches, args=(start,), output_signature=signature)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return stream


class PackingReport(keras.callbacks.Callback):
    """Logs each epoch's padding (and `padding_fraction` in the logs: the share of token
    positions computed that held no token)."""

    def __init__(self, schedule: PackedSchedule):
        super().__init__()
        self.schedule, self.step = schedule, 0

    def on_train_begin(self, logs=None):
        # The steps before this fit: a resumed run's restored optimizer counts them, so the
        # epoch reported is the data's (no gradient accumulation in fine-tuning).
        self.step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1

    def on_epoch_end(self, epoch, logs=None):
        data_epoch = max(self.step - 1, 0) // self.schedule.steps_per_epoch
        real = self.schedule.tokens_per_position(data_epoch)
        logger.info(
            "Packed rows: %.3f token positions per real token (%.1f%% padding).",
            1 / real,
            100 * (1 - real),
        )
        if logs is not None:
            logs["padding_fraction"] = 1.0 - real
