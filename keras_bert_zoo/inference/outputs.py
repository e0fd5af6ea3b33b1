"""Output files written while a stream runs, complete under their name only at the end, and
resumable after a kill.

`StreamOutput(path, identity, writer)` writes into `.<name>.partial` beside `path` and, after
each window, records in `.<name>.progress.json` (replaced atomically, after the rows are
flushed to disk) how many rows are done, where the input stood, what the writer needs to
continue, and the run's `identity` (model, settings, row count). The same command again
finds that record and continues after those rows; a run whose identity differs is refused
with each difference named. At the end the partial file is renamed to `path` (atomically,
`saving.atomic`) and the record removed, so `path` is byte-for-byte what one uninterrupted
run writes. Rows after the last commit may be written twice (once before a kill, once after);
they are written at the same place, so the file holds them once.

- `NpyRows`: a `.npy` of `[rows, width]` preallocated (its header written first), each
  window written at its offset with `os.pwrite`, nothing mapped into memory;
- `TextRows`: text appended in input order (a header first); a resume cuts the file back to
  the last committed byte.
"""

import contextlib
import fcntl
import hashlib
import json
import os
from pathlib import Path

import numpy as np

from keras_bert_zoo.saving.atomic import fsync_path, write_json

EMPTY_MARK = (0, hashlib.sha256().hexdigest())


def partial_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.partial")


def progress_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.progress.json")


def differences(stored: dict, current: dict) -> list[str]:
    """`key: was X, now Y` for each differing entry, nested keys joined by "/" (a model's
    `files/model.weights.safetensors/sha256`)."""
    stored, current = _flat(stored), _flat(current)
    return [
        f"{key}: was {stored.get(key)!r}, now {current.get(key)!r}"
        for key in sorted(set(stored) | set(current))
        if stored.get(key) != current.get(key)
    ]


def _flat(values: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in values.items():
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{prefix}{key}/"))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


class StreamOutput(contextlib.AbstractContextManager):
    """`with StreamOutput(path, identity, writer) as out:` then `out.rows` / `out.mark` (what
    is done), `out.write(start, outputs)` and `out.commit(rows, mark)`; leaving the block
    without an error finishes the file.

    Args:
        path: the file to write.
        identity: JSON-able values that determine the output (model fingerprint, settings,
            row count); a resume must match them.
        writer: `NpyRows` or `TextRows`.
        restart: discard an unfinished output (of this run or another) and start afresh.
    """

    def __init__(self, path, identity: dict, writer, restart: bool = False):
        self.path = Path(path)
        self.identity = json.loads(json.dumps(identity))  # as it reads back
        self.writer = writer
        self.restart = restart
        self.partial, self.record = partial_path(self.path), progress_path(self.path)
        self.rows, self.mark = 0, EMPTY_MARK

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = self._acquire()
        try:
            self.writer.open(self.partial, self._stored_state())
        except BaseException:
            self._lock.close()
            raise
        return self

    def _acquire(self):
        """The partial file, opened and locked (`flock`, released by the kernel when the
        process ends, even by `kill -9`): a second run writing the same output stops at
        once. Checked to be the file under that name (a finishing run renames it)."""
        while True:
            handle = open(self.partial, "ab")  # noqa: SIM115 (held for the whole run)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                raise ValueError(
                    f"{self.path} is being written by another kbz run. Wait for it to finish, "
                    "or choose another output."
                ) from None
            try:
                same = os.stat(self.partial).st_ino == os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return handle
            handle.close()

    def _stored_state(self) -> dict | None:
        if self.restart or not self.record.is_file() or not self.partial.stat().st_size:
            return None  # nothing started, or a finished file whose record was not removed
        stored = json.loads(self.record.read_text())
        problems = differences(stored["identity"], self.identity)
        if problems:
            raise ValueError(
                f"{self.path} is the unfinished output of another run ({stored['rows']} rows "
                f"done), which differed in: {'; '.join(problems)}. Run that command again to "
                "finish it, pass another output, or pass --restart to start afresh."
            )
        self.rows, self.mark = stored["rows"], tuple(stored["mark"])
        return stored["writer"]

    def write(self, start: int, outputs) -> None:
        self.writer.write(start, outputs)

    def commit(self, rows: int, mark) -> None:
        """Records `rows` as done (their bytes flushed to disk first)."""
        state = self.writer.sync()
        record = {"identity": self.identity, "rows": rows, "mark": list(mark), "writer": state}
        write_json(self.record, record)
        self.rows, self.mark = rows, tuple(mark)

    def __exit__(self, exc_type=None, *exc_info):
        self.writer.close()
        try:
            if exc_type is None:
                fsync_path(self.partial)
                os.replace(self.partial, self.path)
                fsync_path(self.path.parent)
                self.record.unlink(missing_ok=True)
            elif not self.rows:  # nothing committed: nothing to continue, leave no trace
                self.partial.unlink(missing_ok=True)
                self.record.unlink(missing_ok=True)
        finally:
            self._lock.close()


