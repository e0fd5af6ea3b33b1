"""tf.data inputs for the pretrainer from TFRecord shards (TensorFlow's format: TensorFlow only).

This stream, and `masking.MaskingStream` (masked on the fly from text, numpy off TensorFlow),
yield `(x, y, sample_weight)` for `kbz.build_pretrainer`:
`x = {"token_ids", "segment_ids", "padding_mask", "mask_positions"}` (int32),
`y = {"mlm_logits": masked_lm_ids, "nsp_logits": next_sentence_labels}` (int32),
`sample_weight = {"mlm_logits": masked_lm_weights, "nsp_logits": ones}` (float32).

Each is a `Stream`: calling it with a step gives the batches from that step on, the same
batches an uninterrupted stream gives there, without producing the ones before (so resuming
`kbz pretrain` at step 900,000 costs what it costs at step 10). The order is a function of
(seed, pass over the data, position), never of what came before:
- records: each pass reads the shards in an order drawn from (seed, pass), one after the
  other, and shuffles windows of `shuffle_buffer_size` consecutive records with an order
  drawn from (seed, pass, window). google-research/bert shuffles files, reads several at
  once and shuffles a 100-record buffer, an order that can only be replayed; its
  `create_pretraining_data` (and ours) already shuffles instances inside each shard.
  Positioning counts the records of each shard once (reading them, not parsing them), then
  reads from the window that holds the step's first record.
- text: see `masking.MaskingStream` (segmentation once, pairs and masks per pass).

>>> ds = pretraining_dataset("out-*", batch_size=32, max_seq_length=128,
...                          max_predictions_per_seq=20)
>>> stream = RecordStream("out-*", 32, 128, 20, seed=0); resumed = stream(start_step=5000)
"""

import numpy as np

from keras_bert_zoo.data.pretraining import text
from keras_bert_zoo.data.pretraining.features import locate, model_inputs, stream_seed
from keras_bert_zoo.data.pretraining.records import feature_spec
from keras_bert_zoo.extras import TF_RECORDS, require_tensorflow

# TFRecords are TensorFlow's, on any backend. Imported by `require_records` (every
# `RecordStream` calls it; without TensorFlow it names the extra), so that pretraining from
# text on JAX or PyTorch never imports TensorFlow, installed or not.
tf = None
READING = f"{TF_RECORDS} (kbz pretrain --input-file; --text-file pretrains without TensorFlow)"

_FOREVER = 2**62  # passes of an endless stream


def to_model_inputs(features: dict) -> tuple:
    """Parsed records (batched, original names) -> `(x, y, sample_weight)` in the graph."""
    return model_inputs(features, tf.cast)


def _check_record_shapes(path: str, max_seq_length: int, max_predictions_per_seq: int):
    for record in tf.data.TFRecordDataset(path).take(1):
        example = tf.train.Example.FromString(record.numpy()).features.feature
        found = (
            len(example["input_ids"].int64_list.value),
            len(example["masked_lm_positions"].int64_list.value),
        )
        if found != (max_seq_length, max_predictions_per_seq):
            raise ValueError(
                f"{path} holds max_seq_length={found[0]}, max_predictions_per_seq"
                f"={found[1]}; pass those (got {max_seq_length}, "
                f"{max_predictions_per_seq})."
            )


def require_records() -> None:
    """Imports TensorFlow for TFRecords, or raises `MissingExtraError` naming the extra, so a
    job can say so before any work."""
    global tf
    tf = require_tensorflow(READING)


