"""What a run shows while it trains: a live bar at a terminal, plain lines in a log file.

Keras' progress bar redraws itself with ANSI colour codes and carriage returns on every POSIX
system, terminal or not, which fills a redirected log with control characters; its
`verbose=2` prints one plain line per epoch instead (`fit_verbose`). Runs whose fit "epochs"
are checkpoint intervals (pretraining, `--checkpoint-every`) count steps instead of
"Epoch 1/3": `StepProgress` shows `step 2000/10000` over the whole run, a resume included.

A log also gets a plain line at least every `LOG_EVERY_SECONDS` during long work (`LogLines`:
training steps through `LoggedSteps`, prediction and embedding rows, an export's time), so a
redirected run never goes quiet for an epoch: what is done of the total, the rate, the time
left and, while training, the running loss.
"""

import contextlib
import contextvars
import math
import sys
import threading
import time

import keras
from tqdm.auto import tqdm

from keras_bert_zoo.training.processes import is_chief


def interactive() -> bool:
    """Whether standard output is a terminal (where a redrawn bar makes sense)."""
    return hasattr(sys.stdout, "isatty") and sys.stdout.isatty()


def fit_verbose(verbose):
    """Keras' `verbose` for fit: "auto" is a live bar (1) at a terminal, else one line per
    epoch (2)."""
    if verbose == "auto":
        return 1 if interactive() else 2
    return verbose


# A log gets a line at least this often (twice a minute: "once a minute" with room to spare).
LOG_EVERY_SECONDS = 30.0


def _duration(seconds: float) -> str:
    """`42s`, `3m05s`, `2h07m`.

    >>> _duration(185)
    '3m05s'
    """
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class LogLines:
    """Plain progress lines for a log, at most one per `every` seconds (default
    `LOG_EVERY_SECONDS`): `embed: rows 2048/10000 (20%) - 85.3 rows/s - 1m33s left`.

    Args:
        what: the work, first on each line (`finetune`, `embed`, ...).
        total: the units of the whole work.
        unit: what is counted (`steps`, `rows`).
        done: units done before this process started (a resume's step).
        enabled: False makes it silent (at a terminal, or a process other than the first).

    >>> lines = LogLines("embed", 100, "rows", every=0)
    >>> lines.advance(25)  # doctest: +ELLIPSIS
    embed: rows 25/100 (25%) - ... rows/s - ... left
    """

    def __init__(self, what, total, unit, done=0, enabled=True, every=None, stream=None):
        self.what, self.total, self.unit, self.enabled = what, total, unit, enabled
        self.done = self.first = done
        self.every, self.stream = every, stream
        self.began = self.shown = time.monotonic()

    def advance(self, count: int = 1, loss=None) -> None:
        """`count` more units done; a line if `every` seconds passed since the last."""
        self.done += count
        every = LOG_EVERY_SECONDS if self.every is None else self.every
        now = time.monotonic()
        if self.enabled and now - self.shown >= every:
            self.shown = now
            _write(self.stream, self.line(now, loss))

    def line(self, now: float, loss=None) -> str:
        elapsed, done = now - self.began, self.done - self.first
        shown = [f"{self.what}: {self.unit} {self.done}/{self.total}"]
        if self.total:
            shown[0] += f" ({100 * self.done / self.total:.0f}%)"
        if done and elapsed > 0:
            shown.append(f"{done / elapsed:.1f} {self.unit}/s")
            shown.append(f"{_duration(elapsed / done * max(self.total - self.done, 0))} left")
        if loss is not None:
            shown.append(f"loss {_number(loss)}")
        return " - ".join(shown)


_ROWS = contextvars.ContextVar("kbz_rows_progress", default=None)


@contextlib.contextmanager
def rows_counted_by(advance, rows: int | None = None):
    """Inside the block, prediction passes count their rows with `advance(rows)` (a streaming
    job's progress over its whole input) instead of lines of their own over each window.
    With `rows`, a pass counts in those input rows whatever its own row count: a tagger's
    sentence split into several windows of tokens is one row of its input."""
    token = _ROWS.set((advance, rows))
    try:
        yield
    finally:
        _ROWS.reset(token)


def rows_counter(label: str, total: int, enabled: bool = True):
    """`advance(rows)` for a prediction pass of `total` rows: the enclosing
    `rows_counted_by`'s, else plain `LogLines` named `label` where nobody watches a terminal;
    None when nothing is shown."""
    if _ROWS.get() is not None:
        advance, rows = _ROWS.get()
        return advance if rows is None or rows == total else _scaled(advance, rows, total)
    lines = LogLines(label, total, "rows", enabled=enabled and not interactive())
    return lines.advance if lines.enabled else None


