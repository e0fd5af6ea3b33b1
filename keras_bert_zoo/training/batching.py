"""Length bucketing: batches of similar real length, trimmed to a few static lengths.

Every fine-tuning sequence is padded to `--sequence-length`, but most are far shorter (SST-2
sentences average about 10 words), so full-length batches mostly multiply padding. Here each
example falls in the bucket of its real length (`padding_mask` sum): for training, the
lengths that minimise the run's estimated time, compiles included, chosen from the training
set's length histogram (`training.bucket_choice`); for prediction, powers of two from 16
(`bucket_lengths`) or finer steps (`bucketed_prediction.prediction_buckets`). The sequence
length is always the last bucket. A batch holds examples of one bucket and is trimmed to that
bucket's length, so XLA compiles one program per bucket. Results for real tokens equal full
padding (the encoder's padding invariance).

Training: `BatchSchedule` computes the batches in numpy from the seed. Per epoch a seeded
permutation, examples grouped by bucket in that order, whole batches within each bucket (the
remainder of each bucket is dropped for that epoch), and the order of the batches shuffled,
so batch k of the run is a pure function of (seed, k) and `training_stream` starts at any
step without replaying earlier ones (constant-time exact resume). The batches are numpy
(`numpy_stream`); on TensorFlow a tf.data pipeline feeds them to `fit`, on JAX and PyTorch
the generator itself does: the same batches in the same order. Evaluation and prediction are
`training.bucketed_prediction`.

Unlike Hugging Face's per-batch dynamic padding, the lengths are a fixed few, so the number
of XLA compilations stays small; keras-hub pads every batch to the full length.

>>> schedule = kbz.training.batching.BatchSchedule(lengths, 32, bucket_lengths(128), seed=0)
>>> indices, lengths = schedule.batches(0, schedule.steps_per_epoch)
"""

import itertools

import keras
import numpy as np

from keras_bert_zoo.extras import TF_DATA_PIPELINES, require_tensorflow

# Keras on TensorFlow imported it already; other backends feed numpy (`numpy_stream`).
tf = require_tensorflow(TF_DATA_PIPELINES) if keras.backend.backend() == "tensorflow" else None

SMALLEST_BUCKET = 16


def bucket_lengths(sequence_length: int, bucketing: bool = True) -> list[int]:
    """Powers of two from 16 below `sequence_length`, then `sequence_length` itself.

    >>> bucket_lengths(128)
    [16, 32, 64, 128]
    >>> bucket_lengths(100), bucket_lengths(128, bucketing=False)
    ([16, 32, 64, 100], [128])
    """
    lengths, length = [], SMALLEST_BUCKET
    while bucketing and length < sequence_length:
        lengths.append(length)
        length *= 2
    return lengths + [sequence_length]


def real_lengths(x: dict, group: str = "max") -> np.ndarray:
    """Real tokens of each sequence (padding comes last): the `padding_mask` row sums. An
    example that is a group of sequences (`[examples, group, length]`: a reranker's query
    groups, an embedder's pairs) has the length of its longest (`group="max"`: the padded
    width it needs) or the sum of its sequences (`"sum"`: the places it fills packed)."""
    lengths = np.asarray(x["padding_mask"]).astype(bool).sum(-1)
    if lengths.ndim == 1:
        return lengths
    combine = {"max": np.max, "sum": np.sum}[group]
    return combine(lengths, axis=tuple(range(1, lengths.ndim)))


def bucket_ids(lengths: np.ndarray, buckets) -> np.ndarray:
    """Index of the shortest bucket that holds each length."""
    lengths = np.asarray(lengths)
    if lengths.size and lengths.max() > buckets[-1]:
        raise ValueError(f"A sequence of {lengths.max()} tokens exceeds the last bucket.")
    return np.searchsorted(np.asarray(buckets), lengths, side="left")