class RecordStream:
    """`start_step -> dataset`: batches of model inputs from TFRecord shards (ours or
    google-research/bert's), in the seeded order of the module docstring.

    `stream(s)` equals `stream(0).skip(s)` without reading the records before step `s`
    (beyond counting them once per stream). `shuffle=False` reads the shards in name order.
    """

    def __init__(
        self,
        file_patterns,
        batch_size: int,
        max_seq_length: int,
        max_predictions_per_seq: int,
        shuffle: bool = True,
        seed=None,
        repeat: bool = True,
        shuffle_buffer_size: int = 10000,
    ):
        require_records()
        self.files = text.expand_input_patterns(file_patterns)
        _check_record_shapes(self.files[0], max_seq_length, max_predictions_per_seq)
        self.batch_size, self.shuffle, self.repeat = batch_size, shuffle, repeat
        self.window, self.seed = int(shuffle_buffer_size), stream_seed(seed)
        self.spec = feature_spec(max_seq_length, max_predictions_per_seq)
        self._counts = None

    def counts(self) -> list:
        """Records in each shard (read once, in parallel, not parsed)."""
        if self._counts is None:
            count = lambda path: tf.data.TFRecordDataset(path).reduce(  # noqa: E731
                tf.constant(0, tf.int64), lambda n, _: n + 1
            )
            counted = tf.data.Dataset.from_tensor_slices(self.files).map(
                count, num_parallel_calls=tf.data.AUTOTUNE
            )
            self._counts = [int(n) for n in counted.as_numpy_iterator()]
        return self._counts

    def _key(self, purpose: int, epoch):
        base = tf.constant([self.seed, purpose], tf.int64)
        return tf.random.experimental.stateless_fold_in(base, tf.cast(epoch, tf.int64))

    def _pass(self, epoch, first_window: int = 0):
        """Serialized records of pass `epoch` (a tensor inside `flat_map`), from a window on."""
        order = tf.range(len(self.files))
        if self.shuffle:
            order = tf.argsort(tf.random.stateless_uniform([len(self.files)], self._key(0, epoch)))
        files, skip = tf.gather(tf.constant(self.files), order), 0
        if first_window:  # a Python pass number here: start at the shard holding the window
            ends = np.cumsum(np.asarray(self.counts())[order.numpy()])
            first = first_window * self.window
            shard = int(np.searchsorted(ends, first, side="right"))
            files, skip = files[shard:], first - (int(ends[shard - 1]) if shard else 0)
        records = tf.data.TFRecordDataset(files).skip(skip)
        if not self.shuffle:
            return records
        key = self._key(1, epoch)

        def shuffle_window(index, window):
            seed = tf.random.experimental.stateless_fold_in(key, index)
            noise = tf.random.stateless_uniform(tf.shape(window)[:1], seed)
            return tf.gather(window, tf.argsort(noise))

        windows = records.batch(self.window).enumerate(first_window)
        return windows.map(shuffle_window).unbatch()

    def __call__(self, start_step: int = 0):
        epoch, offset = locate(start_step, self.batch_size, lambda: sum(self.counts()), self.repeat)
        window, inside = divmod(offset, self.window)
        records = self._pass(epoch, window).skip(inside)
        if self.repeat:
            records = records.concatenate(
                tf.data.Dataset.range(epoch + 1, _FOREVER).flat_map(self._pass)
            )
        spec = self.spec
        dataset = records.batch(self.batch_size, drop_remainder=True).map(
            lambda serialized: to_model_inputs(tf.io.parse_example(serialized, spec)),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        return dataset.prefetch(tf.data.AUTOTUNE)


def pretraining_dataset(
    file_patterns,
    batch_size: int,
    max_seq_length: int,
    max_predictions_per_seq: int,
    shuffle: bool = True,
    seed=None,
    repeat: bool = True,
    shuffle_buffer_size: int = 10000,
):
    """Batches of model inputs from TFRecord shards: `RecordStream(...)(0)`.

    >>> x, y, w = next(iter(pretraining_dataset("out-*", 8, 128, 20)))
    """
    return RecordStream(
        file_patterns,
        batch_size,
        max_seq_length,
        max_predictions_per_seq,
        shuffle,
        seed,
        repeat,
        shuffle_buffer_size,
    )(0)
