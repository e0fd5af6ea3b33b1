"""Validation during fine-tuning: after every checkpoint interval (an epoch by default).

`ValidationCallback` computes the task's metrics on the validation set, adds them (as
`val_<name>`) and the learning rate to the epoch's logs, so the progress line and
TensorBoard show them, and keeps the weights of the best interval so far. Its history, best
weights (and the untrained model's metrics, `validate_before`) live beside the checkpoints,
written atomically before the interval's checkpoint, so a resumed run keeps them.
"""

import json
import logging
from pathlib import Path

import keras

from keras_bert_zoo.lora import lora_variables
from keras_bert_zoo.saving.atomic import staged_file, write_json
from keras_bert_zoo.training.checkpoint_files import load_weights_file, write_arrays

logger = logging.getLogger(__name__)
HISTORY_FILE = "validation.json"
BEST_WEIGHTS = "best.weights.h5"
BEST_ADAPTERS = "best.lora.npz"  # a LoRA model's adapters (save_weights merges them)
# The metric that decides "best" for each task's metrics (higher is better).
MAIN_METRIC = {"mrr": 5, "mrr_at_10": 4, "accuracy": 3, "pearson": 2, "f1": 1}  # preferred first


def main_metric(results: dict) -> str:
    """`accuracy` for classification, `pearson` for regression, `f1` for tagging and QA,
    `mrr_at_10` for reranking, `mrr` for an embedder's retrieval."""
    present = [name for name in MAIN_METRIC if name in results]
    return max(present, key=MAIN_METRIC.get) if present else ""


class ValidationCallback(keras.callbacks.Callback):
    """Evaluates `evaluate(model) -> metrics` at the end of every fit epoch (interval).

    Args:
        evaluate: returns the validation metrics of the model as it is now (`self.epoch`
            tells which interval, counted from 1).
        directory: where the history and the best weights are kept (the checkpoints').
        last_epoch: the run's final interval: a new best there writes no weights file, since
            the model and the run's final checkpoint hold those weights.
    """

    def __init__(self, evaluate, directory, last_epoch: int | None = None):
        super().__init__()
        self.evaluate = evaluate
        self.directory = Path(directory)
        self.last_epoch = last_epoch
        self.epoch = None
        self.history = self._read_history()

    def _read_history(self) -> list:
        path = self.directory / HISTORY_FILE
        stored = json.loads(path.read_text()) if path.is_file() else {}
        self.saved_epoch = stored.get("best_weights_epoch")
        self.before = stored.get("before")
        return stored.get("history", [])

    def _write_history(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        record = {"history": self.history, "best_weights_epoch": self.saved_epoch}
        write_json(
            self.directory / HISTORY_FILE,
            record if self.before is None else {**record, "before": self.before},
        )

    def validate_before(self, model) -> dict:
        """The metrics of `model` before training, computed once per run (a resumed run
        reads them back: its weights are no longer the untrained ones)."""
        if self.before is None:
            results = self.evaluate(model)
            self.before = {key: float(value) for key, value in results.items()}
            self._write_history()
        return self.before

    @property
    def best(self) -> dict | None:
        """The history entry of the best interval so far (None before any)."""
        metric = main_metric(self.history[0]) if self.history else ""
        return max(self.history, key=lambda e: e[metric], default=None) if metric else None

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        self.epoch = epoch + 1
        results = {key: float(value) for key, value in self.evaluate(self.model).items()}
        optimizer = self.model.optimizer
        rate = optimizer.learning_rate
        if callable(rate):
            rate = rate(optimizer.iterations)
        logs.update({f"val_{key}": value for key, value in results.items()})
        logs["learning_rate"] = float(keras.ops.convert_to_numpy(rate))
        self.history = [e for e in self.history if e["epoch"] < epoch + 1]
        self.history.append({"epoch": epoch + 1, **results})
        best = self.best
        final = epoch + 1 == self.last_epoch
        if best is not None and best["epoch"] == epoch + 1 and not final:  # its weights first
            self.directory.mkdir(parents=True, exist_ok=True)
            if lora_variables(self.model):
                write_arrays(self.directory / BEST_ADAPTERS, lora_variables(self.model))
            with staged_file(self.directory / BEST_WEIGHTS) as temporary:
                self.model.save_weights(temporary, overwrite=True)
            self.saved_epoch = epoch + 1
        self._write_history()

    def restore_best(self) -> dict | None:
        """Loads the best interval's weights into the model; returns its history entry."""
        best = self.best
        if best is None or best["epoch"] == self.history[-1]["epoch"]:
            return best  # the model holds them already
        if self.saved_epoch != best["epoch"] or not (self.directory / BEST_WEIGHTS).is_file():
            logger.warning(
                "The weights of the best epoch (%d) were lost with a damaged "
                "checkpoint; keeping the last epoch's.",
                best["epoch"],
            )
            return self.history[-1]
        load_weights_file(
            self.model,
            self.directory / BEST_WEIGHTS,
            self.directory / BEST_ADAPTERS,
            lora_variables(self.model),
        )
        logger.info("Kept the weights of epoch %d (%s).", best["epoch"], best)
        return best
