"""`TaskModel`: a task's Keras model with its preprocessing attached, trained on raw data.

keras-hub's pattern (the task is the model), with what `kbz finetune` adds: each task model
(`BertClassifier`, `BertTagger`, `BertQuestionAnswerer`, `BertEmbedder`, `BertReranker`) is
a `BertModel` holding its `preprocessor`, so `fit`, `evaluate` and `predict` take raw data
(texts, word lists, question/context dicts) on every backend, and `save` / `kbz.load_model`
keep the preprocessor, the label names and the task's options. Raw data goes through the
task's behaviour (`tasks.<task>.task`: tokenization, label alignment, SQuAD windows, decoding),
the same object `kbz finetune` uses, and trains on the same length-bucketed batches
(`training.batching`) with the same defaults (AdamW on warmup + linear decay, clip 1.0, the
task's learning rate, batch size and epochs from its spec). Pre-tokenized dicts of
`token_ids` / `segment_ids` / `padding_mask` still work as on any Keras model.

`compile()` needs no arguments: what is left "auto" is filled in by `fit` from its data (the
schedule's step count comes from the data, `epochs` and `batch_size`). A user's own
optimizer, loss or metrics win.

>>> classifier = kbz.BertClassifier.from_preset("bert_tiny_en_uncased", num_classes=2)
>>> classifier.fit(x=["a great film", "a dull film"], y=[1, 0], batch_size=2)
>>> classifier.classify(["what a film"])
"""

import dataclasses

import keras

from keras_bert_zoo.encoder import architecture_of, build_encoder, find_encoder
from keras_bert_zoo.finetuning.packed_training import use_packing
from keras_bert_zoo.finetuning.raw_data import split_stream
from keras_bert_zoo.finetuning.task_inference import TaskInference
from keras_bert_zoo.finetuning.task_training import (
    AUTO,
    TaskValidation,
    compile_task_model,
    training_batches,
)
from keras_bert_zoo.model import BertModel
from keras_bert_zoo.presets import factory
from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.presets.sources import model_source, run_sequence_length
from keras_bert_zoo.runtimes import DEFAULT_PRECISION, DEFAULT_RUNTIME
from keras_bert_zoo.task_graphs import build_task
from keras_bert_zoo.tokenization import BertPreprocessor


