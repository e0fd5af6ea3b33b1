"""The reranker's prediction files: the scores file (the input's lines in input order, each
with its score) and the ranked lists beside it (each query's passages, best first), written
whole (`write_scores`) or a window at a time (`ranked_stream`)."""

import logging
from pathlib import Path

from keras_bert_zoo import ranking_metrics
from keras_bert_zoo.data.rerank_reader import RankingData
from keras_bert_zoo.saving.atomic import write_text

logger = logging.getLogger(__name__)


def ranked_path(path) -> Path:
    """`predictions.tsv` -> `predictions.ranked.tsv`: where the ranked lists go."""
    path = Path(path)
    return path.with_name(f"{path.stem}.ranked{path.suffix or '.tsv'}")


def scored_row(row: str, score: float) -> str:
    """A line of the scores file: the input's line and its score."""
    return f"{row}\t{score:.6f}"


def ranked_header(labelled: bool) -> str:
    return "\t".join(["query", "rank", "score", "passage"] + (["label"] if labelled else []))


def ranked_row(query: str, rank: int, score: float, passage: str, label) -> str:
    """A line of the ranked lists (`label` None for a file without labels)."""
    fields = [query, str(rank), f"{score:.6f}", passage]
    return "\t".join(fields + ([] if label is None else [str(label)]))


def write_scores(path, dataset: RankingData, scores) -> list[Path]:
    """The input's rows, in input order, each with its `score`; the ranked lists beside."""
    path = Path(path)
    rows = ["\t".join([*dataset.header, "score"])]
    rows += [scored_row(p.row, s) for p, s in zip(dataset.pairs, scores, strict=True)]
    write_text(path, "\n".join(rows) + "\n")
    ranked = [ranked_header(dataset.labelled)]
    for group in ranking_metrics.group_rows(dataset.queries):
        for rank, row in enumerate(group[ranking_metrics.rank_order(scores[group])], start=1):
            pair = dataset.pairs[row]
            ranked.append(ranked_row(pair.query, rank, scores[row], pair.passage, pair.label))
    write_text(ranked_path(path), "\n".join(ranked) + "\n")
    return [path, ranked_path(path)]


def warn_unanswered(path, missing: int) -> None:
    """Warns of `missing` queries without a relevant passage (they count 0 in every metric)."""
    if missing:
        logger.warning(
            "%s: %d queries have no relevant passage; they count 0 in every metric.",
            path,
            missing,
        )
