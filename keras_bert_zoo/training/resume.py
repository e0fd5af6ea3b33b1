"""Exact resume for `model.fit` runs: checkpoints at step intervals and, optionally, in time.

A run of `total_steps` is driven as `fit` "epochs" of `steps_per_checkpoint` steps over an
endless, seeded (so reproducible) stream of batches; when the interval does not divide the
run, the last interval is shorter, so exactly `total_steps` steps are trained. A checkpoint
(`checkpoint_files.ResumeCheckpoint`) is written after each interval, and with
`checkpoint_every_minutes` also after any step once that many minutes have passed.
`fit_resumable` restores the newest intact one, positions the data at its step (a stream
callable `start_step -> dataset` starts there at once; a plain dataset skips the batches
already seen) and goes on: the same command after a kill ends with the weights of an
uninterrupted run, and says so in one line (`console.status`). A NaN or Inf loss stops the
run (`TerminateOnNaN`) without overwriting the last good checkpoint.
"""

import contextlib
import itertools
import logging
import math

import keras

from keras_bert_zoo.training.checkpoint_files import STATE_FILE, ResumeCheckpoint, restore
from keras_bert_zoo.training.distributed import StrategyTrainer, uses_tf_distribute
from keras_bert_zoo.training.processes import broadcast
from keras_bert_zoo.training.progress import LoggedSteps, StepProgress, fit_verbose

__all__ = ["STATE_FILE", "ResumeCheckpoint", "fit_resumable", "interval_sizes", "restore"]
logger = logging.getLogger(__name__)


class StopAfterSteps(keras.callbacks.Callback):
    """Ends training after `steps` batches: the shorter last interval of a run."""

    def __init__(self, steps: int):
        super().__init__()
        self.steps, self.seen = steps, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen >= self.steps:
            self.model.stop_training = True


def interval_sizes(total_steps: int, steps_per_checkpoint: int, what: str = "the run") -> list:
    """Steps of each checkpoint interval: whole intervals, then a shorter last one if needed.

    >>> interval_sizes(10, 4)
    [4, 4, 2]
    """
    if total_steps < 1 or steps_per_checkpoint < 1:
        raise ValueError(
            f"Steps and checkpoint interval must be positive. Received: "
            f"{total_steps} steps, a checkpoint every {steps_per_checkpoint}."
        )
    if steps_per_checkpoint > total_steps:
        raise ValueError(
            f"The checkpoint interval ({steps_per_checkpoint} steps) is longer than {what} "
            f"({total_steps} steps), so no checkpoint would ever be written. Pass "
            f"--checkpoint-every {total_steps} or less (or leave it out for the default)."
        )
    whole, rest = divmod(total_steps, steps_per_checkpoint)
    return [steps_per_checkpoint] * whole + ([rest] if rest else [])


def check_minutes(every_minutes) -> None:
    """`--checkpoint-every-minutes`: None (off) or a positive number."""
    if every_minutes is None:
        return
    if isinstance(every_minutes, bool) or not (
        isinstance(every_minutes, int | float)
        and math.isfinite(every_minutes)
        and every_minutes > 0
    ):
        raise ValueError(
            "--checkpoint-every-minutes must be a positive number of minutes. "
            f"Received: {every_minutes!r}."
        )


def _fit_calls(sizes: list, start: int) -> list:
    """`(initial_epoch, epochs, steps_per_epoch, first_step, steps)` of the `fit` calls that
    train steps `start`.. of a run: a resume inside an interval (a timed checkpoint) first
    finishes that interval, so the later ones end where an uninterrupted run's do."""
    ends = list(itertools.accumulate(sizes))
    done = sum(end <= start for end in ends)
    calls = []
    if done < len(sizes) and start > (ends[done - 1] if done else 0):
        calls.append((done, done + 1, ends[done] - start, start, ends[done] - start))
        start, done = ends[done], done + 1
    if done < len(sizes):
        calls.append((done, len(sizes), sizes[0], start, ends[-1] - start))
    return calls


