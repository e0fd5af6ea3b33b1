"""The streaming loop: records read a window at a time, predicted, written, committed.

Memory holds one window (its records, their arrays, their outputs), never the input: a
window is sorted by length inside (`training.bucketed_prediction.predict`, which the
`predict_window` callables use), so bucketing still pays, and its outputs go to the output
in input order before the next window is read. After each window the output commits the
rows done and where the input stood (`outputs.StreamOutput`); a resumed run skips those
records (parsed, not predicted) and checks that the input up to there is the same.

A record that cannot be read (a malformed line) stops the run after the records before it
are predicted and committed: the error names the line, and the same command continues from
there once the line is fixed.
"""

import itertools
import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator

from tqdm.auto import tqdm

from keras_bert_zoo.console import status
from keras_bert_zoo.training.progress import LogLines, rows_counted_by

logger = logging.getLogger(__name__)
DEFAULT_WINDOW = 10_000  # records per window: what memory holds and what bucketing sorts

Mark = tuple[int, str]  # (input lines read, sha256 of their text): `data.line_stream`


def stream(
    records: Iterable[tuple[object, Mark]],
    predict_window: Callable[[list], object],
    output,
    window: int = DEFAULT_WINDOW,
    progress: "Progress | None" = None,
) -> int:
    """Predicts every record not yet in `output`, a window at a time; returns the row count.

    Args:
        records: `(record, mark)` pairs, `mark` being where the input stands after the
            record (`LineSource.mark()`); a `ValueError` raised while reading is a malformed
            record, reported once the records before it are committed.
        predict_window: `records -> outputs` for a list of records, outputs row-aligned.
        output: a `StreamOutput` (`rows`, `mark`, `write(start, outputs)`, `commit`).
    """
    if window < 1:
        raise ValueError(f"`window` must be a positive integer. Received: window={window}")
    records = iter(records)
    rows = _skip_done(records, output)
    progress = progress or Progress(None, rows, "rows")
    while True:
        # Windows start at multiples of `window` (after a stop at a malformed line too), so
        # a resumed run predicts the same windows, to the same bytes, as one that never
        # stopped.
        size = window - rows % window
        chunk, mark, error = [], output.mark, None
        try:
            for pair in itertools.islice(records, size):
                record, mark = pair
                chunk.append(record)
        except ValueError as caught:
            error = caught
        if chunk:
            # The passes count into the whole input's progress, in records (a record may be
            # several rows of a pass: a long sentence is split into windows of tokens).
            with rows_counted_by(progress.advance, len(chunk)):
                outputs = predict_window(chunk)
            output.write(rows, outputs)
            rows += len(chunk)
            output.commit(rows, mark)
            progress.update(rows)
        if error is not None:
            raise ValueError(
                f"{error} Nothing before it is lost: {rows} rows are written; once the line "
                "is fixed, the same command continues from there."
            ) from error
        if len(chunk) < size:
            progress.close(rows)
            return rows


def _skip_done(records: Iterator, output) -> int:
    """Reads past the records `output` already holds; the input must be unchanged there."""
    if not output.rows:
        return 0
    mark, began = None, time.monotonic()
    for pair in itertools.islice(records, output.rows):
        mark = pair[1]
    if mark != tuple(output.mark):
        raise ValueError(
            f"{output.path} was computed from an input whose first {output.mark[0]} lines "
            "differ from this one's, so it cannot be continued. Pass the input it started "
            "with, or --restart to start afresh."
        )
    status.info(
        "%s: continuing after the %d rows already written (input read up to them again in %.1f s).",
        output.path,
        output.rows,
        time.monotonic() - began,
    )
    return output.rows


class Progress:
    """Rows done, rate and time left over the whole input: a live bar at a terminal (tqdm),
    else plain lines at least every `training.progress.LOG_EVERY_SECONDS` (`LogLines`,
    advanced by each batch of the prediction passes) and one summary line at the end
    (`embed [onnx int8]: 1,888 texts in 40.2 s (47.0 text/s)`, as
    `training.progress.progress_bar` writes for a whole-file run); `unit` names a row."""

    def __init__(self, total: int | None, done: int, what: str, unit="row"):
        self.first, self.what, self.unit, self.counted = done, what, unit, done
        self.began = time.monotonic()
        self.bar = tqdm(total=total, initial=done, unit=" rows", desc=what, disable=None)
        self.lines = LogLines(what, total, "rows", done=done, enabled=self.bar.disable)

    def advance(self, rows: int) -> None:
        """`rows` more done (a batch)."""
        self.counted += rows
        if self.bar.disable:
            self.lines.advance(rows)
        else:
            self.bar.update(rows)

    def update(self, done: int) -> None:
        """`done` rows committed (a window's end): whatever its passes did not count."""
        if done > self.counted:
            self.advance(done - self.counted)

    def close(self, done: int) -> None:
        if self.bar.disable:
            seconds = time.monotonic() - self.began
            rate = (done - self.first) / max(seconds, 1e-9)
            line = f"{self.what}: {done - self.first:,} {self.unit}s in {seconds:.1f} s "
            tqdm.write(f"{line}({rate:.1f} {self.unit}/s)", file=sys.stderr)  # stdout: results
        self.bar.close()
