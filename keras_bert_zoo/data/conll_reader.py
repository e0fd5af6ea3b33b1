"""Reader for CoNLL tagging files (`token<TAB>tag` per line, a blank line between sentences).

Tag vocabularies come from the training file, `O` first and completed per entity type
(`tag_vocabulary`); pass the training tags when reading a validation file. New text to tag
is the same layout without the tag column (`labels_optional=True`, as `kbz predict tag`).

>>> train = kbz.data.read_conll("examples/data/wnut17_train_sample.conll")
"""

import dataclasses
import os
from collections.abc import Iterable, Sequence

import numpy as np

from keras_bert_zoo.data.line_stream import LineSource
from keras_bert_zoo.data.readers import PathLike, encode_labels, file_error, read_lines


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
    """One CoNLL sentence: words, their tags (strings; empty for words-only text) and the
    line of its first word."""

    words: list[str]
    tags: list[str]
    line: int


@dataclasses.dataclass
class TaggingData:
    """A CoNLL file: sentences, tag vocabulary (`O` first) and int32 tag ids per sentence
    (`tag_ids` is empty for a words-only file)."""

    path: str
    sentences: list[TaggedSentence]
    tag_names: list[str]
    tag_ids: list[np.ndarray]

    @property
    def labelled(self) -> bool:
        """Whether the file has a tag column (metrics need one)."""
        return bool(self.tag_ids)


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


def read_conll(
    path: PathLike,
    *,
    tag_names: Sequence[str] | None = None,
    word_column: int = 0,
    tag_column: int = -1,
    labels_optional: bool = False,
) -> TaggingData:
    """Reads a CoNLL file: `word<TAB>tag` (or more columns) per line, blank lines between
    sentences (a whitespace-only line, such as a lone TAB, also separates; `-DOCSTART-` lines
    are skipped). Every line must have as many columns as the first one. With
    `labels_optional`, a words-only file (one word per line) reads too, without tags.

    >>> train = kbz.data.read_conll("examples/data/wnut17_train_sample.conll")
    >>> dev = kbz.data.read_conll("examples/data/wnut17_dev_sample.conll",
    ...                           tag_names=train.tag_names)
    >>> new = kbz.data.read_conll("words.conll", labels_optional=True)  # new.labelled: False
    """
    lines = read_lines(path, "one `word<TAB>tag` line per word, blank lines between sentences")
    columns = {"word_column": word_column, "tag_column": tag_column}
    sentences = list(
        conll_sentences(path, enumerate(lines, 1), labels_optional=labels_optional, **columns)
    )
    if sentences and not sentences[0].tags:  # words only: text to tag
        return TaggingData(os.fspath(path), sentences, list(tag_names or []), [])
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


def conll_sentences(
    path: PathLike,
    numbered_lines,
    *,
    word_column: int = 0,
    tag_column: int = -1,
    labels_optional: bool = False,
):
    """The `TaggedSentence`s of `(number, line)` pairs, each yielded once the line that ends
    it is read (what a streamed reader records as done); the checks of `read_conll`."""
    current, width = [], None
    for number, line in numbered_lines:
        if not line.strip() or line.startswith("-DOCSTART-"):
            if current:
                yield _sentence(current)
            current = []
            continue
        fields = [f.strip() for f in (line.split("\t") if "\t" in line else line.split())]
        width = width or len(fields)
        current.append(
            _word_and_tag(path, number, fields, width, labels_optional, word_column, tag_column)
        )
    if current:
        yield _sentence(current)


def words_only(path: PathLike) -> bool:
    """Whether a CoNLL file's first word line has no tag column (text to tag)."""
    for _, line in LineSource(path):
        if line.strip() and not line.startswith("-DOCSTART-"):
            return len(line.split("\t") if "\t" in line else line.split()) == 1
    return False


def _sentence(current) -> TaggedSentence:
    words = [w for w, _, _ in current]
    return TaggedSentence(words, [t for _, t, _ in current if t is not None], current[0][2])


def _word_and_tag(path, number, fields, width, labels_optional, word_column, tag_column):
    """`(word, tag, line)` of one line; the tag is None in a words-only file."""
    words_only = width == 1 and labels_optional
    if words_only and len(fields) != 1:
        raise file_error(
            path,
            number,
            f"has {len(fields)} columns, expected 1 (a word, as on the first line)",
            "Put one word per line, or a word and its tag on every line.",
        )
    if words_only:
        return fields[0], None, number
    if len(fields) != width or width < 2:
        raise file_error(
            path,
            number,
            f"has {len(fields)} columns, expected {max(width, 2)} "
            "(a word and its tag, as on the first line)",
            "Separate the word and the tag by one TAB, and put a blank line between sentences.",
        )
    word, tag = fields[word_column], fields[tag_column]
    if len(word.split()) > 1:  # CoNLL has one word per line: several are another kind of file
        raise file_error(
            path,
            number,
            f"holds several words in its word column ({word[:40]!r}): this looks like a TSV "
            "of sentences (kbz finetune classify's kind), not a CoNLL file",
            "Tagging reads CoNLL: one `word<TAB>tag` line per word, a blank line between "
            "sentences.",
        )
    if not word or not tag:
        raise file_error(path, number, "has an empty word or tag", "Fill in both columns.")
    return word, tag, number
