"""The batches of in-batch-negatives training: no text twice in a batch, drawn anew each epoch.

With in-batch negatives every other positive of a batch is a negative of a query, so a text
twice in one batch would be a false negative; `distinct_batches` fills batches greedily as
sentence-transformers' `NoDuplicatesDataLoader` does. `DistinctBatchSchedule` is the
`batching.BatchSchedule` of such a run: epoch `e`'s batches are `distinct_batches(pairs,
batch_size, seed + e)` (whole batches; every epoch keeps as many as the epoch with the fewest,
so an epoch is always the same number of steps), each trimmed to the bucket of its longest
sequence. Batch k is a pure function of (seed, k), so a resumed run trains the same batches.

>>> schedule = DistinctBatchSchedule(pairs, lengths, 32, seed=0, epochs=3, sequence_length=128)
>>> indices, length = schedule.batch(0)  # 32 pair indices, their trimmed length
"""

import random

import numpy as np

from keras_bert_zoo.training import bucket_choice
from keras_bert_zoo.training.batching import BatchSchedule, bucket_ids


def distinct_batches(pairs, batch_size: int, seed: int) -> list[list[int]]:
    """Shuffled full batches of pair indices, no text twice in a batch (leftovers dropped).

    Hand-written: a greedy fill as in sentence-transformers' NoDuplicatesDataLoader.
    """
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    batches, open_batches = [], []  # [indices, texts] being filled
    for i in order:
        texts = set(pairs[i])
        home = next((b for b in open_batches if not texts & b[1]), None)
        if home is None:
            home = [[], set()]
            open_batches.append(home)
        home[0].append(i)
        home[1].update(texts)
        if len(home[0]) == batch_size:
            batches.append(home[0])
            open_batches.remove(home)
    return batches


def no_full_batch(pairs, batch_size: int) -> str:
    """Why `pairs` fill no batch: how many distinct texts each side has, and the fix."""
    firsts, seconds = (len({pair[side] for pair in pairs}) for side in (0, 1))
    fewest = min(firsts, seconds)
    return (
        f"{len(pairs)} pairs make no full batch of {batch_size} distinct texts: a batch takes "
        f"{batch_size} pairs that share no text, and the pairs hold only {firsts} distinct "
        f"queries and {seconds} distinct passages (questions on a few passages, as "
        f"tools/squad_pairs.py makes from a small file, repeat them). Lower --batch-size "
        f"(at most {fewest} here; in-batch negatives learn more from larger batches), or add "
        "pairs with other texts."
    )


class DistinctBatchSchedule(BatchSchedule):
    """`BatchSchedule`'s interface over `distinct_batches`, drawn for `epochs` epochs.

    Args:
        pairs: the `(query, positive)` texts; `lengths`: each pair's real length (its
            longer text).
        batch_size: pairs per batch.
        seed: epoch `e` draws with `seed + e` (later epochs repeat the first ones' draws).
        sequence_length, bucketing: the lengths batches are trimmed to are chosen from the
            batches' longest sequences (`bucket_choice.training_buckets`); `bucketing=False`
            pads every batch to `sequence_length`.
    """

    def __init__(self, pairs, lengths, batch_size: int, seed: int, epochs: int,
                 sequence_length: int, bucketing: bool = True):  # fmt: skip
        self.batch_size, self.seed = batch_size, seed
        drawn = [distinct_batches(pairs, batch_size, seed + e) for e in range(epochs)]
        self.steps_per_epoch = min(len(batches) for batches in drawn)
        if not self.steps_per_epoch:
            raise ValueError(no_full_batch(pairs, batch_size))
        self._drawn = [np.asarray(b[: self.steps_per_epoch], np.int64) for b in drawn]
        longest = np.asarray(lengths)[np.concatenate(self._drawn)].max(axis=-1)
        # a step embeds 2 x batch_size sequences of the batch's longest length
        self.buckets = np.asarray(
            bucket_choice.training_buckets(
                np.repeat(longest, 2 * batch_size), 2 * batch_size, sequence_length, 1, bucketing
            )
        )
        self.bucket = bucket_ids(lengths, self.buckets)

    def epoch(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        indices = self._drawn[epoch % len(self._drawn)]
        return indices, self.buckets[self.bucket[indices].max(axis=-1)]
