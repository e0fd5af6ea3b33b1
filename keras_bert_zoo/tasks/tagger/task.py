"""The tagger: `BertTagger` (the task model) and its behaviour, CoNLL token tagging, labels
on each word's first sub-word (`TAGGER`)."""

import dataclasses

import keras
import numpy as np

from keras_bert_zoo import data, metrics
from keras_bert_zoo.finetuning.common import RAW_SOURCE, FinetuningTask, batched, specials
from keras_bert_zoo.finetuning.prediction_files import warn_if_all_outside, write_conll
from keras_bert_zoo.finetuning.raw_data import tagging_data
from keras_bert_zoo.finetuning.task_model import TaskModel
from keras_bert_zoo.finetuning.truncation import warn_truncated
from keras_bert_zoo.packed_encoder import build_packed_tagger
from keras_bert_zoo.task_graphs import tagger_loss
from keras_bert_zoo.tasks.tagger import stream as streaming
from keras_bert_zoo.tasks.tagger.spec import TAGGER


def prior_bias(labels, num_tags: int) -> np.ndarray:
    """The add-one smoothed log frequency of each of `num_tags` tags among the labelled
    positions of `labels` (token labels; `IGNORE_LABEL` positions count for nothing)."""
    labels = np.asarray(labels)
    counts = np.bincount(labels[labels >= 0].ravel(), minlength=num_tags)
    return np.log((counts + 1) / (counts.sum() + num_tags))


