"""Ranking metrics over candidate lists grouped by query: MRR@k and recall@k, in plain numpy.

Each query's candidates are ranked by score, highest first; equal scores keep the input
order, so a tie never ranks a relevant passage above an irrelevant one that came first (the
pessimistic tie rule would differ only on exact ties). Values are fractions in [0, 1],
averaged over queries (every query counts once, whatever its number of candidates), as
MS MARCO's MRR@10 and BEIR's recall@k compute them. A query with no relevant candidate
scores 0: a ranking that cannot find it is counted as missing it.

>>> import keras_bert_zoo as kbz
>>> kbz.ranking_metrics.ranking_scores(["q1", "q1", "q2", "q2"], [0, 1, 1, 0], [0.9, 0.1, 0.5, 0.2])
{'mrr_at_10': 0.75, 'recall_at_1': 0.5, 'recall_at_10': 1.0}
"""

from collections.abc import Sequence

import numpy as np


def group_rows(queries: Sequence) -> list[np.ndarray]:
    """Row indices of each distinct query, queries in order of first appearance.

    >>> kbz.ranking_metrics.group_rows(["a", "b", "a"])
    [array([0, 2]), array([1])]
    """
    groups: dict = {}
    for row, query in enumerate(queries):
        groups.setdefault(query, []).append(row)
    return [np.asarray(rows, dtype=np.int64) for rows in groups.values()]


def rank_order(scores: Sequence[float]) -> np.ndarray:
    """Indices of `scores` from the highest to the lowest; ties keep their input order."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


def _ranked_labels(queries, labels, scores) -> list[np.ndarray]:
    labels, scores = np.asarray(labels), np.asarray(scores, dtype=np.float64)
    if not (len(queries) == len(labels) == len(scores)) or labels.ndim != 1 or not len(labels):
        raise ValueError(
            "Expected non-empty, equally long queries, labels and scores. Received lengths "
            f"{len(queries)}, {len(labels)}, {len(scores)}."
        )
    if not np.isin(labels, (0, 1)).all():
        raise ValueError(f"Labels must be 0 or 1. Received: {sorted(set(labels.tolist()))[:5]}")
    return [labels[rows][rank_order(scores[rows])] for rows in group_rows(queries)]


def reciprocal_rank(ranked: np.ndarray, k: int = 10) -> float:
    """1 / (rank of the first relevant candidate) of one query's labels in ranked order, 0
    beyond rank `k`."""
    hits = np.flatnonzero(ranked[:k] == 1)
    return 1.0 / (hits[0] + 1) if len(hits) else 0.0


def recall(ranked: np.ndarray, k: int = 1) -> float:
    """The share of one query's relevant candidates (labels in ranked order) in the top `k`."""
    relevant = ranked.sum()
    return ranked[:k].sum() / relevant if relevant else 0.0


def mrr_at_k(queries: Sequence, labels: Sequence[int], scores: Sequence[float], k=10) -> float:
    """Mean over queries of 1 / (rank of the first relevant candidate), 0 beyond rank `k`.

    >>> kbz.ranking_metrics.mrr_at_k(["q", "q", "q"], [0, 0, 1], [3.0, 2.0, 1.0])
    0.3333333333333333
    """
    return float(np.mean([reciprocal_rank(r, k) for r in _ranked_labels(queries, labels, scores)]))


def recall_at_k(queries: Sequence, labels: Sequence[int], scores: Sequence[float], k=1) -> float:
    """Mean over queries of the share of its relevant candidates ranked in the top `k`.

    >>> kbz.ranking_metrics.recall_at_k(["q", "q", "q"], [1, 0, 1], [3.0, 2.0, 1.0], k=2)
    0.5
    """
    return float(np.mean([recall(r, k) for r in _ranked_labels(queries, labels, scores)]))


def ranking_scores(queries, labels, scores, k: int = 10) -> dict:
    """`mrr_at_10`, `recall_at_1` and `recall_at_<k>` (k=10 by default), fractions in [0, 1]."""
    return {
        "mrr_at_10": mrr_at_k(queries, labels, scores, 10),
        "recall_at_1": recall_at_k(queries, labels, scores, 1),
        f"recall_at_{k}": recall_at_k(queries, labels, scores, k),
    }


def retrieval_ranks(query_vectors, index_vectors, targets) -> np.ndarray:
    """The 1-based rank of each query's target row of the index by dot product (cosine
    similarity for normalised vectors); an index row that ties the target ranks below it.

    >>> kbz.ranking_metrics.retrieval_ranks([[1.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]], [1])
    array([1])
    """
    scores = np.asarray(query_vectors, np.float32) @ np.asarray(index_vectors, np.float32).T
    targets = np.asarray(targets)
    if targets.shape != (scores.shape[0],) or targets.min() < 0 or targets.max() >= scores.shape[1]:
        raise ValueError(
            f"`targets` must give one index row (0..{scores.shape[1] - 1}) per query "
            f"({scores.shape[0]}). Received shape {targets.shape}."
        )
    target_scores = scores[np.arange(len(targets)), targets]
    return 1 + np.sum(scores > target_scores[:, None], axis=1)


def retrieval_scores(ranks, ks=(1, 5)) -> dict:
    """`recall@k` (the share of queries whose target ranks in the top k) for each k, and
    `mrr`, the mean reciprocal rank, of `retrieval_ranks`' ranks.

    >>> kbz.ranking_metrics.retrieval_scores([1, 2, 8])
    {'recall@1': 0.3333333333333333, 'recall@5': 0.6666666666666666, 'mrr': 0.5416666666666666}
    """
    ranks = np.asarray(ranks)
    result = {f"recall@{k}": float(np.mean(ranks <= k)) for k in ks}
    result["mrr"] = float(np.mean(1.0 / ranks))
    return result
