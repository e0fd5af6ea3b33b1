"""Fine-tuning task graphs built on the encoder, and the one task vocabulary of the package
(public as `kbz.tasks`, which re-exports this module).

Every builder extends the encoder's graph (inputs `token_ids`, `segment_ids`,
`padding_mask`) with a small head whose outputs are float32 logits, usable with plain
`model.compile(...)` / `model.fit(...)`:

- `build_classifier`: pooled output -> dropout -> dense (the last block computed at `[CLS]`
  only: the same values for about 12% fewer multiply-adds on a 6-layer model).
  `num_classes=1` is regression, `multi_label=True` means independent sigmoid labels (the
  loss decides; outputs are logits).
- `build_tagger`: per-token logits; labels of non-first sub-words are `IGNORE_LABEL` and
  count for nothing (`tagger_loss`; `kbz finetune` divides by a fixed token count).
- `build_question_answerer`: `start_logits` / `end_logits` over the sequence, padding masked;
  train with `question_answerer_loss()` (the mean of the start and end cross-entropies).
- `build_reranker`: a cross-encoder: one relevance logit `[batch, 1]` for a (query,
  passage) pair, from the pooled output as `build_classifier`'s; train it on query groups
  through `build_group_scorer` with `listwise_loss()` (softmax cross-entropy, the relevant
  pair against its group's negatives), or on pairs with `reranker_loss()` (sigmoid
  cross-entropy on 0/1 labels, sentence-transformers' CrossEncoder).
- `build_embedder`: `[batch, hidden]` sentence vectors (mean / cls / max pooling over real
  tokens, L2-normalised by default), as sentence-transformers computes them; train it on
  (query, positive) pairs through `build_contrastive_trainer` with `in_batch_negatives_loss()`.

Each returns a `BertModel` whose `task` and `task_config` (all the builder's settings) are
part of its Keras config: `.keras` files, presets and exports read them back. New heads
start as transformers starts them (`normal(0, 0.02)`, zero bias), not as the encoder's
projections (Keras' `TruncatedNormal(0.02)`, whose standard deviation is about 0.88 x 0.02);
fine-tuning then sets a new tagger head's bias from its training tags (`TaggingTask.start_head`).
"""

import inspect

import keras

from keras_bert_zoo.encoder import first_token_pooled_output
from keras_bert_zoo.group_scoring import (  # noqa: F401
    build_contrastive_trainer,
    build_group_scorer,
    in_batch_negatives_loss,
    listwise_loss,
)
from keras_bert_zoo.layers.common import INITIALIZER_STDDEV, check_positive_int, check_rate
from keras_bert_zoo.layers.dropout import Dropout
from keras_bert_zoo.layers.heads import SpanLogits
from keras_bert_zoo.layers.pooling import SentencePooling, check_pooling
from keras_bert_zoo.model import BertModel
from keras_bert_zoo.pretraining import build_pretrainer
from keras_bert_zoo.tasks.classifier.spec import CLASSIFIER
from keras_bert_zoo.tasks.embedder.spec import EMBEDDER
from keras_bert_zoo.tasks.question_answerer.spec import QUESTION_ANSWERER
from keras_bert_zoo.tasks.reranker.spec import RERANKER
from keras_bert_zoo.tasks.tagger.spec import TAGGER

IGNORE_LABEL = -100  # label of positions that count for nothing (sub-words, [CLS], padding)


def _head(units: int, name: str, dtype=None) -> keras.layers.Dense:
    """A new task head's dense layer, initialised as transformers' `_init_weights` does."""
    initializer = keras.initializers.RandomNormal(stddev=INITIALIZER_STDDEV)
    return keras.layers.Dense(units, kernel_initializer=initializer, dtype=dtype, name=name)


def _label_names(label_names, count: int, what: str):
    if label_names is None:
        return None
    names = [str(name) for name in label_names]
    if len(names) != count:
        raise ValueError(
            f"`label_names` must name each of the {count} {what}. Received {len(names)} "
            f"names: {names[:10]}"
        )
    return names


