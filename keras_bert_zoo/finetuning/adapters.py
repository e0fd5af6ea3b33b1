"""Fine-tuning glue: task data from files to model inputs, and outputs back to predictions.

Each `*Task` object turns reader output (`keras_bert_zoo.data`) into arrays the task model
takes (`arrays`), model outputs into predictions (`predict`), predictions into the task's
metrics (`metrics`, `keras_bert_zoo.metrics`) and prediction files (`write_predictions`). The
tokenizer runs in batches over all texts (or unique words) at once, never once per string.
`run_finetune` (behind `kbz finetune`) trains with plain `model.fit`; `sequence_outputs` tells
length bucketing (`training.batching`) whether outputs have a sequence axis to trim.
"""

import dataclasses
import logging

import numpy as np

from keras_bert_zoo import data, metrics
from keras_bert_zoo.extras import TF_DATA_PIPELINES, require_tensorflow
from keras_bert_zoo.finetuning.prediction_files import (
    warn_if_all_outside,
    warn_if_collapsed,
    write_classifications,
    write_conll,
    write_squad,
)
from keras_bert_zoo.finetuning.reranking import RerankingTask
from keras_bert_zoo.finetuning.truncation import full_rows, warn_truncated
from keras_bert_zoo.tasks import classifier_loss, question_answerer_loss, tagger_loss

tf = require_tensorflow(TF_DATA_PIPELINES)

logger = logging.getLogger(__name__)


def _batched(tokenizer, texts, offsets=False, batch=4096):
    """Tokenizes `texts` in chunks: list of id lists (or of (id, start, end) char triples)."""
    results = []
    for begin in range(0, len(texts), batch):
        chunk = tf.constant(list(texts[begin : begin + batch]))
        if not offsets:
            results += [row.tolist() for row in tokenizer(chunk).numpy()]
            continue
        ids, starts, ends = tokenizer.tokenize_with_offsets(chunk, unit="char")
        for i, s, e in zip(ids.numpy(), starts.numpy(), ends.numpy(), strict=True):
            results.append(list(zip(i.tolist(), s.tolist(), e.tolist(), strict=True)))
    return results


def _specials(tokenizer):
    return dict(
        cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id, pad_id=tokenizer.pad_token_id
    )


@dataclasses.dataclass
class ClassificationTask:
    """GLUE-style TSV classification (or regression) with one or two text columns."""

    preprocessor: object
    text_columns: tuple = ("sentence",)
    label_column: str = "label"
    regression: bool = False
    sequence_outputs = False  # one output per example (no sequence axis to trim)

    def read(self, path, label_names=None, labels_optional=False):
        """The TSV's examples; with `labels_optional`, a file without the label column (text
        to predict) reads too."""
        label_column = self.label_column
        if labels_optional and label_column not in data.tsv_header(path):
            label_column = None
        return data.read_glue_tsv(
            path,
            self.text_columns,
            label_column,
            label_names=label_names,
            regression=self.regression,
        )

    def arrays(self, dataset):
        first = tf.constant([e.text_a for e in dataset.examples])
        pairs = dataset.examples and dataset.examples[0].text_b is not None
        inputs = self.preprocessor(
            (first, tf.constant([e.text_b for e in dataset.examples])) if pairs else first
        )
        x = {k: v.numpy() for k, v in inputs.items()}
        self._warn_truncated(dataset, full_rows(x["padding_mask"]))
        return x, dataset.labels, None

    def _warn_truncated(self, dataset, rows):
        """Counts the tokens of the examples that fill every position (only those)."""
        examples = [dataset.examples[i] for i in rows]
        segments = [[e.text_a for e in examples]]
        if examples and examples[0].text_b is not None:
            segments.append([e.text_b for e in examples])
        counts = [1 + len(segments)] * len(examples)  # [CLS] and one [SEP] per segment
        for texts in segments:
            pieces = _batched(self.preprocessor.tokenizer, texts)
            counts = [c + len(ids) for c, ids in zip(counts, pieces, strict=True)]
        lengths = {e.line: c for e, c in zip(examples, counts, strict=True)}
        length = self.preprocessor.sequence_length
        warn_truncated(dataset.path, "examples", lengths, len(dataset.examples), length)

    def label_names(self, dataset):
        return None if self.regression else list(dataset.label_names)

    def task_kwargs(self, dataset):
        if self.regression:
            return {"num_classes": 1}
        return {"num_classes": len(dataset.label_names), "label_names": self.label_names(dataset)}

    def loss(self, dataset):
        return classifier_loss(1 if self.regression else len(dataset.label_names))

    def predict(self, dataset, outputs, extra):
        """The regression score of each example, or its class probabilities (softmax)."""
        outputs = np.asarray(outputs, np.float64)
        if self.regression:
            return outputs[:, 0]
        exponentials = np.exp(outputs - outputs.max(-1, keepdims=True))
        return exponentials / exponentials.sum(-1, keepdims=True)

    def metrics(self, dataset, predictions, warn=True):
        """Fractions in [0, 1] (accuracy, F1), or correlations for regression; {} unlabeled."""
        if not len(dataset.labels):
            if warn and not self.regression:
                warn_if_collapsed(predictions.argmax(-1), None, dataset.label_names, dataset.path)
            return {}
        if self.regression:
            return {
                "pearson": metrics.pearson(dataset.labels, predictions),
                "spearman": metrics.spearman(dataset.labels, predictions),
            }
        predicted = predictions.argmax(-1)
        if warn:
            warn_if_collapsed(predicted, dataset.labels, dataset.label_names, dataset.path)
        average = "binary" if len(dataset.label_names) == 2 else "macro"
        return {
            "accuracy": metrics.accuracy(dataset.labels, predicted),
            "f1": metrics.f1_score(dataset.labels, predicted, average=average),
        }

    def evaluate(self, dataset, outputs, extra, warn=True):
        return self.metrics(dataset, self.predict(dataset, outputs, extra), warn)

    def write_predictions(self, dataset, predictions, path):
        names = None if self.regression else dataset.label_names
        return write_classifications(path, predictions, names)