def fit_resumable(
    model: keras.Model,
    dataset,
    total_steps: int,
    steps_per_checkpoint: int,
    directory,
    callbacks=(),
    verbose="auto",
    strategy=None,
    jit_compile: bool = False,
    keep_checkpoints: int = 3,
    checkpoint_every_minutes=None,
    progress: str = "epochs",
):
    """`model.fit` over an endless seeded `dataset` for `total_steps`, resuming if possible.

    Args:
        dataset: a `tf.data.Dataset` that repeats forever in a reproducible order (resume
            skips the batches already trained on), or a callable `start_step -> dataset` (or
            an iterator of numpy batches: `training.batching.numpy_stream`) that returns
            the same stream already positioned at `start_step` (resume then costs the same
            at any step).
        total_steps: optimizer steps of the whole run (batches, with gradient accumulation).
        steps_per_checkpoint: steps between checkpoints; the last interval is shorter when
            it does not divide `total_steps`, and longer than the run is an error.
        directory: where checkpoints live (the same for every attempt of the run).
        strategy: a non-default `tf.distribute` strategy trains with
            `distributed.StrategyTrainer` (XLA per replica when `jit_compile`), since
            `model.fit` fails there; otherwise `model.fit` (compiled as the model was),
            inside the scope of a `keras.distribution` one (`processes.data_parallel`).
        checkpoint_every_minutes: also checkpoint after the first step that ends this many
            minutes after the previous checkpoint (or the start of this attempt).
        verbose: Keras' fit verbosity; "auto" is a live bar at a terminal, otherwise one
            plain line per interval (`progress.fit_verbose`) and one at least every
            `progress.LOG_EVERY_SECONDS` (`progress.LoggedSteps`).
        progress: "epochs" (Keras' own display: intervals are epochs) or "steps" (the run's
            steps, `progress.StepProgress`: intervals are checkpoint intervals).

    >>> history = fit_resumable(model, dataset, 1000, 100, "out/checkpoints")
    """
    check_minutes(checkpoint_every_minutes)
    sizes = interval_sizes(total_steps, steps_per_checkpoint)
    laid_out = isinstance(strategy, keras.distribution.DataParallel)  # Keras' (on JAX)
    # Its scope lays out the optimizer's slots (built by a restore) and batches on its devices.
    scope = strategy.scope if laid_out else contextlib.nullcontext
    with scope():
        start = _restore(model, directory, total_steps)
    if start >= total_steps:
        logger.info("The run in %s is already complete.", directory)
    checkpoint = ResumeCheckpoint(directory, keep_checkpoints, start, checkpoint_every_minutes)
    verbose, shown = fit_verbose(verbose), []
    if verbose == 2:  # a log: a line at least every LOG_EVERY_SECONDS, not only per interval
        shown = [LoggedSteps("training", total_steps, start)]
    if progress == "steps" and verbose:
        shown.append(StepProgress(total_steps, start, live=verbose == 1))
        verbose = 0
    merged = keras.callbacks.History()
    merged.history = {}
    for initial_epoch, epochs, steps_per_epoch, first, steps in _fit_calls(sizes, start):
        arguments = dict(
            epochs=epochs,
            initial_epoch=initial_epoch,
            steps_per_epoch=steps_per_epoch,
            verbose=verbose,
            callbacks=[
                StopAfterSteps(steps),
                *callbacks,  # before the checkpoint: what they record is then saved with it
                *shown,  # after them: it shows what they add to the logs
                checkpoint,
                keras.callbacks.TerminateOnNaN(),
            ],
        )
        remaining = dataset(first) if callable(dataset) else dataset.skip(first)
        if not laid_out and uses_tf_distribute(strategy):
            history = StrategyTrainer(model, strategy, jit_compile).fit(remaining, **arguments)
        else:
            with scope():
                history = model.fit(remaining, shuffle=False, **arguments)
        for key, values in history.history.items():
            merged.history.setdefault(key, []).extend(values)
        losses = history.history.get("loss", [])
        if losses and not all(math.isfinite(v) for v in losses):
            raise ValueError(
                f"Training stopped: the loss became {losses[-1]} (NaN or Inf). The last good "
                f"checkpoint is kept in {directory}; lower the learning rate or use float32 / "
                "mixed_bfloat16 precision, then re-run the same command to resume from it."
            )
    return merged


def _restore(model: keras.Model, directory, total_steps: int) -> int:
    """`restore`; the processes of a multi-process run must resume from the same step."""
    start = restore(model, directory, total_steps)
    agreed = broadcast(start)
    if start != agreed:
        raise ValueError(
            f"This process found a checkpoint of step {start} in {directory}, process 0 one "
            f"of step {agreed}: every process of --strategy data-parallel must see the same "
            "--output directory (a shared filesystem)."
        )
    return start