def build_classifier(
    encoder: keras.Model,
    num_classes: int,
    dropout: float = 0.1,
    multi_label: bool = False,
    label_names=None,
    name: str = "bert_classifier",
) -> keras.Model:
    """Sentence (or sentence-pair) classifier on the pooled output; outputs logits.

    Args:
        encoder: a model from `kbz.build_encoder` / `kbz.from_preset`.
        num_classes: output units; 1 means regression.
        dropout: rate before the head.
        multi_label: independent sigmoid labels instead of one softmax class.
        label_names: optional names of the classes, kept with the model (exports return them).

    >>> model = kbz.build_classifier(encoder, num_classes=2, label_names=["neg", "pos"])
    >>> model.compile("adam", kbz.tasks.classifier_loss(2), metrics=["accuracy"])
    """
    check_positive_int("num_classes", num_classes)
    if multi_label and num_classes < 2:
        raise ValueError(
            f"`multi_label` needs num_classes >= 2. Received: num_classes={num_classes}"
        )
    config = {
        "num_classes": num_classes,
        "dropout": check_rate("dropout", dropout),
        "multi_label": bool(multi_label),
        "label_names": _label_names(label_names, num_classes, "classes"),
    }
    x = Dropout(dropout, name="classifier_dropout")(first_token_pooled_output(encoder))
    logits = _head(num_classes, "classifier_head", dtype="float32")(x)
    return BertModel(encoder.input, logits, name=name, task=CLASSIFIER.name, task_config=config)


def build_tagger(
    encoder: keras.Model,
    num_tags: int,
    dropout: float = 0.1,
    label_names=None,
    name: str = "bert_tagger",
) -> keras.Model:
    """Token tagger: `[batch, seq, num_tags]` logits; train with `tagger_loss()`.

    >>> model = kbz.build_tagger(encoder, num_tags=13)
    """
    check_positive_int("num_tags", num_tags)
    config = {
        "num_tags": num_tags,
        "dropout": check_rate("dropout", dropout),
        "label_names": _label_names(label_names, num_tags, "tags"),
    }
    x = Dropout(dropout, name="tagger_dropout")(encoder.output["sequence_output"])
    logits = _head(num_tags, "tagger_head", dtype="float32")(x)
    return BertModel(encoder.input, logits, name=name, task=TAGGER.name, task_config=config)


def build_question_answerer(
    encoder: keras.Model, name: str = "bert_question_answerer"
) -> keras.Model:
    """Extractive QA: `start_logits`, `end_logits` `[batch, seq]` (padding masked).

    >>> model = kbz.build_question_answerer(encoder)
    """
    scores = _head(2, "span_head")(encoder.output["sequence_output"])
    outputs = SpanLogits(name="span_logits")(scores, encoder.input["padding_mask"])
    outputs = {key: keras.layers.Identity(name=key)(value) for key, value in outputs.items()}
    return BertModel(encoder.input, outputs, name=name, task=QUESTION_ANSWERER.name)


def build_embedder(
    encoder: keras.Model, pooling: str = "mean", normalize: bool = True, name: str = "bert_embedder"
) -> keras.Model:
    """Sentence embeddings: `[batch, hidden]` float32 vectors pooled over the real tokens.

    Args:
        encoder: a model from `kbz.build_encoder` / `kbz.from_preset`.
        pooling: "mean" (masked mean, as sentence-transformers), "cls" or "max".
        normalize: L2-normalise the vectors (dot product = cosine similarity).

    A preset converted from a sentence-transformers directory records its pooling, so
    `kbz.from_preset(dir, task="embedder")` needs no arguments.

    >>> model = kbz.build_embedder(encoder, pooling="mean", normalize=True)
    >>> vectors = model(kbz.BertPreprocessor.from_preset("my_preset")(["A sentence."]))
    """
    config = {"pooling": check_pooling(pooling), "normalize": normalize}
    pooled = SentencePooling(pooling, normalize, name="sentence_pooling")(
        encoder.output["sequence_output"], encoder.input["padding_mask"]
    )
    embeddings = keras.layers.Identity(name="embeddings", dtype="float32")(pooled)
    return BertModel(encoder.input, embeddings, name=name, task=EMBEDDER.name, task_config=config)


def build_reranker(
    encoder: keras.Model, dropout: float = 0.1, name: str = "bert_reranker"
) -> keras.Model:
    """Cross-encoder: `[batch, 1]` relevance logits of (query, passage) pairs, as
    sentence-transformers' `CrossEncoder` (`BertForSequenceClassification`, one label).

    >>> model = kbz.build_reranker(encoder)
    >>> logits = model(pre((["a query"], ["a passage"])))
    """
    config = {"dropout": check_rate("dropout", dropout)}
    x = Dropout(dropout, name="reranker_dropout")(first_token_pooled_output(encoder))
    logits = _head(1, "reranker_head", dtype="float32")(x)
    return BertModel(encoder.input, logits, name=name, task=RERANKER.name, task_config=config)


def reranker_loss() -> keras.losses.Loss:
    """Sigmoid cross-entropy of a pair's logit and its 0/1 label (CrossEncoder's
    `BCEWithLogitsLoss` for one label), the mean over the batch: the pointwise loss."""
    return keras.losses.BinaryCrossentropy(from_logits=True)