@dataclasses.dataclass
class TaggingTask:
    """CoNLL token tagging; labels on the first sub-word of each word."""

    preprocessor: object
    sequence_outputs = True  # labels and logits per token: trimmed with the batch

    def read(self, path, label_names=None, labels_optional=False):
        """The CoNLL file; with `labels_optional`, a words-only file (text to tag) reads too."""
        return data.read_conll(path, tag_names=label_names, labels_optional=labels_optional)

    def arrays(self, dataset):
        tokenizer = self.preprocessor.tokenizer
        words = sorted({w for s in dataset.sentences for w in s.words})
        pieces = dict(zip(words, _batched(tokenizer, words), strict=True))
        encoded = data.encode_tagged(
            [s.words for s in dataset.sentences],
            pieces.__getitem__,
            self.preprocessor.sequence_length,
            tag_ids=dataset.tag_ids if dataset.labelled else None,
            unk_id=tokenizer.unk_token_id,
            **_specials(tokenizer),
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

    def evaluate(self, dataset, outputs, word_index, warn=True):
        return self.metrics(dataset, self.predict(dataset, outputs, word_index), warn)

    def write_predictions(self, dataset, predictions, path):
        return write_conll(path, [s.words for s in dataset.sentences], predictions)


@dataclasses.dataclass
class QuestionAnsweringTask:
    """SQuAD v1.1 / v2.0 extractive question answering with doc-stride windows."""

    preprocessor: object
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    sequence_outputs = True  # start/end logits per token (targets are positions)

    def read(self, path, label_names=None, labels_optional=False):
        """The SQuAD file; with `labels_optional`, questions without answers read too."""
        return data.read_squad(path, answers_optional=labels_optional)

    def arrays(self, examples):
        tokenizer = self.preprocessor.tokenizer
        texts = sorted({e.question for e in examples} | {e.context for e in examples})
        spans = dict(zip(texts, _batched(tokenizer, texts, offsets=True), strict=True))
        features = data.build_squad_features(
            examples,
            spans.__getitem__,
            max_seq_length=self.preprocessor.sequence_length,
            doc_stride=self.doc_stride,
            max_query_length=self.max_query_length,
            **_specials(tokenizer),
        )
        targets = {"start_logits": features.start_positions, "end_logits": features.end_positions}
        return features.inputs(), targets, features

    def label_names(self, examples):
        return None

    def task_kwargs(self, examples):
        return {}

    def loss(self, examples):
        return question_answerer_loss()

    def predict(self, examples, outputs, features):
        """`{"answers": {id: text}, "nbest": {id: [...]}}` as run_squad.py writes them."""
        logits = (np.asarray(outputs["start_logits"]), np.asarray(outputs["end_logits"]))
        options = dict(n_best_size=self.n_best_size, max_answer_length=self.max_answer_length)
        return {
            "answers": data.postprocess(examples, features, *logits, **options),
            "nbest": data.nbest_predictions(examples, features, *logits, **options),
        }

    def metrics(self, examples, predictions, warn=True):
        """Official SQuAD exact match and F1, in percent as the official script reports, over
        the questions with answers (or `is_impossible`); {} when none has."""
        labelled = [e for e in examples if e.labelled]
        if not labelled:
            return {}
        return data.squad_evaluate(labelled, predictions["answers"])

    def evaluate(self, examples, outputs, features, warn=True):
        return self.metrics(examples, self.predict(examples, outputs, features), warn)

    def write_predictions(self, examples, predictions, path):
        return write_squad(path, predictions["answers"], predictions["nbest"])


# Keyed by the task names of `keras_bert_zoo.tasks.TASKS`.
FINETUNING_TASKS = {
    "classifier": ClassificationTask,
    "tagger": TaggingTask,
    "question_answerer": QuestionAnsweringTask,
    "reranker": RerankingTask,
}