def _scaled(advance, rows: int, total: int):
    """`advance` counting `rows` over a pass of `total` rows, in whole rows as they are done."""
    done = [0, 0]  # the pass's rows, the input rows counted

    def counted(count: int) -> None:
        done[0] += count
        now = done[0] * rows // max(total, 1)
        if now > done[1]:
            advance(now - done[1])
            done[1] = now

    return counted


class LoggedSteps(keras.callbacks.Callback):
    """`LogLines` of a training run's steps, with Keras' running mean of the loss; counts
    over the whole run (a resume's steps included) across `fit` calls."""

    def __init__(self, what: str, total_steps: int, start_step: int = 0):
        super().__init__()
        self.lines = LogLines(what, total_steps, "steps", done=start_step)

    def on_train_batch_end(self, batch, logs=None):
        self.lines.advance(1, (logs or {}).get("loss"))


@contextlib.contextmanager
def logged_while(what: str, enabled: bool = True, stream=None):
    """For work without a count (an export's tracing and writing): a line with the time spent
    every `LOG_EVERY_SECONDS` until the block ends, from a daemon thread."""
    done, began = threading.Event(), time.monotonic()

    def beat():
        while not done.wait(LOG_EVERY_SECONDS):
            _write(stream, f"{what}: working, {_duration(time.monotonic() - began)} so far")

    if enabled:
        threading.Thread(target=beat, daemon=True, name=f"kbz-{what}-progress").start()
    try:
        yield
    finally:
        done.set()


def _write(stream, text: str) -> None:
    stream = stream or sys.stdout  # where Keras' own progress goes
    stream.write(text + "\n")
    stream.flush()


def _number(value) -> str:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    return f"{value:.4f}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3e}"


class StepProgress(keras.callbacks.Callback):
    """`step N/M - elapsed - left - metrics`: redrawn at a terminal (`live`), and one kept
    line at the end of every checkpoint interval.

    Args:
        total_steps: the run's steps.
        start_step: where this attempt starts (a resume's checkpoint).
        live: redraw the line after each step (a terminal); else print interval lines only.
    """

    def __init__(self, total_steps: int, start_step: int = 0, live: bool = False):
        super().__init__()
        self.total, self.step, self.first = total_steps, start_step, start_step
        self.live = live
        self.began = self.drawn = None

    def _line(self, logs) -> str:
        now = time.monotonic()
        self.began = self.began or now
        elapsed, done = now - self.began, self.step - self.first
        left = elapsed / done * (self.total - self.step) if done else math.nan
        shown = [f"step {self.step}/{self.total}", f"{elapsed:.0f}s"]
        if math.isfinite(left) and self.step < self.total:
            shown.append(f"{left:.0f}s left")
        shown += [f"{key}: {_number(value)}" for key, value in (logs or {}).items()]
        return " - ".join(shown)

    def on_train_begin(self, logs=None):
        self.began = self.began or time.monotonic()

    def _show(self, text: str) -> None:
        sys.stdout.write(text)  # where Keras' own progress bar goes
        sys.stdout.flush()

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.live and (self.drawn is None or time.monotonic() - self.drawn > 0.1):
            self._show(f"\r{self._line(logs)}\x1b[K")  # redrawn, the rest of the line erased
            self.drawn = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        self._show(f"\r{self._line(logs)}\x1b[K\n" if self.live else f"{self._line(logs)}\n")


@contextlib.contextmanager
def progress_bar(total: int, what: str, runtime: str, precision: str, unit: str = "row"):
    """One line on stderr naming the runtime: at a terminal a live bar that stays, e.g.
    `embed [onnx int8]: 100%|#####| 1888/1888 [00:40<00:00, 47.0text/s]`; elsewhere (a log
    file) only its end, `embed [onnx int8]: 1888 texts in 40.2 s (47.0 text/s)`. Yields the
    `progress` callable of `bucketed_prediction.predict`."""
    description = f"{what} [{runtime} {precision}]"
    start = time.perf_counter()
    with tqdm(total=total, desc=description, unit=unit, disable=None) as bar:
        live = not bar.disable
        yield bar.update if live else rows_counter(description, total, enabled=is_chief())
    if not live:
        seconds = time.perf_counter() - start
        rate = total / max(seconds, 1e-9)
        line = f"{description}: {total} {unit}s in {seconds:.1f} s ({rate:.1f} {unit}/s)"
        tqdm.write(line, file=sys.stderr)
