"""The reranker's prediction files and metrics while `kbz predict rerank` streams: the same
two files as `prediction_files.write_scores`, with memory bounded by the window, not the input.

The scores file (the input's lines in input order, each with its score) is appended a
window at a time (`inference.outputs.TextRows`). The ranked lists and the metrics group a
query's pairs from anywhere in the file, so they need every score before the first list is
complete: each scored pair also goes into a SQLite table beside the output (on disk; memory
holds SQLite's page cache), and once every pair is scored, one query ordered by (the
query's first line, score from the highest, input order) gives the lists one query at a
time, as `ranking_metrics.rank_order` ranks them (SQLite sorts past its cache on disk).
The table follows the output's commits (`inference.outputs.StreamOutput`): a resumed run
drops the rows after the last commit and writes them again.
"""

import sqlite3
from pathlib import Path

import numpy as np

from keras_bert_zoo import ranking_metrics
from keras_bert_zoo.inference.outputs import TextRows
from keras_bert_zoo.saving.atomic import staged_file
from keras_bert_zoo.tasks.reranker.prediction_files import (
    ranked_header,
    ranked_row,
    scored_row,
    warn_unanswered,
)

# Each query's pairs, best first: groups in order of their first line, ties in input order.
_RANKED = """
SELECT query, passage, label, score FROM pairs
JOIN (SELECT query, MIN(number) AS first FROM pairs GROUP BY query) USING (query)
ORDER BY first, score DESC, number
"""


def pairs_path(path) -> Path:
    """The table of an output's scored pairs, beside it while it is written."""
    path = Path(path)
    return path.with_name(f".{path.name}.pairs.sqlite")


def _scored_lines(start: int, outputs) -> str:
    pairs, scores = outputs
    return "".join(scored_row(p.row, s) + "\n" for p, s in zip(pairs, scores, strict=True))


class ScoredRows:
    """An `inference.outputs` writer: `write(start, (pairs, scores))` appends the scores
    file's lines and stores the pairs in the table at `store`."""

    def __init__(self, header: tuple, store: Path):
        self.text = TextRows(_scored_lines, "\t".join([*header, "score"]) + "\n")
        self.store, self.db, self.rows, self.committed = Path(store), None, 0, 0

    def open(self, path: Path, state: dict | None) -> None:
        if state is None:
            self.store.unlink(missing_ok=True)
        self.text.open(path, state and state["text"])
        self.db = sqlite3.connect(self.store)
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS pairs "
            "(number INTEGER PRIMARY KEY, query TEXT, passage TEXT, label INTEGER, score REAL)"
        )
        self.rows = self.committed = state["rows"] if state else 0
        self.db.execute("DELETE FROM pairs WHERE number >= ?", (self.rows,))
        self.db.commit()

    def write(self, start: int, outputs) -> None:
        pairs, scores = outputs
        self.text.write(start, outputs)
        self.db.executemany(
            "INSERT OR REPLACE INTO pairs VALUES (?, ?, ?, ?, ?)",
            (
                (start + i, p.query, p.passage, p.label, float(s))
                for i, (p, s) in enumerate(zip(pairs, scores, strict=True))
            ),
        )
        self.rows = start + len(pairs)

    def sync(self) -> dict:
        self.db.commit()
        self.committed = self.rows
        return {"text": self.text.sync(), "rows": self.rows}

    def close(self) -> None:
        self.text.close()
        if self.db is not None:
            self.db.close()
            self.db = None
        if not self.committed:  # nothing to continue (`StreamOutput` leaves no trace either)
            self.store.unlink(missing_ok=True)

    def write_ranked(self, path, labelled: bool, top_k: int, source) -> dict:
        """Writes the ranked lists at `path` (atomically) from every stored pair; returns the
        metrics of `reranking.RerankingTask.metrics` ({} without labels). `source` names
        the input in a warning."""
        per_query = {"mrr_at_10": [], "recall_at_1": [], f"recall_at_{top_k}": []}
        unanswered = 0

        def finish(labels) -> None:  # one query's labels, best score first
            nonlocal unanswered
            ranked = np.asarray(labels)
            unanswered += not ranked.any()
            per_query["mrr_at_10"].append(ranking_metrics.reciprocal_rank(ranked, 10))
            per_query["recall_at_1"].append(ranking_metrics.recall(ranked, 1))
            per_query[f"recall_at_{top_k}"].append(ranking_metrics.recall(ranked, top_k))

        with staged_file(path) as temporary, open(temporary, "w", encoding="utf-8") as file:
            file.write(ranked_header(labelled) + "\n")
            query, labels, rank = None, [], 0
            for row in self.db.execute(_RANKED):
                if row[0] != query:
                    if labelled and query is not None:
                        finish(labels)
                    query, labels, rank = row[0], [], 0
                rank += 1
                labels.append(row[2])
                file.write(ranked_row(row[0], rank, row[3], row[1], row[2]) + "\n")
            if labelled and query is not None:
                finish(labels)
        if not labelled:
            return {}
        warn_unanswered(source, unanswered)
        return {name: float(np.mean(values)) for name, values in per_query.items()}
