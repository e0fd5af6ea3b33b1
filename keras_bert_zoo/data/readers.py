"""Readers for fine-tuning data: GLUE-style TSV here (CoNLL: `conll_reader`, SQuAD:
`squad_reader`), and the helpers they share.

Readers return plain dataclasses. Label vocabularies come from the training file (class
labels sorted, numerically when they are all integers; tags with `O` first); pass the
training vocabulary when reading a validation file so unseen labels fail early. Every
problem is a `ValueError` naming the file, the 1-based line, what was expected and the fix.
"""

import contextlib
import dataclasses
import gzip
import logging
import os
import re
import zlib
from collections.abc import Iterable, Sequence
from typing import TextIO

import numpy as np

PathLike = str | os.PathLike
logger = logging.getLogger(__name__)
_FEW_EXAMPLES = 5  # a training class with fewer examples than this gets a warning
GZIP_MAGIC = b"\x1f\x8b"
_HEADER_NAME = re.compile(r"[A-Za-z_][\w.-]*")  # a column name: no spaces, not a number


@dataclasses.dataclass(frozen=True)
class TextExample:
    """One classification/regression example; `label` is the raw string (None if absent)."""

    text_a: str
    text_b: str | None
    label: str | None
    line: int


@dataclasses.dataclass
class ClassificationData:
    """A GLUE-style file: examples, label vocabulary and encoded labels.

    `labels` holds int32 ids into `label_names` (classification), float32 values (regression,
    `label_names == []`), or is empty when the file has no label column.
    """

    path: str
    examples: list[TextExample]
    label_names: list[str]
    labels: np.ndarray


def file_error(path: PathLike, line: int | str | None, problem: str, fix: str) -> ValueError:
    """A `ValueError` reading `<path>, line <n>: <problem>. <fix>`."""
    where = f"{os.fspath(path)}, line {line}" if line is not None else os.fspath(path)
    return ValueError(f"{where}: {problem}. {fix}")


def gunzip(data: bytes) -> bytes:
    """`data`, decompressed when it is gzip (told by its magic bytes, whatever its name)."""
    return gzip.decompress(data) if data[:2] == GZIP_MAGIC else data


def open_text(path: PathLike) -> TextIO:
    """The file as UTF-8 text, read through gzip when it is compressed (`.tsv.gz` ...)."""
    with open(path, "rb") as handle:
        compressed = handle.read(2) == GZIP_MAGIC
    if compressed:
        return gzip.open(path, "rt", encoding="utf-8", newline="\n")
    return open(path, encoding="utf-8", newline="\n")  # noqa: SIM115 (the caller's `with`)


def _first_undecodable_line(path: PathLike) -> int | None:
    """The number of the first line that is not UTF-8 (for the error message only)."""
    with open(path, "rb") as handle:
        data = handle.read()
    with contextlib.suppress(OSError, EOFError, zlib.error):
        data = gunzip(data)
    for number, line in enumerate(data.split(b"\n"), start=1):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return number
    return None


def read_lines(path: PathLike, what: str) -> list[str]:
    """The file's lines without their line endings (gzip read transparently); empty files
    are an error."""
    try:
        with open_text(path) as handle:
            lines = [line.rstrip("\r\n") for line in handle]
    except UnicodeDecodeError as error:
        raise file_error(
            path,
            _first_undecodable_line(path),
            f"is not UTF-8 text ({error})",
            "Re-save the file as UTF-8 (or check that it is a text file at all).",
        ) from error
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise file_error(
            path, None, f"is a damaged gzip file ({error})", "Compress the file again."
        ) from error
    if not any(line.strip() for line in lines):
        raise file_error(
            path, None, f"is empty; expected {what}", "Check the path, or regenerate the file."
        )
    return lines


def _is_integer(label: str) -> bool:
    """The one rule for a numeric class label ("0", "-1"), used to sort and to check kinds."""
    return label.lstrip("-").isdigit()


def sorted_labels(values: Iterable[str]) -> list[str]:
    """Distinct labels, sorted numerically when all are integers, else as strings.

    >>> kbz.data.sorted_labels(["10", "2", "2"])
    ['2', '10']
    """
    distinct = set(values)
    if all(_is_integer(v) for v in distinct):
        return sorted(distinct, key=int)
    return sorted(distinct)


def encode_labels(
    path: PathLike, values: Sequence[tuple[int, str]], names: Sequence[str], what: str = "label"
) -> np.ndarray:
    """int32 ids of `(line, label)` pairs in `names`; an unknown label names file and line."""
    index = {name: i for i, name in enumerate(names)}
    for line, value in values:
        if value not in index:
            raise file_error(
                path,
                line,
                f"{what} {value!r} is not one of the training {what}s {list(names)}",
                f"Fix the {what}, or train on data that has it.",
            )
    return np.array([index[value] for _, value in values], dtype=np.int32)


def tsv_header(path: PathLike) -> list[str]:
    """The column names on the first line of a TSV file."""
    return read_lines(path, "a TSV file with one example per line")[0].split("\t")


