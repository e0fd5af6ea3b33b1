"""The embedder's training file: `query<TAB>positive` pairs, one per line.

A first line `anchor<TAB>positive`, `query<TAB>positive` or `sentence1<TAB>sentence2` is a
header and skipped; every other line must hold two non-empty tab-separated texts (gzip read
transparently). Every problem is an error naming the file, the pair and the fix.
"""

import dataclasses
import os

from keras_bert_zoo.data.readers import PathLike, read_lines

HEADERS = (("anchor", "positive"), ("query", "positive"), ("sentence1", "sentence2"))


@dataclasses.dataclass
class PairsData:
    """A pairs file's `(query, positive)` texts, in file order."""

    path: str
    pairs: list[tuple[str, str]]


def read_pairs(path: PathLike, flag: str | None = None) -> list[tuple[str, str]]:
    """The `(query, positive)` pairs of the file; `flag` names it in errors (`--train`)."""
    where = f"{flag} {os.fspath(path)}" if flag else os.fspath(path)
    try:
        lines = [line for line in read_lines(path, "query<TAB>positive pairs") if line.strip()]
    except ValueError as error:
        raise ValueError(f"{flag + ' ' if flag else ''}{error}") from None
    if tuple(lines[0].lower().split("\t")) in HEADERS:
        lines = lines[1:]
    pairs = []
    for number, line in enumerate(lines, 1):
        fields = line.split("\t")
        if len(fields) != 2 or not all(f.strip() for f in fields):
            raise ValueError(
                f"{where}, pair {number}: expected `query<TAB>positive` (two non-empty "
                f"tab-separated texts). Received: {line[:80]!r}"
            )
        pairs.append((fields[0], fields[1]))
    if not pairs:
        raise ValueError(f"{where} holds no pairs, only a header. Add query<TAB>positive lines.")
    return pairs