class BatchSchedule:
    """The training batches of every epoch, reproducible from `seed`.

    Args:
        lengths: the real length of each training example.
        batch_size: examples per batch (whole batches only, per bucket).
        buckets: ascending bucket lengths (`bucket_lengths`).
        seed: the run's seed; epoch `e` uses `numpy.random.default_rng([seed, e])`.

    `steps_per_epoch` is the same every epoch (bucket sizes do not depend on the order).
    """

    def __init__(self, lengths, batch_size: int, buckets, seed: int):
        self.batch_size, self.seed = batch_size, seed % 2**63
        self.buckets = np.asarray(buckets)
        self.bucket = bucket_ids(lengths, buckets)
        counts = np.bincount(self.bucket, minlength=len(self.buckets))
        self.steps_per_epoch = int((counts // batch_size).sum())
        self._epochs: dict = {}

    def epoch(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """`(indices [steps_per_epoch, batch_size], lengths [steps_per_epoch])` of `epoch`."""
        if epoch not in self._epochs:
            rng = np.random.default_rng([self.seed, epoch])
            order = rng.permutation(len(self.bucket))
            batches, lengths = [], []
            for index, length in enumerate(self.buckets):
                members = order[self.bucket[order] == index]
                count = len(members) // self.batch_size
                batches.append(members[: count * self.batch_size].reshape(count, self.batch_size))
                lengths += [length] * count
            shuffle = rng.permutation(self.steps_per_epoch)
            self._epochs = {epoch: (np.concatenate(batches)[shuffle], np.array(lengths)[shuffle])}
        return self._epochs[epoch]

    def batch(self, step: int) -> tuple[np.ndarray, int]:
        """`(example indices, trimmed length)` of batch `step` of the run."""
        indices, lengths = self.epoch(step // self.steps_per_epoch)
        return indices[step % self.steps_per_epoch], int(lengths[step % self.steps_per_epoch])

    def batches(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Steps `start` to `stop - 1`, stacked as `epoch` returns them."""
        pairs = [self.batch(step) for step in range(start, stop)]
        indices = np.array([p[0] for p in pairs]).reshape(-1, self.batch_size)
        return indices, np.array([p[1] for p in pairs], int)


def trim_length(array: np.ndarray, length: int, trim: bool) -> np.ndarray:
    """The sequence axis (the last: `[batch, length]` or `[batch, group, length]`) cut."""
    return array[..., :length] if trim and array.ndim >= 2 else array


def numpy_stream(x: dict, y, schedule: BatchSchedule, sequence_targets: bool):
    """A callable `start_step -> iterator` of trimmed `(x, y)` numpy batches from that step
    on, endless: the batches of `training_stream`, which feed `fit` on JAX and PyTorch.

    A plain generator, not a `keras.utils.PyDataset`: batch k is a pure function of (seed,
    k) computed on demand in microseconds of numpy indexing, so PyDataset's workers would
    have nothing to overlap, and its `__getitem__(i)` counts within an epoch of `fit`,
    where the run's steps go on across `fit`'s epochs (checkpoint intervals).
    `sequence_targets`: the targets have a sequence axis (token tags), trimmed as `x` is.
    """

    def batches(start):
        for step in itertools.count(int(start)):
            indices, length = schedule.batch(step)
            inputs = {key: trim_length(value[indices], length, True) for key, value in x.items()}
            targets = keras.tree.map_structure(
                lambda t, i=indices, n=length: trim_length(np.asarray(t)[i], n, sequence_targets), y
            )
            yield inputs, targets

    return batches


def training_stream(x: dict, y, schedule: BatchSchedule, sequence_targets: bool):
    """A callable `start_step -> dataset` of trimmed `(x, y)` batches from that step on,
    endless (as `training.resume.fit_resumable` takes it): a `tf.data.Dataset` on the
    TensorFlow backend, `numpy_stream`'s generator (the same batches) on the others.

    `sequence_targets`: the targets have a sequence axis (token tags), trimmed as `x` is.
    """
    batches = numpy_stream(x, y, schedule, sequence_targets)
    if tf is None:
        return batches

    def spec(array, trim):
        array = np.asarray(array)
        shape = [schedule.batch_size, *array.shape[1:]]
        if trim and array.ndim >= 2 and len(schedule.buckets) > 1:
            shape[-1] = None  # the bucket's length (one bucket: static, as --no-bucketing)
        return tf.TensorSpec(shape, tf.as_dtype(array.dtype))

    signature = (
        {key: spec(value, True) for key, value in x.items()},
        tf.nest.map_structure(lambda t: spec(t, sequence_targets), y),
    )

    def stream(start: int) -> tf.data.Dataset:
        # A generator (not tensors captured by a graph): the arrays stay in numpy.
        dataset = tf.data.Dataset.from_generator(batches, args=(start,), output_signature=signature)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return stream


def run_in_batches(call, inputs: dict, batch_size: int, batch_done=None):
    """`call(batch)` on `inputs` sliced into batches of `batch_size` rows, in order, and the
    outputs concatenated (numpy, in `call`'s structure); `batch_done(rows)` after each batch.
    An empty input is one empty batch, so the outputs keep their structure and widths.

    >>> kbz.training.batching.run_in_batches(model, {"token_ids": ids, ...}, 64)
    """
    count, parts = len(next(iter(inputs.values()))), []
    for begin in range(0, max(count, 1), batch_size):
        parts.append(call({k: v[begin : begin + batch_size] for k, v in inputs.items()}))
        if batch_done is not None:
            batch_done(min(batch_size, count - begin))
    return keras.tree.map_structure(lambda *p: np.concatenate([np.asarray(t) for t in p]), *parts)
