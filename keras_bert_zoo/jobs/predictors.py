"""Raw inputs to decoded outputs, one list at a time: what the streaming jobs and the Apache
Beam handler (`keras_bert_zoo.beam`) both call, so neither holds a copy of the other's
plumbing.

`load_predictor(model, task)` gives a `Predictor`: `predictor(inputs)` returns the outputs of
a list of raw inputs, row-aligned (sorted by length and bucketed inside,
`training.bucketed_prediction`), and `predictor.decode(output)` one input's result in plain
Python: an embedder's vector, a classifier's label and scores.

>>> predictor = kbz.jobs.load_predictor("runs/sst2", "classifier")
>>> [predictor.decode(p) for p in predictor(["a fine film", ("premise", "hypothesis")])]
[{'label': 'positive', 'scores': {'negative': 0.1, 'positive': 0.9}}, ...]
"""

import dataclasses
from pathlib import Path

import numpy as np

from keras_bert_zoo.finetuning.classifier import ClassificationTask
from keras_bert_zoo.finetuning.truncation import full_rows
from keras_bert_zoo.jobs.embed import embed_window, load_embedder, warn_full
from keras_bert_zoo.layers.common import check_positive_int
from keras_bert_zoo.presets.factory import from_preset
from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.presets.sources import model_source
from keras_bert_zoo.tokenization import BertPreprocessor
from keras_bert_zoo.tokenization.arrays import packed_arrays
from keras_bert_zoo.training import bucketed_prediction

PREDICTOR_TASKS = ("embedder", "classifier")


@dataclasses.dataclass
class Predictor:
    """A task model, its preprocessor and how to run and decode them; see the module."""

    task: str
    network: object
    preprocessor: object
    batch_size: int = 64
    label_names: list | None = None
    truncated: int = 0  # inputs so far that filled every token position
    full_rows: list = dataclasses.field(default_factory=list)  # those of the last call

    @classmethod
    def of(cls, task, network, preprocessor, config, batch_size: int = 64) -> "Predictor":
        """The predictor of a loaded task model (`load_task_model`); a classifier without
        recorded class names gets "0", "1", ..."""
        names = config.task_config.get("label_names")
        classes = config.task_config.get("num_classes", 1)
        if task == "classifier" and names is None and classes > 1:
            names = [str(i) for i in range(classes)]
        return cls(task, network, preprocessor, batch_size, names)

    def __call__(self, inputs: list):
        if self.task == "embedder":
            vectors, full = embed_window(self.network, self.preprocessor, inputs, self.batch_size)
            self.truncated += full
            return vectors
        return self._classify(inputs)

    def _classify(self, inputs: list) -> np.ndarray:
        """Class probabilities (or a regression's score) of texts or `(text, text)` pairs."""
        pairs = [tuple(i) if isinstance(i, (tuple, list)) else (i,) for i in inputs]
        if len({len(p) for p in pairs}) > 1:
            raise ValueError("Pass texts or (text, text) pairs to a classifier, not a mix.")
        second = [p[1] for p in pairs] if pairs and len(pairs[0]) == 2 else None
        x = packed_arrays(self.preprocessor, [p[0] for p in pairs], second)
        self.full_rows = list(full_rows(x["padding_mask"]))
        self.truncated += len(self.full_rows)
        length = self.preprocessor.sequence_length
        buckets = bucketed_prediction.prediction_buckets(self.network, length)
        logits = bucketed_prediction.predict(self.network, x, self.batch_size, buckets, False)
        task = ClassificationTask(self.preprocessor, regression=self.label_names is None)
        return task.predict(None, logits, None)

    def decode(self, output):
        """One input's result: a float32 vector, `{"label", "scores"}`, or `{"score"}`."""
        if self.task == "embedder":
            return np.asarray(output, np.float32)
        if self.label_names is None:
            return {"score": float(output)}
        scores = {name: float(p) for name, p in zip(self.label_names, output, strict=True)}
        return {"label": self.label_names[int(np.argmax(output))], "scores": scores}

    def warn_truncated(self, count: int) -> None:
        warn_full(self.truncated, count, self.preprocessor.sequence_length)


def load_predictor(
    model, task: str = "embedder", sequence_length=None, batch_size: int = 64
) -> Predictor:
    """The `Predictor` of a preset name or directory, or a `kbz finetune` run directory."""
    check_positive_int("batch_size", batch_size)
    if task == "embedder":
        network, preprocessor = load_embedder(model, sequence_length)
        return Predictor(task, network, preprocessor, batch_size)
    if task not in PREDICTOR_TASKS:
        raise ValueError(f"Unknown task {task!r}. Expected one of {list(PREDICTOR_TASKS)}.")
    return Predictor.of(task, *load_task_model(model, task, sequence_length)[:3], batch_size)


def _model_source(model) -> tuple[Path, dict]:
    """(preset directory, the run's settings) of a run directory or a preset directory."""
    path = Path(model)
    if not path.is_dir():
        raise ValueError(
            f"--model {model} is not a directory. Pass a `kbz finetune` output "
            "directory or a preset directory saved from a fine-tuned model."
        )
    return model_source(path)


def load_task_model(model, task: str, sequence_length=None, jit_compile: bool = True):
    """`(network, preprocessor, preset config, run settings)` of a fine-tuned `task` model: a
    run directory (its settings are the defaults) or a preset directory saved from one."""
    preset, settings = _model_source(model)
    config = load_preset_config(preset)
    if config.task != task:
        raise ValueError(
            f"--model {model} holds a {config.task} model, not a {task}. Predict "
            "with the task it was fine-tuned for."
        )
    length = sequence_length or settings.get("sequence_length") or config.sequence_length or 128
    preprocessor = BertPreprocessor.from_preset(preset, sequence_length=length)
    network = from_preset(preset, task=task)
    network.compile(jit_compile=jit_compile)
    return network, preprocessor, config, settings