class NpyRows:
    """`[rows, width]` rows of a `.npy` written at their offsets (as `np.save` lays it out)."""

    def __init__(self, rows: int, width: int, dtype=np.float32):
        self.dtype = np.dtype(dtype)
        self.shape = (int(rows), int(width))
        self.row_bytes = self.shape[1] * self.dtype.itemsize
        self.file, self.offset = None, None

    def open(self, path: Path, state: dict | None) -> None:
        if state is None:
            header = {
                "descr": np.lib.format.dtype_to_descr(self.dtype),
                "fortran_order": False,
                "shape": self.shape,
            }
            with open(path, "wb") as file:
                np.lib.format.write_array_header_1_0(file, header)
                self.offset = file.tell()
                file.truncate(self.offset + self.shape[0] * self.row_bytes)  # sparse
        else:
            self.offset = state["offset"]
        self.file = open(path, "r+b")  # noqa: SIM115 (closed by `close`)

    def write(self, start: int, rows) -> None:
        rows = np.ascontiguousarray(rows, self.dtype)
        if rows.shape[1:] != self.shape[1:] or start + len(rows) > self.shape[0]:
            raise ValueError(f"rows {rows.shape} at {start} do not fit a {self.shape} array.")
        os.pwrite(self.file.fileno(), rows.tobytes(), self.offset + start * self.row_bytes)

    def sync(self) -> dict:
        os.fsync(self.file.fileno())
        return {"offset": self.offset}

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


class TextRows:
    """Text appended in input order: `header` first, then `format_rows(start, outputs)`."""

    def __init__(self, format_rows, header: str = ""):
        self.format_rows, self.header = format_rows, header
        self.file = None

    def open(self, path: Path, state: dict | None) -> None:
        if state is None:
            self.file = open(path, "wb")  # noqa: SIM115 (closed by `close`)
            self.file.write(self.header.encode("utf-8"))
        else:
            self.file = open(path, "r+b")  # noqa: SIM115
            self.file.truncate(state["bytes"])  # what came after the last commit
            self.file.seek(state["bytes"])

    def write(self, start: int, outputs) -> None:
        self.file.write(self.format_rows(start, outputs).encode("utf-8"))

    def sync(self) -> dict:
        self.file.flush()
        os.fsync(self.file.fileno())
        return {"bytes": self.file.tell()}

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


class Tallied:
    """A writer (`NpyRows`, `TextRows`) whose outputs come with counts that add up over the
    rows (a labelled file's metric counts): `write(start, (outputs, counts))`. The sums of
    the committed rows are kept with them in the progress record, so the `totals` of a
    resumed run count every row, the earlier attempt's too."""

    def __init__(self, writer, size: int):
        self.writer, self.totals = writer, [0] * size

    def open(self, path: Path, state: dict | None) -> None:
        self.writer.open(path, state and state["writer"])
        self.totals = list(state["totals"]) if state else [0] * len(self.totals)

    def write(self, start: int, outputs) -> None:
        outputs, counts = outputs
        self.writer.write(start, outputs)
        self.totals = [int(t + c) for t, c in zip(self.totals, counts, strict=True)]

    def sync(self) -> dict:
        return {"writer": self.writer.sync(), "totals": self.totals}

    def close(self) -> None:
        self.writer.close()