def tsv_fields(path: PathLike, numbered_lines, width: int):
    """`(line number, fields)` of each non-blank line of `(number, line)` pairs; a line
    without `width` TAB-separated fields is an error naming it."""
    for number, line in numbered_lines:
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != width:
            raise file_error(
                path,
                number,
                f"has {len(fields)} TAB-separated columns, expected {width}",
                "Remove stray TABs inside the text, or fix the row.",
            )
        yield number, fields


def column_index(path, header, column, argument, expected) -> int:
    """The index of `column` (a name in `header`, or an index), or an error naming the flag."""
    if isinstance(column, int):
        return column
    if header is not None and column in header:
        return header.index(column)
    if header is not None and not all(_HEADER_NAME.fullmatch(name) for name in header):
        raise file_error(  # a line of text, numbers or punctuation: an example, not names
            path,
            1,
            f"looks like an example, not a header line naming the columns ({header[:3]})",
            f"Add a first line such as {chr(9).join(expected)!r} (TAB-separated).",
        )
    raise file_error(
        path,
        1,
        f"has no column named {column!r} (header: {header})",
        f"Pass `{argument}` as named in the header, or rename the column.",
    )


def read_glue_tsv(
    path: PathLike,
    text_columns: Sequence[str | int] = ("sentence",),
    label_column: str | int | None = "label",
    *,
    has_header: bool = True,
    label_names: Sequence[str] | None = None,
    regression: bool = False,
) -> ClassificationData:
    """Reads a GLUE-style TSV: one or two text columns and an optional label column.

    >>> train = kbz.data.read_glue_tsv("examples/data/sst2_sample.tsv")
    >>> dev = kbz.data.read_glue_tsv("examples/data/sst2_heldout.tsv",
    ...                              label_names=train.label_names)
    """
    if not 1 <= len(text_columns) <= 2:
        raise ValueError(f"text_columns must name one or two columns; received {text_columns}.")
    lines = read_lines(path, "a TSV file with one example per line")
    header = lines[0].split("\t") if has_header else None
    first = 2 if has_header else 1
    expected = [*text_columns, *([label_column] if label_column is not None else [])]
    expected = [str(c) for c in expected]
    columns = [column_index(path, header, c, "text_columns", expected) for c in text_columns]
    if label_column is not None:
        columns.append(column_index(path, header, label_column, "label_column", expected))
    width = len(header) if header else len(lines[0].split("\t"))
    examples = []
    numbered = enumerate(lines[first - 1 :], start=first)
    for number, fields in tsv_fields(path, numbered, width):
        texts = [fields[c] for c in columns[: len(text_columns)]]
        label = fields[columns[-1]].strip() if label_column is not None else None
        if label == "":
            raise file_error(path, number, "has an empty label", "Fill in the label column.")
        examples.append(TextExample(texts[0], texts[1] if len(texts) == 2 else None, label, number))
    if not examples:
        raise file_error(path, None, "has a header but no examples", "Check the file.")
    return _encode_classification(path, examples, label_column, label_names, regression)


def regression_label(path: PathLike, line: int, value: str) -> float:
    """A regression label as a number; one that is not names file and line."""
    try:
        return float(value)
    except ValueError:
        raise file_error(
            path, line, f"label {value!r} is not a number", "Regression labels must be numbers."
        ) from None


def _encode_classification(path, examples, label_column, label_names, regression):
    pairs = [(e.line, e.label) for e in examples]
    if label_column is None:
        return ClassificationData(
            os.fspath(path), examples, list(label_names or []), np.zeros([0], np.int32)
        )
    if regression:
        values = [regression_label(path, line, value) for line, value in pairs]
        return ClassificationData(os.fspath(path), examples, [], np.array(values, np.float32))
    if label_names is None:  # the training file decides the classes: check them
        _check_label_kinds(path, pairs)
    names = list(label_names) if label_names is not None else sorted_labels(v for _, v in pairs)
    encoded = encode_labels(path, pairs, names)
    if label_names is None:
        counts = np.bincount(encoded, minlength=len(names))
        rare = [f"{names[i]!r} ({counts[i]})" for i in np.flatnonzero(counts < _FEW_EXAMPLES)]
        if rare and len(pairs) >= 10 * _FEW_EXAMPLES:
            logger.warning(
                "%s: class(es) %s have fewer than %d examples; the model will "
                "hardly learn them. Check the labels.",
                path,
                ", ".join(rare),
                _FEW_EXAMPLES,
            )
    return ClassificationData(os.fspath(path), examples, names, encoded)


def _check_label_kinds(path, pairs) -> None:
    """Numeric labels mixed with text ones are a data error (a stray header or typo), not a
    new class: the odd ones out are named with their line."""
    numeric = [(line, v) for line, v in pairs if _is_integer(v)]
    text = [(line, v) for line, v in pairs if not _is_integer(v)]
    if numeric and text:
        odd, usual = (text, numeric) if len(text) <= len(numeric) else (numeric, text)
        line, value = odd[0]
        examples = sorted({v for _, v in usual})[:5]
        raise file_error(
            path,
            line,
            f"label {value!r} differs in kind from the others ({len(odd)} such label(s) among "
            f"{len(pairs)}; the rest look like {examples})",
            "Fix or remove those lines: mixing numeric and text labels would make a class of "
            "the stray value.",
        )
