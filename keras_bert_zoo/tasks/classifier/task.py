"""The classifier: `BertClassifier` (the task model) and its behaviour, GLUE-style TSV
classification or regression (`CLASSIFIER`)."""

import dataclasses

import keras
import numpy as np

from keras_bert_zoo import data, metrics
from keras_bert_zoo.data.readers import sorted_labels
from keras_bert_zoo.finetuning.common import FinetuningTask, batched
from keras_bert_zoo.finetuning.prediction_files import warn_if_collapsed, write_classifications
from keras_bert_zoo.finetuning.raw_data import classification_data, column
from keras_bert_zoo.finetuning.task_model import TaskModel
from keras_bert_zoo.finetuning.truncation import full_rows, warn_truncated
from keras_bert_zoo.packed_encoder import build_packed_classifier
from keras_bert_zoo.task_graphs import classifier_loss
from keras_bert_zoo.tasks.classifier import stream as streaming
from keras_bert_zoo.tasks.classifier.spec import CLASSIFIER
from keras_bert_zoo.tokenization.arrays import packed_arrays


@dataclasses.dataclass
class ClassificationTask(FinetuningTask):
    """GLUE-style TSV classification (or regression) with one or two text columns."""

    preprocessor: object
    text_columns: tuple = CLASSIFIER.default("text_columns")
    label_column: str = CLASSIFIER.default("label_column")
    regression: bool = CLASSIFIER.default("regression")
    spec = CLASSIFIER
    sequence_outputs = False  # one output per example (no sequence axis to trim)
    packs = True  # each example is read at its [CLS]: packed rows train it

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
        first = [e.text_a for e in dataset.examples]
        pairs = dataset.examples and dataset.examples[0].text_b is not None
        second = [e.text_b for e in dataset.examples] if pairs else None
        x = packed_arrays(self.preprocessor, first, second)
        self._warn_truncated(dataset, full_rows(x["padding_mask"]))
        return x, dataset.labels, None

    def _warn_truncated(self, dataset, rows):
        """Counts the tokens of the examples that fill every position (only those)."""
        examples = [dataset.examples[i] for i in rows]
        lengths = self.token_counts(examples)
        length = self.preprocessor.sequence_length
        warn_truncated(dataset.path, "examples", lengths, len(dataset.examples), length)

    def token_counts(self, examples) -> dict:
        """`{line: tokens}` of `TextExample`s, [CLS] and one [SEP] per segment included."""
        segments = [[e.text_a for e in examples]]
        if examples and examples[0].text_b is not None:
            segments.append([e.text_b for e in examples])
        counts = [1 + len(segments)] * len(examples)
        for texts in segments:
            pieces = batched(self.preprocessor.tokenizer, texts)
            counts = [c + len(ids) for c, ids in zip(counts, pieces, strict=True)]
        return {e.line: c for e, c in zip(examples, counts, strict=True)}

    def packed_training_model(self, model):
        return build_packed_classifier(model)

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

    @classmethod
    def for_predictor(cls, preprocessor, label_names):
        return cls(preprocessor, regression=label_names is None)

    def raw_arrays(self, inputs: list, label_names):
        """Texts or `(text, text)` pairs, packed with no dataset; their full rows counted."""
        pairs = [tuple(i) if isinstance(i, (tuple, list)) else (i,) for i in inputs]
        if len({len(p) for p in pairs}) > 1:
            raise ValueError("Pass texts or (text, text) pairs to a classifier, not a mix.")
        second = [p[1] for p in pairs] if pairs and len(pairs[0]) == 2 else None
        x = packed_arrays(self.preprocessor, [p[0] for p in pairs], second)
        return None, x, None, list(full_rows(x["padding_mask"]))

    def decode(self, output, label_names):
        if label_names is None:  # a regression
            return {"score": float(output)}
        scores = {name: float(p) for name, p in zip(label_names, output, strict=True)}
        return {"label": label_names[int(np.argmax(output))], "scores": scores}

    def streams(self, predictor, input) -> bool:
        return streaming.streams(self, predictor, input)

    def stream_predictions(self, predictor, input, output, window, restart, identity):
        arguments = (predictor, input, output, window, restart, identity)
        return streaming.stream_classifications(self, *arguments)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertClassifier(TaskModel):
    """Sentence (or sentence-pair) classifier, or regression with `num_classes=1`, on raw text.

    `fit(x, y)`: `x` a list of texts or a pair `(texts, second_texts)`; `y` class ids, class
    names (the model's `label_names`, or learnt from `y` when it has none), or floats for
    regression. `predict(x)` gives `[n, classes]` logits; `classify(x)` the class names.

    >>> clf = kbz.BertClassifier.from_preset("all_minilm_l6_v2", label_names=["neg", "pos"])
    >>> clf.fit(x=texts, y=labels)
    >>> clf.classify(["a moving, funny film"])
    ['pos']
    """

    task_name = CLASSIFIER.name
    behaviour = ClassificationTask

    @classmethod
    def task_kwargs(cls, **kwargs):
        names = kwargs.get("label_names")
        if names is not None and kwargs.get("num_classes") is None:
            kwargs["num_classes"] = len(names)
        return kwargs

    @property
    def regression(self) -> bool:
        return self.task_config.get("num_classes") == 1

    def behaviour_options(self):
        return {**super().behaviour_options(), "regression": self.regression}

    def raw_data(self, x, y=None):
        names = self.task_config.get("label_names")
        if y is not None and not names and not self.regression:
            y = column(y, "y", "labels")
            if y and all(isinstance(v, str) for v in y):  # names learnt from `y`
                learnt = sorted_labels(set(y))
                count = self.task_config["num_classes"]
                if len(learnt) != count:
                    raise ValueError(
                        f"`y` names {len(learnt)} classes ({learnt[:5]}) for a model of {count}; "
                        "pass label_names=[...] to from_preset (or the constructor) to name them."
                    )
                self.task_config["label_names"] = names = learnt  # kept: save, export, classify
        return classification_data(x, y, names, self.regression)

    def labelled(self, dataset):
        return len(dataset.labels) > 0

    def classify(self, x, batch_size=None) -> list:
        """The predicted class of each text (or pair): its name when the model has label
        names, else its id; regression: the score; multi-label: the names above 0.5."""
        logits = np.asarray(self.predict(x, batch_size=batch_size))
        if self.regression:
            return logits[:, 0].tolist()
        names = self.task_config.get("label_names")
        label = (lambda i: names[i]) if names else int
        if self.task_config.get("multi_label"):
            return [[label(i) for i in np.flatnonzero(row > 0)] for row in logits]
        return [label(i) for i in logits.argmax(-1)]
