"""Raw inputs to decoded outputs, one list at a time: what the streaming jobs and the Apache
Beam handler (`keras_bert_zoo.beam`) both call, so neither holds a copy of the other's
plumbing.

`load_predictor(model, task)` gives a `Predictor`: `predictor(inputs)` returns the outputs of
a list of raw inputs, row-aligned (sorted by length and bucketed inside,
`training.bucketed_prediction`), and `predictor.decode(output)` one input's result in plain
Python. Inputs and results per task:

- embedder: a text -> a float32 vector;
- classifier: a text or a `(text, text)` pair -> `{"label", "scores"}` (`{"score"}` for a
  regression);
- tagger: a text (split at whitespace) or a list of words -> `{"words", "tags"}`;
- reranker: a `(query, passage)` pair -> `{"score"}` (the relevance logit);
- question_answerer: `{"question", "context"}` -> `{"answer", "nbest"}` (SQuAD windows and
  decoding as `kbz predict qa`).

The tagger, reranker and question answerer build their task's dataset of the inputs and run
what `kbz predict` runs on a file (`finetuning`): the same tags, scores and answers.

>>> predictor = kbz.jobs.load_predictor("runs/sst2", "classifier")
>>> [predictor.decode(p) for p in predictor(["a fine film", ("premise", "hypothesis")])]
[{'label': 'positive', 'scores': {'negative': 0.1, 'positive': 0.9}}, ...]
"""

import dataclasses
from pathlib import Path

import numpy as np

from keras_bert_zoo import data
from keras_bert_zoo.finetuning.classifier import ClassificationTask
from keras_bert_zoo.finetuning.registry import FINETUNING_TASKS
from keras_bert_zoo.finetuning.truncation import full_rows
from keras_bert_zoo.jobs.embed import embed_window, load_embedder, warn_full
from keras_bert_zoo.layers.common import check_positive_int
from keras_bert_zoo.presets.factory import from_preset
from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.presets.sources import model_source, run_sequence_length
from keras_bert_zoo.tokenization import BertPreprocessor
from keras_bert_zoo.tokenization.arrays import packed_arrays
from keras_bert_zoo.training import bucketed_prediction

PREDICTOR_TASKS = ("embedder", "classifier", "tagger", "reranker", "question_answerer")
_SOURCE = "<inputs>"  # the "file" named by warnings about inputs given in memory


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
        task_config = config.task_config
        classes = task_config.get("num_classes") or task_config.get("num_tags") or 1
        if task in ("classifier", "tagger") and names is None and classes > 1:
            names = [str(i) for i in range(classes)]
        return cls(task, network, preprocessor, batch_size, names)

    def __call__(self, inputs: list):
        if self.task == "embedder":
            vectors, full = embed_window(self.network, self.preprocessor, inputs, self.batch_size)
            self.truncated += full
            return vectors
        if self.task == "classifier":
            return self._classify(inputs)
        job = FINETUNING_TASKS[self.task](self.preprocessor)
        dataset = _dataset(self.task, inputs, self.label_names)
        x, _, extra = job.arrays(dataset)
        length = self.preprocessor.sequence_length
        buckets = bucketed_prediction.prediction_buckets(self.network, length)
        outputs = bucketed_prediction.predict(
            self.network, x, self.batch_size, buckets, job.sequence_outputs
        )
        predictions = job.predict(dataset, outputs, extra)
        if self.task == "tagger":
            return [(s.words, tags) for s, tags in zip(dataset.sentences, predictions, strict=True)]
        if self.task == "question_answerer":
            return [
                (predictions["answers"][e.qas_id], predictions["nbest"][e.qas_id]) for e in dataset
            ]
        return predictions

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
        """One input's result (the module docstring lists them)."""
        if self.task == "embedder":
            return np.asarray(output, np.float32)
        if self.task == "tagger":
            return {"words": list(output[0]), "tags": list(output[1])}
        if self.task == "question_answerer":
            return {"answer": output[0], "nbest": output[1]}
        if self.task == "reranker" or self.label_names is None:
            return {"score": float(output)}
        scores = {name: float(p) for name, p in zip(self.label_names, output, strict=True)}
        return {"label": self.label_names[int(np.argmax(output))], "scores": scores}

    def warn_truncated(self, count: int) -> None:
        warn_full(self.truncated, count, self.preprocessor.sequence_length)


def _dataset(task: str, inputs: list, names):
    """The task's dataset of raw inputs, as its reader would give for a file of them."""
    if task == "tagger":
        sentences = [
            data.TaggedSentence(i.split() if isinstance(i, str) else list(i), [], n)
            for n, i in enumerate(inputs, 1)
        ]
        return data.TaggingData(_SOURCE, sentences, list(names), [])
    if task == "reranker":
        pairs = [data.RankingPair(str(q), str(p), None, n) for n, (q, p) in enumerate(inputs, 1)]
        return data.RankingData(_SOURCE, pairs)
    return [  # question_answerer
        data.SquadExample(str(n), i["question"], i["context"], (), labelled=False)
        for n, i in enumerate(inputs)
    ]


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


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def load_task_model(
    model, task: str, sequence_length=None, jit_compile: bool = True, build: bool = True
):
    """`(network, preprocessor, preset config, run settings)` of a fine-tuned `task` model: a
    run directory (its settings are the defaults) or a preset directory saved from one;
    `build=False` leaves the Keras network out (None: another runtime runs the model)."""
    preset, settings = _model_source(model)
    config = load_preset_config(preset)
    if config.task != task:
        raise ValueError(
            f"--model {model} holds {_a(config.task)} model, not {_a(task)}. Predict "
            "with the task it was fine-tuned for."
        )
    length = run_sequence_length(preset, sequence_length, settings)
    preprocessor = BertPreprocessor.from_preset(preset, sequence_length=length)
    if not build:
        return None, preprocessor, config, settings
    network = from_preset(preset, task=task)
    network.compile(jit_compile=jit_compile)
    return network, preprocessor, config, settings