def classifier_loss(num_classes: int, multi_label: bool = False) -> keras.losses.Loss:
    """MSE for regression (`num_classes=1`), sigmoid BCE for multi-label, else softmax CE."""
    if num_classes == 1:
        return keras.losses.MeanSquaredError()
    if multi_label:
        return keras.losses.BinaryCrossentropy(from_logits=True)
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class TokenCrossentropy(keras.losses.Loss):
    """Token cross-entropy summed over each sequence's labelled tokens, divided by a constant:
    `labelled_per_sequence`, the training set's mean count. A batch's loss is then its
    labelled tokens' sum over `batch x labelled_per_sequence`, so every token weighs the same
    whichever batch it lands in, as in random batches; a per-batch mean would weigh the tokens
    of batches of short sentences (length bucketing) more, each batch counting once."""

    def __init__(self, labelled_per_sequence: float, name="token_crossentropy", **kwargs):
        super().__init__(name=name, **kwargs)
        if not labelled_per_sequence > 0:
            raise ValueError(
                "`labelled_per_sequence` must be positive. "
                f"Received: labelled_per_sequence={labelled_per_sequence!r}"
            )
        self.labelled_per_sequence = float(labelled_per_sequence)

    def call(self, y_true, y_pred):
        labels = keras.ops.cast(y_true, "int32")
        labelled = keras.ops.not_equal(labels, IGNORE_LABEL)
        # log-softmax and a gather, not TensorFlow's fused op: that op adds a shape assertion
        # which XLA drops with a log line per compile; the values are the same
        picked = keras.ops.expand_dims(keras.ops.where(labelled, labels, 0), -1)
        log_probabilities = keras.ops.log_softmax(y_pred, axis=-1)
        losses = -keras.ops.take_along_axis(log_probabilities, picked, axis=-1)[..., 0]
        losses = keras.ops.where(labelled, losses, 0.0)
        return keras.ops.sum(losses, axis=-1) / self.labelled_per_sequence

    def get_config(self):
        return {**super().get_config(), "labelled_per_sequence": self.labelled_per_sequence}


def tagger_loss(labelled_per_sequence: float | None = None) -> keras.losses.Loss:
    """Token cross-entropy that ignores `IGNORE_LABEL` positions: by default the mean over
    the batch's labelled tokens (transformers'); with `labelled_per_sequence` (the training
    set's mean), `TokenCrossentropy`, which length-bucketed batches need to weigh tokens alike.

    >>> model.compile("adam", kbz.tasks.tagger_loss(labelled_per_sequence=14.5))
    """
    if labelled_per_sequence is not None:
        return TokenCrossentropy(labelled_per_sequence)
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORE_LABEL)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SpanLoss(keras.losses.SparseCategoricalCrossentropy):
    """Softmax cross-entropy of a start (or end) position, halved: Keras sums a model's
    losses, so start and end add up to their mean, the loss of transformers'
    `BertForQuestionAnswering` and google-research/bert's `run_squad.py`."""

    def call(self, y_true, y_pred):
        return 0.5 * super().call(y_true, y_pred)


def question_answerer_loss() -> dict:
    """`{"start_logits": ..., "end_logits": ...}` losses whose sum is the mean of the two
    cross-entropies (with the plain sum, twice that, global-norm clipping cuts more steps).

    >>> model.compile("adam", kbz.tasks.question_answerer_loss())
    """
    return {key: SpanLoss(from_logits=True) for key in ("start_logits", "end_logits")}


def _encoder_task(encoder, **task_kwargs):
    if task_kwargs:
        raise ValueError(f"task='encoder' takes no task arguments. Received: {task_kwargs}")
    return encoder


TASKS = {
    "encoder": _encoder_task,
    "pretrainer": build_pretrainer,
    CLASSIFIER.name: build_classifier,
    TAGGER.name: build_tagger,
    QUESTION_ANSWERER.name: build_question_answerer,
    EMBEDDER.name: build_embedder,
    RERANKER.name: build_reranker,
}


def check_task(task: str) -> str:
    """Returns `task` if it is one of `TASKS`, else an error listing them."""
    if task not in TASKS:
        raise ValueError(f"Unknown task {task!r}. Expected one of {sorted(TASKS)}.")
    return task


def build_task(task: str, encoder, **task_kwargs):
    """Returns `encoder` itself for "encoder", else the named task model built on it.

    >>> model = kbz.tasks.build_task("classifier", encoder, num_classes=3)
    """
    builder = TASKS[check_task(task)]
    try:
        inspect.signature(builder).bind(encoder, **task_kwargs)
    except TypeError as error:
        raise ValueError(
            f"Bad arguments for task '{task}': {error}. Received: {task_kwargs}"
        ) from error
    return builder(encoder, **task_kwargs)
