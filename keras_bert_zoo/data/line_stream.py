"""An input file read a line at a time, for the streaming jobs (`kbz embed`, `kbz predict`).

`LineSource` yields `(line number, text)` and keeps, as it goes, the count of lines read and a
sha256 of their text: a resumed job reads the lines it already did again (cheaply, without
the model), and compares that digest with the one its output recorded, so an input changed in
the part already done is refused while one fixed further on (a malformed line) resumes.
Lines end at "\\n" only (a "\\r\\n" ending loses its "\\r"), as `wc -l` counts them; each is
decoded on its own, so a line that is not UTF-8 is named by its number.

>>> source = LineSource("sentences.txt.gz")
>>> for number, text in source: ...
"""

import gzip
import hashlib
import zlib
from collections.abc import Iterator

from keras_bert_zoo.data.readers import GZIP_MAGIC, PathLike, file_error

_BLOCK = 1 << 20


def _open_binary(path: PathLike):
    with open(path, "rb") as handle:
        compressed = handle.read(2) == GZIP_MAGIC
    return gzip.open(path, "rb") if compressed else open(path, "rb")  # noqa: SIM115


def _damaged(path, error) -> ValueError:
    return file_error(path, None, f"is a damaged gzip file ({error})", "Compress the file again.")


def count_lines(path: PathLike) -> int:
    """The lines `LineSource(path)` yields (a last line without "\\n" counts), read in blocks."""
    count, last = 0, b"\n"
    try:
        with _open_binary(path) as handle:
            while block := handle.read(_BLOCK):
                count += block.count(b"\n")
                last = block[-1:]
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise _damaged(path, error) from error
    return count + (last != b"\n")


class LineSource:
    """The lines of a text file (gzip read transparently), numbered from 1.

    `lines` is how many were read so far and `digest()` the sha256 of their text (each with
    a "\\n"); `mark()` is both at once, for a caller that records where it stopped.
    """

    def __init__(self, path: PathLike):
        self.path = path
        self.lines = 0
        self._hash = hashlib.sha256()

    def __iter__(self) -> Iterator[tuple[int, str]]:
        try:
            with _open_binary(self.path) as handle:
                for raw in handle:
                    self.lines += 1
                    text = raw.rstrip(b"\n").removesuffix(b"\r")
                    self._hash.update(text + b"\n")
                    yield self.lines, self._decode(text)
        except (EOFError, gzip.BadGzipFile, zlib.error) as error:
            raise _damaged(self.path, error) from error

    def _decode(self, text: bytes) -> str:
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise file_error(
                self.path, self.lines, f"is not UTF-8 text ({error})", "Re-save it as UTF-8."
            ) from error

    def digest(self) -> str:
        return self._hash.hexdigest()

    def mark(self) -> tuple[int, str]:
        """`(lines read, digest)`."""
        return self.lines, self.digest()


def first_line(path: PathLike) -> str:
    """The first line of a text file (gzip read transparently), without reading the rest."""
    for _, line in LineSource(path):
        return line
    raise file_error(path, None, "is empty; expected a TSV file", "Check the path.")
