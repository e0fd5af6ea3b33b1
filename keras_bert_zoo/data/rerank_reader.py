"""The reranking file: a TSV with the header `query<TAB>passage<TAB>label`.

One (query, passage) pair per line, label 1 (relevant) or 0 (not); a query may have any
number of lines, anywhere in the file. Candidates to score (`kbz predict rerank`) may leave
the label column out. Columns are found by name, so others may sit beside them. Every
problem is an error naming the file, the line and the fix, raised before any model work.
"""

import dataclasses
import os

import numpy as np

from keras_bert_zoo.data.readers import PathLike, file_error, read_lines, tsv_fields

COLUMNS = ("query", "passage", "label")
_EXPECTED = "\t".join(COLUMNS)


@dataclasses.dataclass(frozen=True)
class RankingPair:
    """One line: a query, a passage, its label (1, 0; None without a label column), its
    1-based line number and the line as read (`row`; written back with its score)."""

    query: str
    passage: str
    label: int | None
    line: int
    row: str = ""


@dataclasses.dataclass
class RankingData:
    """A reranking file's pairs, in file order; `labels` is int32 (empty when unlabelled)."""

    path: str
    pairs: list[RankingPair]
    header: tuple[str, ...] = COLUMNS

    @property
    def labelled(self) -> bool:
        return bool(self.pairs) and self.pairs[0].label is not None

    @property
    def labels(self) -> np.ndarray:
        if not self.labelled:
            return np.zeros([0], np.int32)
        return np.array([p.label for p in self.pairs], np.int32)

    @property
    def queries(self) -> list[str]:
        return [p.query for p in self.pairs]


def _columns(path, header: list[str], labels_optional: bool) -> tuple[list[int], bool]:
    """Indices of query, passage (and label) in `header`; whether the label column is there."""
    needed = COLUMNS[:2] if labels_optional else COLUMNS
    missing = [name for name in needed if name not in header]
    if missing:
        form = "query<TAB>passage[<TAB>label]" if labels_optional else _EXPECTED
        raise file_error(
            path,
            1,
            f"the header {header[:6]} lacks the column(s) {missing}",
            f"The first line must name the columns, TAB-separated: {form!r}.",
        )
    labelled = "label" in header
    return [header.index(name) for name in COLUMNS[: 2 + labelled]], labelled


def ranking_header(path, line: str, labels_optional: bool = False):
    """`(column names, [query, passage(, label)] indices, labelled)` of a header line."""
    header = tuple(name.strip() for name in line.split("\t"))
    columns, labelled = _columns(path, list(header), labels_optional)
    return header, columns, labelled


def ranking_pairs(path, numbered_lines, width: int, columns):
    """The `RankingPair`s of `(number, line)` pairs (blank lines skipped), each checked:
    `width` fields, a query and a passage, a label 0 or 1 when `columns` has its index."""
    for number, fields in tsv_fields(path, numbered_lines, width):
        query, passage = (fields[c].strip() for c in columns[:2])
        if not query or not passage:
            raise file_error(
                path, number, "has an empty query or passage", "Fill it in or drop the line."
            )
        label = None
        if len(columns) > 2:
            value = fields[columns[2]].strip()
            if value not in ("0", "1"):
                raise file_error(
                    path,
                    number,
                    f"label {value!r} is not 0 or 1",
                    "Label each pair 1 (relevant) or 0 (not relevant).",
                )
            label = int(value)
        yield RankingPair(query, passage, label, number, "\t".join(fields))


def read_ranking_tsv(
    path: PathLike, labels_optional: bool = False, require_relevant: bool = False
) -> RankingData:
    """Reads `query<TAB>passage<TAB>label` rows (labels 0/1).

    Args:
        labels_optional: a file without the label column reads too (candidates to score).
        require_relevant: every query must have a passage labelled 1 (a validation file:
            MRR and recall are undefined for a query nothing answers).

    >>> dev = kbz.data.read_ranking_tsv("dev.tsv", require_relevant=True)
    >>> dev.pairs[0].query, dev.labels[:3]
    """
    lines = read_lines(path, f"a TSV file with the header {_EXPECTED!r}")
    header, columns, labelled = ranking_header(path, lines[0], labels_optional)
    pairs = list(ranking_pairs(path, enumerate(lines[1:], start=2), len(header), columns))
    if not pairs:
        raise file_error(path, None, "has a header but no pairs", "Check the file.")
    if require_relevant:
        _check_relevant(path, pairs, labelled)
    return RankingData(os.fspath(path), pairs, header)


def _check_relevant(path, pairs: list[RankingPair], labelled: bool) -> None:
    if not labelled:
        raise file_error(
            path, 1, "has no label column", f"Validation needs labels: header {_EXPECTED!r}."
        )
    relevant = {p.query for p in pairs if p.label == 1}
    first = {}
    for pair in pairs:
        first.setdefault(pair.query, pair.line)
    without = [query for query in first if query not in relevant]
    if without:
        raise file_error(
            path,
            first[without[0]],
            f"query {without[0][:80]!r} has no passage labelled 1 ({len(without)} of "
            f"{len(first)} queries have none)",
            "Give each validation query at least one relevant passage, or drop those queries.",
        )
