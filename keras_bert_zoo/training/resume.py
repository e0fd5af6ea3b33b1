"""Exact resume for `model.fit` runs: atomic checkpoints at fixed step intervals.

A run of `total_steps` is driven as `fit` "epochs" of `steps_per_checkpoint` steps over an
endless, seeded (so reproducible) dataset; when the interval does not divide the run, the
last interval is shorter, so exactly `total_steps` steps are trained. After each interval
`ResumeCheckpoint` writes the weights and optimizer state (step counter, moments: so the
learning-rate schedule resumes too) to `ckpt-<interval>.weights.h5` atomically (written
beside it, flushed, renamed), and only then points
`state.json` at it (with dropout's seed-generator states, so even the dropout masks
continue as in an uninterrupted run), so a crash at any moment leaves the previous complete
checkpoint in force. `fit_resumable` restores the latest one, skips the batches already
seen, and goes on: the same command after a kill ends with the weights of an uninterrupted
run. A NaN or Inf loss stops the run (`TerminateOnNaN`) without overwriting the last good
checkpoint.
"""

import json
import logging
import math
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.saving.atomic import staged_file, write_json
from keras_bert_zoo.saving.checksums import sha256_file
from keras_bert_zoo.training.distributed import StrategyTrainer

logger = logging.getLogger(__name__)
STATE_FILE = "state.json"


def _seed_states(model: keras.Model) -> list:
    """Dropout's random-generator states: not in `save_weights`, needed for exact resume."""
    return [v for v in model.non_trainable_variables if "seed_generator_state" in v.path]


class ResumeCheckpoint(keras.callbacks.Callback):
    """Writes an atomic checkpoint at the end of every fit epoch (one interval).

    `state.json` lists the newest `keep` checkpoints, oldest first, each with the sha256 and
    size of its files, so `restore` can tell a damaged checkpoint and fall back to the
    previous one. It is written last, after the checkpoint's files are on disk.
    """

    def __init__(self, directory, keep: int = 3):
        super().__init__()
        self.directory = Path(directory)
        self.keep = max(1, int(keep))

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(loss):
            logger.error("Loss is %s at interval %d: checkpoint not written.", loss, epoch + 1)
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        name, seeds = f"ckpt-{epoch + 1}.weights.h5", f"ckpt-{epoch + 1}.seeds.npz"
        try:
            with staged_file(self.directory / name) as temporary:
                self.model.save_weights(temporary, overwrite=True)
            with staged_file(self.directory / seeds) as temporary, open(temporary, "wb") as out:
                np.savez(out, *[v.numpy() for v in _seed_states(self.model)])
        except OSError as error:  # a full disk, a lost mount: the last checkpoint still holds
            raise OSError(
                f"Could not write checkpoint {name} in {self.directory}: {error}. "
                f"{self._previous()}; free disk space, then re-run the same command "
                "to resume."
            ) from error
        entry = {
            "interval": epoch + 1,
            "step": int(self.model.optimizer.iterations),
            "weights": name,
            "seeds": seeds,
            "files": {f: _fingerprint(self.directory / f) for f in (name, seeds)},
        }
        earlier = [e for e in _entries(self.directory) if e["interval"] < epoch + 1]
        kept = [*earlier, entry][-self.keep :]
        write_json(self.directory / STATE_FILE, {"checkpoints": kept})
        names = {f for e in kept for f in (e["weights"], e["seeds"])}
        for old in self.directory.glob("ckpt-*"):
            if old.name not in names:
                old.unlink()

    def _previous(self) -> str:
        entries = _entries(self.directory)
        if not entries:
            return "No earlier checkpoint was written"
        return f"The checkpoint of step {entries[-1].get('step', '?')} is intact"


def _fingerprint(path: Path) -> dict:
    return {"sha256": sha256_file(path), "size": path.stat().st_size}


def _entries(directory: Path) -> list:
    """The checkpoints `state.json` lists, oldest first (also the one-entry older format)."""
    path = Path(directory) / STATE_FILE
    if not path.is_file():
        return []
    state = json.loads(path.read_text())
    return state["checkpoints"] if "checkpoints" in state else [state]


def _damage(directory: Path, entry: dict) -> str | None:
    """Why the files of `entry` cannot be trusted, or None if they are intact."""
    for name in (entry["weights"], entry["seeds"]):
        path = directory / name
        expected = entry.get("files", {}).get(name)
        if not path.is_file():
            return f"{path} is missing"
        if expected and path.stat().st_size != expected["size"]:
            return f"{path} has {path.stat().st_size} bytes, not {expected['size']}"
        if expected and sha256_file(path) != expected["sha256"]:
            return f"{path} does not match its sha256 in {STATE_FILE}"
    return None


