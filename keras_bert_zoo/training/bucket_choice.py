"""The training lengths of length bucketing, chosen from the training set's histogram.

`training.batching` trims each training batch to the bucket length of its examples; which
lengths to use is a trade: more lengths pad less but compile more (one XLA program each).
This module picks them from the training set's length histogram with a cost model of the
train step's time (benchmarks/RESULTS.md, "Length bucketing").

>>> kbz.training.bucket_choice.training_buckets(sst2_train_lengths, 32, sequence_length=128)
[8, 16, 24, 32, 48, 72, 128]
"""

import numpy as np

from keras_bert_zoo.training.batching import bucket_ids

# The cost model of `training_buckets`, in tokens' worth of train-step time: a step of B x L
# tokens takes (STEP_OVERHEAD + B * L), and one more length (one XLA compile) COMPILE_COST.
# Fitted to MiniLM-L6's step at batch 32 on CPU (benchmarks/RESULTS.md, "MiniLM train step"
# and "Length bucketing").
STEP_OVERHEAD = 160
COMPILE_COST = 25_000
BUCKET_STEP = 8  # candidate lengths: multiples of 8 (and the sequence length)


def training_buckets(
    lengths, batch_size: int, sequence_length: int, epochs: int = 1, bucketing: bool = True
) -> list:
    """The bucket lengths that minimise a training run's estimated time, compiles included.

    Powers of two (`bucket_lengths`) pad SST-2's many 3-8-token phrases to 16 and spend a
    compile on a length few batches use. Here the lengths are chosen from the training set's
    length histogram: every multiple of 8 up to `sequence_length` is a candidate, and a
    dynamic program picks the set that minimises `epochs x (steps x STEP_OVERHEAD + padded
    tokens) + lengths used x COMPILE_COST` (steps counted with partial batches, so leaving
    examples out never pays). The result depends only on the lengths, the batch size, the
    sequence length and the epochs, so a resumed run gets the same batches;
    `sequence_length` is always the last bucket, and a training set of at least one batch
    always gets a whole batch. `bucketing=False`: `[sequence_length]`.
    The constants are measured on a CPU; on GPU and TPU, where a step is far cheaper than a
    compile, they overestimate what more lengths save.

    >>> training_buckets([5] * 9000 + [30] * 1000, 32, 128)
    [8, 32, 128]
    >>> training_buckets([5] * 900 + [30] * 100, 32, 128)  # a second compile would not pay
    [32, 128]
    """
    if not bucketing:
        return [sequence_length]
    lengths = np.asarray(lengths)
    candidates = sorted({*range(BUCKET_STEP, sequence_length, BUCKET_STEP), sequence_length})
    counts = np.searchsorted(np.sort(lengths), candidates, side="right")  # examples <= each

    def cost(low: int, high: int) -> float:
        """An epoch's cost of the bucket of lengths in (candidates[low], candidates[high]]."""
        examples = counts[high] - (counts[low] if low >= 0 else 0)
        if not examples:
            return 0.0
        steps = -(-examples // batch_size)
        return epochs * steps * (STEP_OVERHEAD + batch_size * candidates[high]) + COMPILE_COST

    # best[j]: the cheapest buckets for every example up to candidates[j], the last one
    # ending at candidates[j]; previous[j] is the end of the bucket before it (-1: none).
    best, previous = [], []
    for high in range(len(candidates)):
        options = [(cost(-1, high), -1)]
        options += [(best[low] + cost(low, high), low) for low in range(high)]
        value, low = min(options)
        best.append(value)
        previous.append(low)
    chosen, index = [], len(candidates) - 1
    while index >= 0:
        chosen.append(candidates[index])
        index = previous[index]
    chosen = chosen[::-1]
    per_bucket = np.bincount(bucket_ids(lengths, chosen), minlength=len(chosen))
    if len(lengths) >= batch_size and not (per_bucket // batch_size).any():
        # no bucket holds a whole batch (a huge batch of long rows can make splitting pay):
        # one length then, which holds them all
        longest = candidates[int(np.searchsorted(candidates, lengths.max()))]
        chosen = sorted({longest, sequence_length})
    return chosen
