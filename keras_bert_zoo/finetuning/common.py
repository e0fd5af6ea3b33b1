"""What every fine-tuning task's behaviour shares: the `FinetuningTask` protocol and batched
tokenization.

A task's behaviour turns reader output (`keras_bert_zoo.data`) into arrays the task model
takes (`arrays`), model outputs into predictions (`predict`), predictions into the task's
metrics (`metrics`, `keras_bert_zoo.metrics`) and prediction files (`write_predictions`), as
the `Task` classes of TF Model Garden's `official/nlp/tasks` do; its names, defaults and flags
are its spec (`keras_bert_zoo.tasks.spec`). The tokenizer runs in batches over all texts (or
unique words) at once, never once per string.
"""

import logging
from pathlib import Path

from keras_bert_zoo.tokenization.arrays import token_lists as batched  # any backend
from keras_bert_zoo.training import batching, bucket_choice

logger = logging.getLogger(__name__)
RAW_SOURCE = "<inputs>"  # the "file" named by warnings about inputs given in memory

__all__ = ["FinetuningTask", "batched", "specials"]


class FinetuningTask:
    """The behaviour of a fine-tuning task; subclasses are dataclasses whose first field is
    the preprocessor and whose other fields are their spec's `TaskOption`s.

    `spec`: the task's `TaskSpec`; `sequence_outputs`: whether the model's outputs have a
    sequence axis that length bucketing (`training.batching`) trims with the batch;
    `validates_before`: the run also validates the untrained model (`report`'s "before");
    `packs`: it can train on packed rows (`packed_training_model`, `--packing`);
    `packs_by_default`: "auto" packs it (where packed rows train it faster).
    """

    spec = None
    sequence_outputs = False
    validates_before = False
    packs = False  # trains on packed rows (`packed_training_model`) where asked
    packs_by_default = True  # where `packs`: `--packing` "auto" packs it

    def read(self, path, label_names=None, labels_optional=False):
        """The file's examples; `labels_optional`: a file without labels (to predict) reads."""
        raise NotImplementedError

    def check_training(self, dataset) -> None:
        """Stops with a clear error on training data the task cannot learn from (raises
        `ValueError`); the file readers call it on `--train`, the task models on `fit`'s."""

    def arrays(self, dataset):
        """`(model inputs, targets, extra)`; `extra` is what `predict` needs besides outputs."""
        raise NotImplementedError

    def training_arrays(self, dataset, seed: int):
        """`(inputs, targets)` to train on: `arrays`' by default. A task may train on other
        rows than it predicts (listwise reranking: query groups `[groups, group_size, seq]`,
        drawn with `seed`); its `training_model` takes them."""
        x, y, _ = self.arrays(dataset)
        return x, y

    def training_group_size(self) -> int:
        """Examples (what `--batch-size` counts) per row of `training_arrays`: 1 or a
        group's size."""
        return 1

    def training_rows(self, batch_size: int) -> int:
        """Rows of `training_arrays` per batch of `batch_size` examples; an error naming the
        flags if a batch would split a group."""
        return batch_size

    def training_schedule(self, dataset, lengths, rows: int, sequence_length: int, epochs: int,
                          bucketing: bool, seed: int):  # fmt: skip
        """The batches of `training_arrays(dataset)`' rows, step by step
        (`batching.BatchSchedule`'s interface): by default batches of similar length, trimmed
        to lengths chosen from `lengths`, in an order drawn from `seed` each epoch."""
        buckets = bucket_choice.training_buckets(lengths, rows, sequence_length, epochs, bucketing)
        logger.info("Training batches trimmed to the lengths %s.", buckets)
        return batching.BatchSchedule(lengths, rows, buckets, seed)

    def training_model(self, model):
        """The model `fit` trains: the task model itself, or a wrapper around it that takes
        `training_arrays` (sharing its weights, so the task model is what gets saved)."""
        return model

    def packed_training_model(self, model):
        """The model `fit` trains on packed rows (`finetuning.packed_training`), sharing
        `model`'s weights; only where `packs`."""
        raise NotImplementedError

    def start_head(self, model, y) -> None:
        """Sets a new head of `model` from the training targets `y` before the first step
        (the tagger's bias); by default the head keeps its draw."""

    def label_names(self, dataset):
        return None

    def task_kwargs(self, dataset):
        """The builder's arguments the training data decides (`num_classes`, ...)."""
        return {}

    def loss(self, dataset):
        """The Keras loss (or `{output: loss}`) of the task model on this training data."""
        raise NotImplementedError

    def predict(self, dataset, outputs, extra):
        """Model outputs -> the task's predictions (what `metrics` and the file take)."""
        raise NotImplementedError

    def metrics(self, dataset, predictions, warn=True):
        """The task's metrics ({} for unlabelled data); `warn`: log degenerate predictions."""
        raise NotImplementedError

    def write_predictions(self, dataset, predictions, path):
        """Writes the prediction file(s) (`spec.prediction_file`); returns their paths."""
        raise NotImplementedError

    @staticmethod
    def prediction_paths(path) -> list:
        """Every file `write_predictions(..., path)` writes: `path` and its side files."""
        return [Path(path)]

    def report(self, train, validation, results: dict, run: dict) -> tuple[dict, dict]:
        """`(returned, written)`: what the run returns (and `run.json` keeps) and what its
        `metrics.json` holds, from the kept weights' `results` and the `run`'s record
        (`kept_epoch`, `history`, `steps`, and `before` with `validates_before`): by default
        the results, and in the file also the kept epoch and the history."""
        return results, {**results, "kept_epoch": run["kept_epoch"], "history": run["history"]}

    # Raw inputs given in memory, a list at a time (`jobs.predictors`, Beam, streaming).
    @classmethod
    def for_predictor(cls, preprocessor, label_names):
        """The behaviour that decodes a loaded model's outputs, given its label names."""
        return cls(preprocessor)

    def raw_arrays(self, inputs: list, label_names):
        """`(dataset, model inputs, extra, full rows)` of raw inputs: their dataset
        (`raw_dataset`) and its arrays; `full rows`: the inputs that fill every token
        position, where the task reports them."""
        dataset = self.raw_dataset(inputs, label_names)
        x, _, extra = self.arrays(dataset)
        return dataset, x, extra, []

    def raw_dataset(self, inputs: list, label_names):
        """The task's dataset of raw inputs, as its reader gives for a file of them."""
        raise NotImplementedError

    def raw_results(self, dataset, predictions) -> list:
        """One result per raw input, from `predict`'s predictions."""
        return predictions

    def decode(self, output, label_names):
        """One input's result in plain Python: by default its score."""
        return {"score": float(output)}

    def evaluate(self, dataset, outputs, extra, warn=True):
        return self.metrics(dataset, self.predict(dataset, outputs, extra), warn)

    # `kbz predict` on a file, a window at a time (where `spec.streams`; `inference.outputs`).
    def streams(self, predictor, input) -> bool:
        """Whether `kbz predict` streams `input` with `predictor` (else reads it whole)."""
        return False

    def stream_predictions(self, predictor, input, output, window, restart, identity):
        """`(prediction files, metrics)` of `input`, written at `output` a window of rows at a
        time and resumed after a kill (`restart`: begin again); `identity`: what determines
        the output besides the file (model, settings), which a resume must match."""
        raise NotImplementedError


def specials(tokenizer):
    return dict(
        cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id, pad_id=tokenizer.pad_token_id
    )