class StopAfterSteps(keras.callbacks.Callback):
    """Ends training after `steps` batches: the shorter last interval of a run."""

    def __init__(self, steps: int):
        super().__init__()
        self.steps, self.seen = steps, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen >= self.steps:
            self.model.stop_training = True


def restore(model: keras.Model, directory) -> int:
    """Loads the newest intact checkpoint into `model` (and its optimizer); returns the
    intervals done. A damaged checkpoint (truncated, corrupted, missing) is skipped with a
    warning naming the file; its interval is then trained again."""
    directory = Path(directory)
    for entry in reversed(_entries(directory)):
        problem = _damage(directory, entry)
        if problem:
            logger.warning(
                "Checkpoint of interval %d is damaged (%s); falling back to the one before it.",
                entry["interval"],
                problem,
            )
            continue
        _load(model, directory, entry)
        logger.info("Resumed from %s (interval %d).", entry["weights"], entry["interval"])
        return int(entry["interval"])
    return 0


def _load(model: keras.Model, directory: Path, entry: dict) -> None:
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    weights = directory / entry["weights"]
    try:
        model.load_weights(weights)
    except ValueError as error:
        raise ValueError(
            f"Checkpoint {weights} does not fit this model ({error}). It belongs "
            "to another run: use another --output directory."
        ) from error
    with np.load(directory / entry["seeds"], allow_pickle=False) as saved:
        keys = sorted(saved.files, key=lambda k: int(k.split("_")[1]))  # arr_0, arr_1, ...
        for variable, key in zip(_seed_states(model), keys, strict=True):
            variable.assign(saved[key])


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


def fit_resumable(
    model: keras.Model,
    dataset,
    total_steps: int,
    steps_per_checkpoint: int,
    directory,
    callbacks=(),
    verbose: int = 1,
    strategy=None,
    jit_compile: bool = False,
    keep_checkpoints: int = 3,
):
    """`model.fit` over an endless seeded `dataset` for `total_steps`, resuming if possible.

    Args:
        dataset: a `tf.data.Dataset` that repeats forever in a reproducible order (resume
            skips the batches already trained on), or a callable `start_step -> dataset`
            that returns the same stream already positioned at `start_step` (resume then
            costs the same at any step).
        total_steps: optimizer steps of the whole run (batches, with gradient accumulation).
        steps_per_checkpoint: steps between checkpoints; the last interval is shorter when
            it does not divide `total_steps`, and longer than the run is an error.
        directory: where checkpoints live (the same for every attempt of the run).
        strategy: a non-default `tf.distribute` strategy trains with
            `distributed.StrategyTrainer` (XLA per replica when `jit_compile`), since
            `model.fit` fails there; otherwise `model.fit` (compiled as the model was).

    >>> history = fit_resumable(model, dataset, 1000, 100, "out/checkpoints")
    """
    sizes = interval_sizes(total_steps, steps_per_checkpoint)
    done = restore(model, directory)
    if done >= len(sizes):
        logger.info("The run in %s is already complete.", directory)
    start = sum(sizes[:done])
    arguments = dict(
        epochs=len(sizes),
        initial_epoch=done,
        steps_per_epoch=steps_per_checkpoint,
        verbose=verbose,
        callbacks=[
            StopAfterSteps(total_steps - start),
            *callbacks,  # before the checkpoint: what they record is then saved with it
            ResumeCheckpoint(directory, keep_checkpoints),
            keras.callbacks.TerminateOnNaN(),
        ],
    )
    remaining = dataset(start) if callable(dataset) else dataset.skip(start)
    if strategy is not None and strategy is not tf.distribute.get_strategy():
        history = StrategyTrainer(model, strategy, jit_compile).fit(remaining, **arguments)
    else:
        history = model.fit(remaining, shuffle=False, **arguments)
    losses = history.history.get("loss", [])
    if losses and not all(math.isfinite(v) for v in losses):
        raise ValueError(
            f"Training stopped: the loss became {losses[-1]} (NaN or Inf). The last good "
            f"checkpoint is kept in {directory}; lower the learning rate or use float32 / "
            "mixed_bfloat16 precision, then re-run the same command to resume from it."
        )
    return history
