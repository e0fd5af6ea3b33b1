"""The tagger's behaviour: CoNLL token tagging, labels on each word's first sub-word
(`TAGGER`)."""

import dataclasses

import numpy as np

from keras_bert_zoo import data, metrics
from keras_bert_zoo.finetuning.common import FinetuningTask, batched, specials
from keras_bert_zoo.finetuning.prediction_files import warn_if_all_outside, write_conll
from keras_bert_zoo.finetuning.truncation import warn_truncated
from keras_bert_zoo.task_specs import TAGGER
from keras_bert_zoo.tasks import tagger_loss


@dataclasses.dataclass
class TaggingTask(FinetuningTask):
    """CoNLL token tagging; labels on the first sub-word of each word."""

    preprocessor: object
    spec = TAGGER
    sequence_outputs = True  # labels and logits per token: trimmed with the batch

    def read(self, path, label_names=None, labels_optional=False):
        """The CoNLL file; with `labels_optional`, a words-only file (text to tag) reads too."""
        return data.read_conll(path, tag_names=label_names, labels_optional=labels_optional)

    def arrays(self, dataset):
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
        length = self.preprocessor.sequence_length
        warn_truncated(dataset.path, "sentences", lengths, len(dataset.sentences), length)
        x = {k: encoded[k] for k in ("token_ids", "segment_ids", "padding_mask")}
        return x, encoded["labels"], encoded["word_index"]

    def label_names(self, dataset):
        return list(dataset.tag_names)

    def task_kwargs(self, dataset):
        return {"num_tags": len(dataset.tag_names), "label_names": self.label_names(dataset)}

    def loss(self, dataset):
        """Normalised by the mean words per sentence: length-bucketed batches weigh alike."""
        words = np.mean([len(s.words) for s in dataset.sentences]) if dataset.sentences else 1
        return tagger_loss(labelled_per_sequence=float(words))

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