@dataclasses.dataclass
class TaggingTask(FinetuningTask):
    """CoNLL token tagging; labels on the first sub-word of each word."""

    preprocessor: object
    head_bias: str = TAGGER.default("head_bias")
    spec = TAGGER
    sequence_outputs = True  # labels and logits per token: trimmed with the batch
    packs = True  # each token is read where it is: packed rows train it

    def read(self, path, label_names=None, labels_optional=False):
        """The CoNLL file; with `labels_optional`, a words-only file (text to tag) reads too."""
        return data.read_conll(path, tag_names=label_names, labels_optional=labels_optional)

    def arrays(self, dataset):
        x, labels, word_index, lengths = self.encode(dataset)
        length = self.preprocessor.sequence_length
        warn_truncated(dataset.path, "sentences", lengths, len(dataset.sentences), length)
        return x, labels, word_index

    def encode(self, dataset):
        """`(x, labels, word_index, {line: tokens} of the truncated sentences)`."""
        tokenizer = self.preprocessor.tokenizer
        words = sorted({w for s in dataset.sentences for w in s.words})
        pieces = dict(zip(words, batched(tokenizer, words), strict=True))
        encoded = data.encode_tagged(
            [s.words for s in dataset.sentences],
            pieces.__getitem__,
            self.preprocessor.sequence_length,
            tag_ids=dataset.tag_ids if dataset.labelled else None,
            unk_id=tokenizer.unk_token_id,
            **specials(tokenizer),
        )
        lengths = {  # a truncated sentence lost its last words (tagged O)
            s.line: 2 + sum(max(len(pieces[w]), 1) for w in s.words)
            for s, placed in zip(dataset.sentences, encoded["word_index"].max(1), strict=True)
            if placed + 1 < len(s.words)
        }
        x = {k: encoded[k] for k in ("token_ids", "segment_ids", "padding_mask")}
        return x, encoded["labels"], encoded["word_index"], lengths

    def packed_training_model(self, model):
        return build_packed_tagger(model)

    def start_head(self, model, y) -> None:
        """A new head (its bias all zeros, as drawn) starts at the log frequencies of the
        training tags (`head_bias="prior"`, add-one smoothed): the first steps then learn
        which words are entities instead of that most words are O, and runs of the short
        recipe stay on the all-O plateau less often (benchmarks/RESULTS.md, issue 50). A
        trained head (a non-zero bias) is left as it is, so a second `fit` continues."""
        head = model.get_layer("tagger_head")
        bias = keras.ops.convert_to_numpy(head.bias)
        if self.head_bias == "zero" or np.any(bias):
            return
        head.bias.assign(prior_bias(y, len(bias)).astype(bias.dtype))

    def label_names(self, dataset):
        return list(dataset.tag_names)

    def task_kwargs(self, dataset):
        return {"num_tags": len(dataset.tag_names), "label_names": self.label_names(dataset)}

    def loss(self, dataset):
        """Normalised by the mean words per sentence: length-bucketed batches weigh alike."""
        words = np.mean([len(s.words) for s in dataset.sentences]) if dataset.sentences else 1
        return tagger_loss(labelled_per_sequence=float(words))

    def raw_dataset(self, inputs: list, label_names):
        """Texts (split at whitespace) or word lists."""
        sentences = [
            data.TaggedSentence(i.split() if isinstance(i, str) else list(i), [], n)
            for n, i in enumerate(inputs, 1)
        ]
        return data.TaggingData(RAW_SOURCE, sentences, list(label_names), [])

    def raw_results(self, dataset, predictions) -> list:
        return [(s.words, tags) for s, tags in zip(dataset.sentences, predictions, strict=True)]

    def decode(self, output, label_names):
        return {"words": list(output[0]), "tags": list(output[1])}

    def predict(self, dataset, outputs, word_index):
        """The predicted tag (its name) of every word of every sentence."""
        predicted = data.word_predictions(
            np.asarray(outputs), word_index, [len(s.words) for s in dataset.sentences]
        )
        return [[dataset.tag_names[t] for t in row] for row in predicted]

    def metrics(self, dataset, predictions, warn=True):
        """Entity-level precision, recall and F1 (conlleval rules), fractions in [0, 1];
        {} for a words-only file."""
        gold = [s.tags for s in dataset.sentences]
        if warn:
            warn_if_all_outside(predictions, gold, dataset.path)
        if not dataset.labelled:
            return {}
        scores = metrics.entity_scores(gold, predictions)
        return {key: scores[key] for key in ("precision", "recall", "f1")}

    def write_predictions(self, dataset, predictions, path):
        return write_conll(path, [s.words for s in dataset.sentences], predictions)

    def streams(self, predictor, input) -> bool:
        return streaming.streams(predictor, input)

    def stream_predictions(self, predictor, input, output, window, restart, identity):
        return streaming.stream_tags(self, predictor, input, output, window, restart, identity)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertTagger(TaskModel):
    """Token tagger (named entities) on words: tags are given and predicted per word, and
    aligned to word pieces as `kbz finetune tag` does (the first piece of a word carries its
    tag; the other pieces count for nothing).

    `fit(x, y)`: `x` a list of word lists, `y` a list of tag lists (one tag per word).
    `tag(x)` gives one tag name per input word.

    >>> tagger = kbz.BertTagger.from_preset("all_minilm_l6_v2", labels=["O", "B-LOC", "I-LOC"])
    >>> tagger.fit(x=[["Paris", "is", "nice"]], y=[["B-LOC", "O", "O"]], batch_size=1)
    >>> tagger.tag([["I", "love", "Paris"]])
    [['O', 'O', 'B-LOC']]
    """

    task_name = TAGGER.name
    behaviour = TaggingTask

    @classmethod
    def task_kwargs(cls, labels=None, **kwargs):
        if labels is not None:
            kwargs.setdefault("label_names", list(labels))
            kwargs.setdefault("num_tags", len(labels))
        return kwargs

    def raw_data(self, x, y=None):
        names = self.task_config.get("label_names")
        if not names:
            raise ValueError(
                "BertTagger needs its tag names: BertTagger.from_preset(preset, labels=[...])."
            )
        return tagging_data(x, y, names)

    def labelled(self, dataset):
        return dataset.labelled

    def tag(self, x, batch_size=None) -> list:
        """One tag name per word of each word list of `x`."""
        return self.decode(self.raw_data(x), batch_size)