class TaskModel(TaskInference, BertModel):
    """The base of the task models; a subclass names its `task_name` (a `kbz.tasks` builder)
    and `behaviour` (its `FinetuningTask`), and adds its decoding method.

    Args:
        encoder: an encoder (`kbz.build_encoder`, `kbz.from_preset(..., task="encoder")`),
            or a task model of this task built by `kbz.from_preset(..., task=...)`.
        preprocessor: a `kbz.BertPreprocessor`; needed for raw data.
        **kwargs: the task builder's arguments (`num_classes`, `dropout`, ...) and the
            task's options (`doc_stride`, ...; its spec's `TaskOption`s).
    """

    task_name = None
    behaviour = None

    def __init__(self, encoder, preprocessor=None, name=None, **kwargs):
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in self.option_names()}
        kwargs = self.task_kwargs(**kwargs)
        if getattr(encoder, "task", None) == self.task_name:
            graph = encoder
        else:
            graph = build_task(self.task_name, find_encoder(encoder), **kwargs)
        super().__init__(
            inputs=graph.input,
            outputs=graph.output,
            task=graph.task,
            task_config=graph.task_config,
            name=name or graph.name,
        )
        if preprocessor is not None and not isinstance(preprocessor, BertPreprocessor):
            raise ValueError(
                "`preprocessor` must be a kbz.BertPreprocessor. Received: "
                f"{type(preprocessor).__name__}."
            )
        self.preset_config = getattr(graph, "preset_config", None)  # save_preset's vocabulary
        self.preprocessor = preprocessor
        self.options = options
        self._compile_request = None
        self._user_compiled = False  # `compile` with an optimizer and a loss: used as given
        self.runtime, self.precision = DEFAULT_RUNTIME, DEFAULT_PRECISION  # `use_runtime`

    @classmethod
    def option_names(cls) -> tuple:
        """The task's options: its behaviour's settings besides the preprocessor."""
        fields = dataclasses.fields(cls.behaviour)
        return tuple(f.name for f in fields if f.name != "preprocessor")

    @classmethod
    def task_kwargs(cls, **kwargs) -> dict:
        """The builder's arguments from the user's (a subclass maps its own names)."""
        return kwargs

    @classmethod
    def from_preset(cls, preset, sequence_length=None, load_weights=True, dtype=None, **kwargs):
        """The task model of a preset name or directory, or a `kbz finetune` run directory.

        A preset fine-tuned for this task gives its trained head and settings back; another
        preset gets a new head (`kwargs`: the builder's arguments, such as `num_classes`).
        `sequence_length`: tokens per sequence; default: the run's, else the preset's
        recorded length, else the task's default (`kbz finetune`'s).
        """
        source, settings = model_source(preset)
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in cls.option_names()}
        options = {**{k: settings[k] for k in cls.option_names() if k in settings}, **options}
        graph = factory.from_preset(
            source,
            task=cls.task_name,
            load_weights=load_weights,
            dtype=dtype,
            **cls.task_kwargs(**kwargs),
        )
        config = load_preset_config(source)
        default = cls.behaviour.spec.defaults["sequence_length"]
        length = run_sequence_length(source, sequence_length, settings, default)
        length = min(length, config.architecture["max_sequence_length"])
        preprocessor = BertPreprocessor.from_preset(source, sequence_length=length)
        return cls(graph, preprocessor, **options)

    def get_config(self):
        preprocessor = self.preprocessor
        return {
            "name": self.name,
            "architecture": architecture_of(find_encoder(self)),
            "task_config": dict(self.task_config),
            "preprocessor": None
            if preprocessor is None
            else keras.saving.serialize_keras_object(preprocessor),
            **self.options,
        }

    def get_compile_config(self):
        """None: a reloaded task model is compiled again by `compile()` or `fit` (its "auto"
        optimizer needs the next run's step count)."""
        return None

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        preprocessor = config.pop("preprocessor", None)
        if isinstance(preprocessor, dict):
            preprocessor = keras.saving.deserialize_keras_object(preprocessor)
        encoder = build_encoder(**config.pop("architecture"))
        return cls(encoder, preprocessor, **config.pop("task_config"), **config)

    # --- the behaviour and the data -------------------------------------------------------

    def job(self):
        """The task's behaviour (`FinetuningTask`) with this model's preprocessor."""
        if self.preprocessor is None:
            raise ValueError(
                f"{type(self).__name__} has no preprocessor, so it cannot take raw data. Build "
                f"it with {type(self).__name__}.from_preset(...), or pass "
                "preprocessor=kbz.BertPreprocessor.from_preset(...)."
            )
        return self.behaviour(self.preprocessor, **self.behaviour_options())

    def behaviour_options(self) -> dict:
        return dict(self.options)

    def raw_data(self, x, y=None):
        """Raw `x` (and `y`) as the task's dataset (`finetuning.raw_data`)."""
        raise NotImplementedError

    def labelled(self, dataset) -> bool:
        return True

    # --- compile / fit / evaluate / predict ------------------------------------------------

    def compile(
        self,
        optimizer=AUTO,
        loss=AUTO,
        metrics=None,
        jit_compile=AUTO,
        learning_rate=None,
        warmup_fraction=None,
        weight_decay=None,
        **kwargs,
    ):
        """Keras' `compile`, where "auto" takes the task's defaults as `kbz finetune` does:
        AdamW (epsilon 1e-6; weight decay `weight_decay`, BERT's 0.01 by default, except on
        LayerNorm and biases; global clip 1.0) on a warmup + linear-decay schedule peaking at
        `learning_rate` (the task's default), the task's loss, XLA except on PyTorch. The
        schedule needs the run's step count, so an "auto" optimizer or loss is made by `fit`
        from its data."""
        self._compile_request = dict(
            optimizer=optimizer,
            loss=loss,
            metrics=metrics,
            jit_compile=jit_compile,
            learning_rate=learning_rate,
            warmup_fraction=warmup_fraction,
            weight_decay=weight_decay,
            **kwargs,
        )
        self._user_compiled = optimizer != AUTO and loss != AUTO
        if self._user_compiled:
            compile_task_model(self, self, None, None)

    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        epochs=None,
        verbose="auto",
        callbacks=None,
        validation_data=None,
        seed=0,
        bucketing=True,
        packing=AUTO,
        **kwargs,
    ):
        """Keras' `fit`; on raw data (see the task's class) also: `batch_size` and `epochs`
        default to the task's (`kbz finetune`'s), batches of similar length trimmed to a few
        lengths (`bucketing`), drawn in an order fixed by `seed`; `validation_data` (raw `(x,
        y)`) is evaluated after each epoch with the task's metrics (`val_<metric>` in the
        logs). Each `fit` with an "auto" optimizer runs its own warmup and decay.
        `packing` (True, False, "auto"): train on rows of `sequence_length` tokens holding
        several examples each (`finetuning.packed_training`; the classifier, the tagger, the
        embedder, the reranker), so padding costs almost nothing; "auto" packs where the task
        packs by default (not the reranker) and `bucketing` is on. The logs then hold each
        epoch's `padding_fraction`."""
        x, y, raw = split_stream(x, y)
        if not raw:
            if not self.compiled:
                raise ValueError(
                    f"{type(self).__name__}.fit on tokenized inputs needs `compile(optimizer=..., "
                    "loss=...)` first: the task's default schedule and loss are made from raw "
                    "data (texts). Pass raw data, or compile with your optimizer and loss."
                )
            return super().fit(
                x, y, batch_size=batch_size, epochs=epochs or 1, verbose=verbose,
                callbacks=callbacks, validation_data=validation_data, **kwargs,
            )  # fmt: skip
        job = self.job()
        packed = use_packing(job, packing, bucketing)  # a task that cannot pack: stops here
        dataset = self.raw_data(x, y)
        if not self.labelled(dataset):
            raise ValueError(f"{type(self).__name__}.fit needs `y`: the targets of `x`.")
        job.check_training(dataset)
        defaults = self.behaviour.spec.defaults
        batch_size = batch_size or defaults["batch_size"]
        epochs = epochs or defaults["epochs"]
        trained, schedule, stream, added = training_batches(
            job, self, dataset, batch_size, epochs, bucketing, packed, seed
        )
        callbacks = [*added, *(callbacks or [])]
        if trained is not self or not self._user_compiled:  # else the user's own, as given
            compile_task_model(self, trained, dataset, epochs * schedule.steps_per_epoch, packed)
        if validation_data is not None:
            callbacks.insert(0, TaskValidation(self, *validation_data))
        fit = super().fit if trained is self else trained.fit
        return fit(  # the schedule's batches are shuffled already (by `seed`)
            stream, epochs=epochs, steps_per_epoch=schedule.steps_per_epoch, verbose=verbose,
            callbacks=callbacks, shuffle=False, **kwargs,
        )  # fmt: skip

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", **kwargs):
        """Keras' `evaluate`; on raw data the task's metrics as `kbz finetune` reports them
        (accuracy and F1, entity F1, SQuAD exact match and F1, retrieval or ranking scores),
        a dict."""
        x, y, raw = split_stream(x, y)
        if not raw:
            return super().evaluate(x, y, batch_size=batch_size, verbose=verbose, **kwargs)
        job = self.job()
        dataset = self.raw_data(x, y)
        return self.scores(job, dataset, job.arrays(dataset), batch_size)

    def scores(self, job, dataset, arrays, batch_size=None) -> dict:
        """The task's metrics of `dataset`, given its `job.arrays` (tokenized once by the
        validation callback, which scores the same data after every epoch)."""
        inputs, _, extra = arrays
        outputs = self.predict_arrays(inputs, batch_size)
        return {k: float(v) for k, v in job.evaluate(dataset, outputs, extra, warn=False).items()}

    def predict(self, x, batch_size=None, verbose="auto", packing=AUTO, **kwargs):
        """Keras' `predict`; raw data is tokenized, and predicted in length buckets, or a
        classifier's, reranker's or embedder's on packed rows (`packing`, `predict_arrays`):
        the model's outputs (logits; the embedder's vectors) in the order of `x`."""
        x, _, raw = split_stream(x, None)
        if not raw:
            return super().predict(x, batch_size=batch_size, verbose=verbose, **kwargs)
        return self.predict_arrays(self.predict_inputs(x), batch_size, packing)
