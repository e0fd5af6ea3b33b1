"""Query groups for listwise reranker training: each relevant pair with negatives of its query.

A group is `1 + num_negatives` pair indices: a pair labelled 1, then negatives (label 0) of
the same query, in the order the pairs come (a file's own pairs first, then mined ones,
as `hard_negatives.mine_hard_negatives` appends them). A query with more negatives than a
group takes gets a seeded draw of them (without replacement, kept in that order); one with
fewer gets all of them, then seeded draws with replacement. Every relevant pair of a query
leads its own group; a query with no negative (or no relevant pair) has none. The groups are
drawn once per run (with `--seed`), so every epoch trains on the same groups: the batch
schedule (`training.batching.BatchSchedule`) indexes fixed arrays.

>>> groups = query_groups(train.pairs, num_negatives=3, seed=0)
>>> groups.indices.shape  # [groups, 4]; column 0 the relevant pairs
"""

import dataclasses

import numpy as np

from keras_bert_zoo.layers.common import check_positive_int


@dataclasses.dataclass(frozen=True)
class QueryGroups:
    """`indices [groups, 1 + num_negatives]` into the pairs; the queries left out: those
    with no negative and those with no relevant pair."""

    indices: np.ndarray
    without_negatives: int
    without_relevant: int


def _draw(pool: list[int], count: int, rng: np.random.Generator) -> list[int]:
    if len(pool) > count:
        return [pool[i] for i in np.sort(rng.choice(len(pool), count, replace=False))]
    extra = rng.choice(len(pool), count - len(pool), replace=True) if len(pool) < count else []
    return pool + [pool[i] for i in extra]


def query_groups(pairs, num_negatives: int, seed: int) -> QueryGroups:
    """The groups of `pairs` (`RankingPair`s with labels), in the order of their relevant
    pairs; the same `seed` draws the same groups."""
    check_positive_int("num_negatives", num_negatives)
    relevant, negatives = {}, {}
    for index, pair in enumerate(pairs):
        (relevant if pair.label == 1 else negatives).setdefault(pair.query, []).append(index)
    rng = np.random.default_rng([seed % 2**63, num_negatives])
    groups = [
        [index, *_draw(negatives[query], num_negatives, rng)]
        for query, indices in relevant.items()
        if query in negatives
        for index in indices
    ]
    return QueryGroups(
        np.array(groups, np.int64).reshape(-1, 1 + num_negatives),
        without_negatives=sum(query not in negatives for query in relevant),
        without_relevant=sum(query not in relevant for query in negatives),
    )
