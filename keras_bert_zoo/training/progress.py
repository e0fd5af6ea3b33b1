"""What a run shows while it trains: a live bar at a terminal, plain lines in a log file.

Keras' progress bar redraws itself with ANSI colour codes and carriage returns on every POSIX
system, terminal or not, which fills a redirected log with control characters; its
`verbose=2` prints one plain line per epoch instead (`fit_verbose`). Runs whose fit "epochs"
are checkpoint intervals (pretraining, `--checkpoint-every`) count steps instead of
"Epoch 1/3": `StepProgress` shows `step 2000/10000` over the whole run, a resume included.
"""

import math
import sys
import time

import keras


def interactive() -> bool:
    """Whether standard output is a terminal (where a redrawn bar makes sense)."""
    return hasattr(sys.stdout, "isatty") and sys.stdout.isatty()


def fit_verbose(verbose):
    """Keras' `verbose` for fit: "auto" is a live bar (1) at a terminal, else one line per
    epoch (2)."""
    if verbose == "auto":
        return 1 if interactive() else 2
    return verbose


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
