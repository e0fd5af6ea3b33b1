"""Readers for fine-tuning data: GLUE-style TSV and CoNLL tagging files (SQuAD: `squad_reader`).

Readers return plain dataclasses. Label vocabularies come from the training file (class
labels sorted, numerically when they are all integers; tags with `O` first); pass the
training vocabulary when reading a validation file so unseen labels fail early. Every
problem is a `ValueError` naming the file, the 1-based line, what was expected and the fix.
"""

import dataclasses
import os
from collections.abc import Iterable, Sequence

import numpy as np

PathLike = str | os.PathLike


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


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
    """One CoNLL sentence: words, their tags (strings) and the line of its first word."""

    words: list[str]
    tags: list[str]
    line: int


@dataclasses.dataclass
class TaggingData:
    """A CoNLL file: sentences, tag vocabulary (`O` first) and int32 tag ids per sentence."""

    path: str
    sentences: list[TaggedSentence]
    tag_names: list[str]
    tag_ids: list[np.ndarray]


def file_error(path: PathLike, line: int | str | None, problem: str, fix: str) -> ValueError:
    """A `ValueError` reading `<path>, line <n>: <problem>. <fix>`."""
    where = f"{os.fspath(path)}, line {line}" if line is not None else os.fspath(path)
    return ValueError(f"{where}: {problem}. {fix}")


def read_lines(path: PathLike, what: str) -> list[str]:
    """The file's lines without their line endings; empty files are an error."""
    try:
        with open(path, encoding="utf-8", newline="\n") as handle:
            lines = [line.rstrip("\r\n") for line in handle]
    except UnicodeDecodeError as error:
        raise file_error(
            path, None, f"is not UTF-8 text ({error})", "Re-save the file as UTF-8."
        ) from error
    if not any(line.strip() for line in lines):
        raise file_error(
            path, None, f"is empty; expected {what}", "Check the path, or regenerate the file."
        )
    return lines


def sorted_labels(values: Iterable[str]) -> list[str]:
    """Distinct labels, sorted numerically when all are integers, else as strings.

    >>> kbz.data.sorted_labels(["10", "2", "2"])
    ['2', '10']
    """
    distinct = set(values)
    if all(v.lstrip("-").isdigit() for v in distinct):
        return sorted(distinct, key=int)
    return sorted(distinct)


def tag_vocabulary(tags: Iterable[str]) -> list[str]:
    """`O` first, then every entity type's tags (B- before I-), completed per scheme.

    A type seen only as `B-x` also gets `I-x` (and BIOES's `E-x`/`S-x` when the data uses
    that scheme), so a validation file may use any tag of a type the training file has.

    >>> kbz.data.tag_vocabulary(["I-loc", "O", "B-per", "B-loc"])
    ['O', 'B-loc', 'I-loc', 'B-per', 'I-per']
    """
    others = set(tags) - {"O"}
    typed = {tag for tag in others if tag[1:2] == "-" and tag[:1] in "BIES"}
    prefixes = "BIES" if any(tag[:1] in "ES" for tag in typed) else "BI"
    others |= {f"{prefix}-{tag[2:]}" for tag in typed for prefix in prefixes}
    order = {prefix: i for i, prefix in enumerate("BIES")}
    return ["O"] + sorted(
        others,
        key=lambda tag: (
            (tag[2:], order[tag[0]])
            if tag in others and tag[1:2] == "-" and tag[:1] in order
            else (tag, -1)
        ),
    )


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


def _column_index(path, header, column, line_number) -> int:
    if isinstance(column, int):
        return column
    if header is None or column not in header:
        raise file_error(
            path,
            line_number,
            f"no column named {column!r} (header: {header})",
            "Pass the column's name as in the header, or its 0-based index.",
        )
    return header.index(column)


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
    columns = [_column_index(path, header, c, 1) for c in text_columns]
    if label_column is not None:
        columns.append(_column_index(path, header, label_column, 1))
    width = len(header) if header else len(lines[0].split("\t"))
    examples = []
    for number, line in enumerate(lines[first - 1 :], start=first):
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
        texts = [fields[c] for c in columns[: len(text_columns)]]
        label = fields[columns[-1]].strip() if label_column is not None else None
        if label == "":
            raise file_error(path, number, "has an empty label", "Fill in the label column.")
        examples.append(TextExample(texts[0], texts[1] if len(texts) == 2 else None, label, number))
    if not examples:
        raise file_error(path, None, "has a header but no examples", "Check the file.")
    return _encode_classification(path, examples, label_column, label_names, regression)


def _encode_classification(path, examples, label_column, label_names, regression):
    pairs = [(e.line, e.label) for e in examples]
    if label_column is None:
        return ClassificationData(
            os.fspath(path), examples, list(label_names or []), np.zeros([0], np.int32)
        )
    if regression:
        values = []
        for line, value in pairs:
            try:
                values.append(float(value))
            except ValueError:
                raise file_error(
                    path,
                    line,
                    f"label {value!r} is not a number",
                    "Regression labels must be numbers.",
                ) from None
        return ClassificationData(os.fspath(path), examples, [], np.array(values, np.float32))
    names = list(label_names) if label_names is not None else sorted_labels(v for _, v in pairs)
    return ClassificationData(os.fspath(path), examples, names, encode_labels(path, pairs, names))


def read_conll(
    path: PathLike,
    *,
    tag_names: Sequence[str] | None = None,
    word_column: int = 0,
    tag_column: int = -1,
) -> TaggingData:
    """Reads a CoNLL file: `word<TAB>tag` (or more columns) per line, blank lines between
    sentences (a whitespace-only line, such as a lone TAB, also separates; `-DOCSTART-` lines
    are skipped). Every line must have as many columns as the first one.

    >>> train = kbz.data.read_conll("examples/data/wnut17_train_sample.conll")
    >>> dev = kbz.data.read_conll("examples/data/wnut17_dev_sample.conll",
    ...                           tag_names=train.tag_names)
    """
    lines = read_lines(path, "one `word<TAB>tag` line per word, blank lines between sentences")
    sentences, current, width = [], [], None
    for number, line in enumerate(lines + [""], start=1):
        if not line.strip() or line.startswith("-DOCSTART-"):
            if current:
                sentences.append(
                    TaggedSentence(
                        [w for w, _, _ in current], [t for _, t, _ in current], current[0][2]
                    )
                )
            current = []
            continue
        fields = [f.strip() for f in (line.split("\t") if "\t" in line else line.split())]
        width = width or len(fields)
        if len(fields) != width or width < 2:
            raise file_error(
                path,
                number,
                f"has {len(fields)} columns, expected {max(width, 2)} "
                "(a word and its tag, as on the first line)",
                "Separate the word and the tag by one TAB, and put a blank line between sentences.",
            )
        word, tag = fields[word_column], fields[tag_column]
        if not word or not tag:
            raise file_error(path, number, "has an empty word or tag", "Fill in both columns.")
        current.append((word, tag, number))
    names = (
        list(tag_names)
        if tag_names is not None
        else tag_vocabulary(t for s in sentences for t in s.tags)
    )
    ids = [
        encode_labels(path, [(s.line + i, t) for i, t in enumerate(s.tags)], names, "tag")
        for s in sentences
    ]
    return TaggingData(os.fspath(path), sentences, names, ids)
