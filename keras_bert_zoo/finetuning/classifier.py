"""The classifier's behaviour: GLUE-style TSV classification or regression (`CLASSIFIER`)."""

import dataclasses

import numpy as np

from keras_bert_zoo import data, metrics
from keras_bert_zoo.finetuning.common import FinetuningTask, batched, tf
from keras_bert_zoo.finetuning.prediction_files import warn_if_collapsed, write_classifications
from keras_bert_zoo.finetuning.truncation import full_rows, warn_truncated
from keras_bert_zoo.task_specs import CLASSIFIER
from keras_bert_zoo.tasks import classifier_loss


@dataclasses.dataclass
class ClassificationTask(FinetuningTask):
    """GLUE-style TSV classification (or regression) with one or two text columns."""

    preprocessor: object
    text_columns: tuple = CLASSIFIER.default("text_columns")
    label_column: str = CLASSIFIER.default("label_column")
    regression: bool = CLASSIFIER.default("regression")
    spec = CLASSIFIER
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
            pieces = batched(self.preprocessor.tokenizer, texts)
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

    def write_predictions(self, dataset, predictions, path):
        names = None if self.regression else dataset.label_names
        return write_classifications(path, predictions, names)
