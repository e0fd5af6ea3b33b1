"""Checkpoint files of a resumable run: atomic writes, `state.json`, fallback on damage.

`ResumeCheckpoint` writes the weights and optimizer state (step counter, moments: so the
learning-rate schedule resumes too) to `ckpt-<interval>.weights.h5` (or, for a timed
checkpoint, `ckpt-step-<step>.weights.h5`) atomically (written beside it, flushed, renamed),
with dropout's seed-generator states beside it (so even the dropout masks continue as in an
uninterrupted run) and, for a LoRA model, its adapters (Keras' `Dense` saves an adapted
kernel merged with its adapter and zeroes the adapter on load), and only then points
`state.json` at them, so a crash at any moment leaves the previous complete checkpoint in
force. `restore` loads the newest intact one.
"""

import json
import logging
import math
import time
from pathlib import Path

import keras
import numpy as np

from keras_bert_zoo.console import status
from keras_bert_zoo.lora import base_kernels, lora_variables
from keras_bert_zoo.saving.atomic import staged_file, write_json
from keras_bert_zoo.saving.checksums import sha256_file

logger = logging.getLogger(__name__)
STATE_FILE = "state.json"


def _clock() -> float:
    """Seconds for `--checkpoint-every-minutes` (a function, so tests can fake the time)."""
    return time.monotonic()


def _seed_states(model: keras.Model) -> list:
    """Dropout's random-generator states and LoRA adapters: not (or merged) in
    `save_weights`, needed for exact resume."""
    seeds = [v for v in model.non_trainable_variables if "seed_generator_state" in v.path]
    return [*seeds, *lora_variables(model)]


def write_arrays(path, variables) -> None:
    """The values of `variables` to an `.npz` file, atomically (in order: arr_0, arr_1...)."""
    with staged_file(path) as temporary, open(temporary, "wb") as out:
        np.savez(out, *[keras.ops.convert_to_numpy(v) for v in variables])


def load_weights_file(model: keras.Model, weights, arrays, variables) -> None:
    """`model.load_weights(weights)`, then `variables` from the `arrays` `.npz` file.

    A LoRA model's frozen base kernels are kept: `Dense.load_own_variables` would leave the
    merged kernel there and the adapters at zero, so training could not go on from them.
    """
    frozen = [(v, keras.ops.convert_to_numpy(v)) for v in base_kernels(model)]
    model.load_weights(weights)
    for variable, value in frozen:
        variable.assign(value)
    if not variables:
        return
    with np.load(arrays, allow_pickle=False) as saved:
        keys = sorted(saved.files, key=lambda k: int(k.split("_")[1]))  # arr_0, arr_1, ...
        for variable, key in zip(variables, keys, strict=True):
            variable.assign(saved[key])


class ResumeCheckpoint(keras.callbacks.Callback):
    """Writes an atomic checkpoint at the end of every fit epoch (one interval), and, with
    `every_minutes`, after any step when that many minutes have passed since the last one.

    `state.json` lists the newest `keep` checkpoints, oldest first, each with the exact step
    it holds and the sha256 and size of its files, so `restore` can tell a damaged checkpoint
    and fall back to the previous one. It is written last, after the checkpoint's files are
    on disk. Interval checkpoints are `ckpt-<interval>.*`, timed ones `ckpt-step-<step>.*`.
    """

    def __init__(self, directory, keep: int = 3, step: int = 0, every_minutes=None):
        super().__init__()
        self.directory = Path(directory)
        self.keep = max(1, int(keep))
        self.step = step  # batches trained so far (the data stream's position)
        self.every_seconds = None if every_minutes is None else 60.0 * every_minutes
        self.last_save = _clock()

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.every_seconds is None or self.model.stop_training:
            return  # the interval's end (or the run's) writes its checkpoint anyway
        if (
            batch + 1 < self.params.get("steps", 0)
            and _clock() - self.last_save >= self.every_seconds
        ):
            self._save(logs, f"ckpt-step-{self.step}", None)

    def on_epoch_end(self, epoch, logs=None):
        self._save(logs, f"ckpt-{epoch + 1}", epoch + 1)

    def _save(self, logs, stem: str, interval):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(loss):
            logger.error("Loss is %s at step %d: checkpoint not written.", loss, self.step)
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        name, seeds = f"{stem}.weights.h5", f"{stem}.seeds.npz"
        try:
            with staged_file(self.directory / name) as temporary:
                self.model.save_weights(temporary, overwrite=True)
            write_arrays(self.directory / seeds, _seed_states(self.model))
        except OSError as error:  # a full disk, a lost mount: the last checkpoint still holds
            raise OSError(
                f"Could not write checkpoint {name} in {self.directory}: {error}. "
                f"{self._previous()}; free disk space, then re-run the same command "
                "to resume."
            ) from error
        entry = {
            "interval": interval,
            "step": self.step,
            "weights": name,
            "seeds": seeds,
            "files": {f: _fingerprint(self.directory / f) for f in (name, seeds)},
        }
        earlier = [e for e in _entries(self.directory) if e["step"] < self.step]
        kept = [*earlier, entry][-self.keep :]
        write_json(self.directory / STATE_FILE, {"checkpoints": kept})
        names = {f for e in kept for f in (e["weights"], e["seeds"])}
        for old in self.directory.glob("ckpt-*"):
            if old.name not in names:
                old.unlink()
        self.last_save = _clock()

    def _previous(self) -> str:
        entries = _entries(self.directory)
        if not entries:
            return "No earlier checkpoint was written"
        return f"The checkpoint of step {entries[-1].get('step', '?')} is intact"


def _fingerprint(path: Path) -> dict:
    return {"sha256": sha256_file(path), "size": path.stat().st_size}


def _entries(directory: Path) -> list:
    """The checkpoints `state.json` lists, oldest first."""
    path = Path(directory) / STATE_FILE
    if not path.is_file():
        return []
    return json.loads(path.read_text())["checkpoints"]


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


def restore(model: keras.Model, directory, total_steps: int | None = None) -> int:
    """Loads the newest intact checkpoint into `model` (and its optimizer); returns the
    steps it holds, and says so in one `console.status` line ("... of `total_steps`"). A
    damaged checkpoint (truncated, corrupted, missing) is skipped with a warning naming the
    file; its steps are then trained again."""
    directory = Path(directory)
    for stale in directory.glob(".ckpt-*"):  # a write cut short by a kill (we hold the lock)
        stale.unlink()
    for entry in reversed(_entries(directory)):
        problem = _damage(directory, entry)
        if problem:
            logger.warning(
                "Checkpoint of step %d is damaged (%s); falling back to the one before it.",
                entry["step"],
                problem,
            )
            continue
        _load(model, directory, entry)
        of = f" of {total_steps}" if total_steps else ""
        status.info(
            "Resumed from checkpoint %s at step %d%s.",
            directory / entry["weights"],
            entry["step"],
            of,
        )
        return int(entry["step"])
    return 0


def _load(model: keras.Model, directory: Path, entry: dict) -> None:
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    weights = directory / entry["weights"]
    try:
        load_weights_file(model, weights, directory / entry["seeds"], _seed_states(model))
    except ValueError as error:
        raise ValueError(
            f"Checkpoint {weights} does not fit this model ({error}). It belongs "
            "to another run: use another --output directory."
        ) from error
