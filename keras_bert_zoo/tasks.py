"""Fine-tuning task models built on the encoder, and the `from_preset(task=...)` registry.

Every builder extends the encoder's graph (inputs `token_ids`, `segment_ids`,
`padding_mask`) with a small head whose outputs are float32 logits, usable with plain
`model.compile(...)` / `model.fit(...)`:

- `build_classifier`: pooled output -> dropout -> dense. `num_classes=1` is regression,
  `multi_label=True` means independent sigmoid labels (the loss decides; outputs are logits).
- `build_tagger`: per-token logits; labels of non-first sub-words are `IGNORE_LABEL` and
  count for nothing (`tagger_loss`).
- `build_question_answerer`: `start_logits` / `end_logits` over the sequence, padding masked.

Each records `model.kbz_task = (task, config)` so `save_preset` writes the head back.
"""

import inspect

import keras
from keras import ops

from keras_bert_zoo.layers.dropout import Dropout
from keras_bert_zoo.layers.embeddings import INITIALIZER_STDDEV
from keras_bert_zoo.layers.encoder_block import MASK_BIAS
from keras_bert_zoo.model import BertModel

IGNORE_LABEL = -100  # label of positions that count for nothing (sub-words, [CLS], padding)


def _dense(units, name, dtype="float32"):
    return keras.layers.Dense(
        units, kernel_initializer=keras.initializers.TruncatedNormal(stddev=INITIALIZER_STDDEV),
        dtype=dtype, name=name)


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}")


def build_classifier(encoder: keras.Model, num_classes: int, dropout: float = 0.1,
                     multi_label: bool = False, name: str = "bert_classifier") -> keras.Model:
    """Sentence (or sentence-pair) classifier on the pooled output; outputs logits.

    >>> model = kbz.build_classifier(encoder, num_classes=2)
    >>> model.compile("adam", kbz.tasks.classifier_loss(2), metrics=["accuracy"])
    """
    _check_positive("num_classes", num_classes)
    x = Dropout(dropout, name="classifier_dropout")(
        encoder.output["pooled_output"])
    logits = _dense(num_classes, "classifier_head")(x)
    model = BertModel(encoder.input, logits, name=name)
    model.kbz_task = ("classifier", {"num_classes": num_classes, "dropout": dropout,
                                     "multi_label": multi_label})
    return model


def build_tagger(encoder: keras.Model, num_tags: int, dropout: float = 0.1,
                 name: str = "bert_tagger") -> keras.Model:
    """Token tagger: `[batch, seq, num_tags]` logits; train with `tagger_loss()`.

    >>> model = kbz.build_tagger(encoder, num_tags=13)
    """
    _check_positive("num_tags", num_tags)
    x = Dropout(dropout, name="tagger_dropout")(encoder.output["sequence_output"])
    logits = _dense(num_tags, "tagger_head")(x)
    model = BertModel(encoder.input, logits, name=name)
    model.kbz_task = ("tagger", {"num_tags": num_tags, "dropout": dropout})
    return model


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SpanLogits(keras.layers.Layer):
    """`[batch, seq, 2]` span scores -> start and end logits, padding positions masked out."""

    def __init__(self, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)

    def call(self, scores, padding_mask):
        bias = (1.0 - ops.cast(padding_mask, "float32")) * MASK_BIAS
        scores = ops.cast(scores, "float32")
        return {"start_logits": scores[..., 0] + bias, "end_logits": scores[..., 1] + bias}

    def compute_output_shape(self, scores_shape, padding_mask_shape):
        return {"start_logits": scores_shape[:2], "end_logits": scores_shape[:2]}

    def get_config(self):
        config = super().get_config()
        config.pop("dtype", None)
        return config


def build_question_answerer(encoder: keras.Model,
                            name: str = "bert_question_answerer") -> keras.Model:
    """Extractive QA: `start_logits`, `end_logits` `[batch, seq]` (padding masked).

    >>> model = kbz.build_question_answerer(encoder)
    """
    scores = _dense(2, "span_head")(encoder.output["sequence_output"])
    outputs = SpanLogits(name="span_logits")(scores, encoder.input["padding_mask"])
    outputs = {key: keras.layers.Identity(name=key)(value) for key, value in outputs.items()}
    model = BertModel(encoder.input, outputs, name=name)
    model.kbz_task = ("question_answerer", {})
    return model


def classifier_loss(num_classes: int, multi_label: bool = False) -> keras.losses.Loss:
    """MSE for regression (`num_classes=1`), sigmoid BCE for multi-label, else softmax CE."""
    if num_classes == 1:
        return keras.losses.MeanSquaredError()
    if multi_label:
        return keras.losses.BinaryCrossentropy(from_logits=True)
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def tagger_loss() -> keras.losses.Loss:
    """Token cross-entropy that ignores `IGNORE_LABEL` positions."""
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                      ignore_class=IGNORE_LABEL)


def _encoder_task(encoder, **task_kwargs):
    if task_kwargs:
        raise ValueError(f"task='encoder' takes no task arguments. Received: {task_kwargs}")
    encoder.kbz_task = ("encoder", {})
    return encoder


def _pretrainer_task(encoder, **task_kwargs):
    from keras_bert_zoo.pretraining import build_pretrainer

    model = build_pretrainer(encoder, **task_kwargs)
    model.kbz_task = ("pretrainer", {"max_predictions": model.input["mask_positions"].shape[1]})
    return model


TASKS = {
    "encoder": _encoder_task,
    "pretrainer": _pretrainer_task,
    "classifier": build_classifier,
    "tagger": build_tagger,
    "question_answerer": build_question_answerer,
}


def build_task(task: str, encoder, **task_kwargs):
    """Returns `encoder` itself for "encoder", else the named task model built on it."""
    if task not in TASKS:
        raise ValueError(f"Unknown task '{task}'. Expected one of {sorted(TASKS)}.")
    builder = TASKS[task]
    if task not in ("encoder", "pretrainer"):
        try:
            inspect.signature(builder).bind(encoder, **task_kwargs)
        except TypeError as error:
            raise ValueError(f"Bad arguments for task '{task}': {error}. Received: "
                             f"{task_kwargs}") from error
    return builder(encoder, **task_kwargs)
