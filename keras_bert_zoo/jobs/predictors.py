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
what `kbz predict` runs on a file (`tasks.<task>.task`): the same tags, scores and answers.

>>> predictor = kbz.jobs.load_predictor("runs/sst2", "classifier")
>>> [predictor.decode(p) for p in predictor(["a fine film", ("premise", "hypothesis")])]
[{'label': 'positive', 'scores': {'negative': 0.1, 'positive': 0.9}}, ...]
"""

import dataclasses
import functools
from pathlib import Path

from keras_bert_zoo.jobs.embed import embed_window, load_embedder, warn_full
from keras_bert_zoo.layers.common import check_positive_int
from keras_bert_zoo.presets.factory import from_preset
from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.presets.sources import model_source, run_sequence_length
from keras_bert_zoo.tasks import registry
from keras_bert_zoo.tasks.embedder.spec import EMBEDDER
from keras_bert_zoo.tasks.models import FINETUNING_TASKS
from keras_bert_zoo.tokenization import BertPreprocessor
from keras_bert_zoo.training import packed_prediction


@dataclasses.dataclass
class Predictor:
    """A task model, its preprocessor and how to run and decode them; see the module."""

    task: str
    network: object
    preprocessor: object
    batch_size: int = 64
    label_names: list | None = None
    named: bool = True  # the model recorded its label names (else "0", "1", ...)
    truncated: int = 0  # inputs so far that filled every token position
    full_rows: list = dataclasses.field(default_factory=list)  # those of the last call
    packing: object = packed_prediction.AUTO  # packed rows where they pay (`predict_outputs`)

    @classmethod
    def of(
        cls,
        task,
        network,
        preprocessor,
        config,
        batch_size: int = 64,
        packing=packed_prediction.AUTO,
    ) -> "Predictor":
        """The predictor of a loaded task model (`load_task_model`); a model of named labels
        (its spec's `label_count`) without recorded names gets "0", "1", ...; `packing`: a
        classifier's, reranker's or embedder's examples packed into rows
        (`training.packed_prediction.predict_outputs`)."""
        names = config.task_config.get("label_names")
        named = names is not None
        count = registry.get(task).label_count
        classes = (config.task_config.get(count) or 1) if count else 1
        if names is None and classes > 1:
            names = [str(i) for i in range(classes)]
        return cls(task, network, preprocessor, batch_size, names, named, packing=packing)

    @functools.cached_property
    def behaviour(self):
        """The task's behaviour (`tasks.models`), which reads, runs and decodes raw inputs."""
        return FINETUNING_TASKS[self.task].for_predictor(self.preprocessor, self.label_names)

    def __call__(self, inputs: list):
        if registry.get(self.task).vectors:  # as `kbz embed`
            vectors, full = embed_window(
                self.network, self.preprocessor, inputs, self.batch_size, self.packing
            )
            self.truncated += full
            return vectors
        job = self.behaviour
        dataset, x, extra, full = job.raw_arrays(inputs, self.label_names)
        self.full_rows = list(full)
        self.truncated += len(self.full_rows)
        outputs = packed_prediction.predict_outputs(
            self.network, x, self.batch_size, job.sequence_outputs, packing=self.packing
        )
        return job.raw_results(dataset, job.predict(dataset, outputs, extra))

    def decode(self, output):
        """One input's result (the module docstring lists them)."""
        return self.behaviour.decode(output, self.label_names)

    def warn_truncated(self, count: int) -> None:
        warn_full(self.truncated, count, self.preprocessor.sequence_length)


def load_predictor(
    model, task: str = EMBEDDER.name, sequence_length=None, batch_size: int = 64
) -> Predictor:
    """The `Predictor` of a preset name or directory (any preset for a task of vectors), or a
    `kbz finetune` run directory."""
    check_positive_int("batch_size", batch_size)
    if registry.get(task).vectors:
        network, preprocessor = load_embedder(model, sequence_length)
        return Predictor(task, network, preprocessor, batch_size)
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
