"""Exact resume for `model.fit` runs: atomic checkpoints at fixed step intervals.

A run of `total_steps` is driven as `fit` "epochs" of `steps_per_checkpoint` steps over an
endless, seeded (so reproducible) dataset. After each interval `ResumeCheckpoint` writes
the weights and optimizer state (step counter, moments: so the learning-rate schedule
resumes too) to `ckpt-<interval>.weights.h5` through a temporary file, and only then points
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
import os
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.atomic import write_json

logger = logging.getLogger(__name__)
STATE_FILE = "state.json"


def _seed_states(model: keras.Model) -> list:
    """Dropout's random-generator states: not in `save_weights`, needed for exact resume."""
    return [v for v in model.non_trainable_variables if "seed_generator_state" in v.path]


class ResumeCheckpoint(keras.callbacks.Callback):
    """Writes an atomic checkpoint at the end of every fit epoch (one interval)."""

    def __init__(self, directory):
        super().__init__()
        self.directory = Path(directory)

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(loss):
            logger.error("Loss is %s at interval %d: checkpoint not written.", loss, epoch + 1)
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        name, seeds = f"ckpt-{epoch + 1}.weights.h5", f"ckpt-{epoch + 1}.seeds.npz"
        temporary = self.directory / f".tmp-{name}"
        self.model.save_weights(temporary, overwrite=True)
        os.replace(temporary, self.directory / name)
        with open(self.directory / f".tmp-{seeds}", "wb") as handle:
            np.savez(handle, *[v.numpy() for v in _seed_states(self.model)])
        os.replace(self.directory / f".tmp-{seeds}", self.directory / seeds)
        write_json(self.directory / STATE_FILE,
                    {"interval": epoch + 1, "weights": name, "seeds": seeds})
        for old in self.directory.glob("ckpt-*"):
            if old.name not in (name, seeds):
                old.unlink()


def restore(model: keras.Model, directory) -> int:
    """Loads the latest checkpoint into `model` (and its optimizer); returns intervals done."""
    state_path = Path(directory) / STATE_FILE
    if not state_path.is_file():
        return 0
    state = json.loads(state_path.read_text())
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    weights = Path(directory) / state["weights"]
    try:
        model.load_weights(weights)
    except ValueError as error:
        raise ValueError(f"Checkpoint {weights} does not fit this model ({error}). It belongs "
                         "to another run: use another --output directory.") from error
    with np.load(Path(directory) / state["seeds"], allow_pickle=False) as saved:
        keys = sorted(saved.files, key=lambda k: int(k.split("_")[1]))  # arr_0, arr_1, ...
        for variable, key in zip(_seed_states(model), keys, strict=True):
            variable.assign(saved[key])
    logger.info("Resumed from %s (interval %d).", weights, state["interval"])
    return int(state["interval"])


def fit_resumable(model: keras.Model, dataset, total_steps: int, steps_per_checkpoint: int,
                  directory, callbacks=(), verbose: int = 1, strategy=None,
                  jit_compile: bool = False):
    """`model.fit` over an endless seeded `dataset` for `total_steps`, resuming if possible.

    Args:
        dataset: a `tf.data.Dataset` that repeats forever in a reproducible order.
        total_steps: optimizer steps of the whole run; must be a multiple of
            `steps_per_checkpoint`.
        directory: where checkpoints live (the same for every attempt of the run).
        strategy: a non-default `tf.distribute` strategy trains with
            `distributed.StrategyTrainer` (XLA per replica when `jit_compile`), since
            `model.fit` fails there; otherwise `model.fit` (compiled as the model was).

    >>> history = fit_resumable(model, dataset, 1000, 100, "out/checkpoints")
    """
    if steps_per_checkpoint < 1 or total_steps % steps_per_checkpoint:
        raise ValueError(
            f"The checkpoint interval must divide the number of steps. Received: "
            f"total_steps={total_steps}, steps_per_checkpoint={steps_per_checkpoint}.")
    intervals = total_steps // steps_per_checkpoint
    done = restore(model, directory)
    if done >= intervals:
        logger.info("The run in %s is already complete.", directory)
    arguments = dict(epochs=intervals, initial_epoch=done, steps_per_epoch=steps_per_checkpoint,
                     verbose=verbose, callbacks=[ResumeCheckpoint(directory),
                                                 keras.callbacks.TerminateOnNaN(), *callbacks])
    remaining = dataset.skip(done * steps_per_checkpoint)
    if strategy is not None and strategy is not tf.distribute.get_strategy():
        from keras_bert_zoo.distributed import StrategyTrainer

        history = StrategyTrainer(model, strategy, jit_compile).fit(remaining, **arguments)
    else:
        history = model.fit(remaining, shuffle=False, **arguments)
    losses = history.history.get("loss", [])
    if losses and not all(math.isfinite(v) for v in losses):
        raise ValueError(
            f"Training stopped: the loss became {losses[-1]} (NaN or Inf). The last good "
            f"checkpoint is kept in {directory}; lower the learning rate or use float32 / "
            "mixed_bfloat16 precision, then re-run the same command to resume from it.")
    return history
