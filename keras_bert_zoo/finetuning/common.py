"""What every fine-tuning task's behaviour shares: the `FinetuningTask` protocol and batched
tokenization.

A task's behaviour turns reader output (`keras_bert_zoo.data`) into arrays the task model
takes (`arrays`), model outputs into predictions (`predict`), predictions into the task's
metrics (`metrics`, `keras_bert_zoo.metrics`) and prediction files (`write_predictions`), as
the `Task` classes of TF Model Garden's `official/nlp/tasks` do; its names, defaults and flags
are its spec (`keras_bert_zoo.task_specs`). The tokenizer runs in batches over all texts (or
unique words) at once, never once per string.
"""

from keras_bert_zoo.extras import TF_DATA_PIPELINES, require_tensorflow

tf = require_tensorflow(TF_DATA_PIPELINES)


class FinetuningTask:
    """The behaviour of a fine-tuning task; subclasses are dataclasses whose first field is
    the preprocessor and whose other fields are their spec's `TaskOption`s.

    `spec`: the task's `TaskSpec`; `sequence_outputs`: whether the model's outputs have a
    sequence axis that length bucketing (`training.batching`) trims with the batch.
    """

    spec = None
    sequence_outputs = False

    def read(self, path, label_names=None, labels_optional=False):
        """The file's examples; `labels_optional`: a file without labels (to predict) reads."""
        raise NotImplementedError

    def arrays(self, dataset):
        """`(model inputs, targets, extra)`; `extra` is what `predict` needs besides outputs."""
        raise NotImplementedError

    def label_names(self, dataset):
        return None

    def task_kwargs(self, dataset):
        """The builder's arguments the training data decides (`num_classes`, ...)."""
        return {}

    def loss(self, dataset):
        """The Keras loss (or `{output: loss}`) of the task model on this training data."""
        raise NotImplementedError

    def predict(self, dataset, outputs, extra):
        """Model outputs -> the task's predictions (what `metrics` and the file take)."""
        raise NotImplementedError

    def metrics(self, dataset, predictions, warn=True):
        """The task's metrics ({} for unlabelled data); `warn`: log degenerate predictions."""
        raise NotImplementedError

    def write_predictions(self, dataset, predictions, path):
        """Writes the prediction file(s) (`spec.prediction_file`); returns their paths."""
        raise NotImplementedError

    def evaluate(self, dataset, outputs, extra, warn=True):
        return self.metrics(dataset, self.predict(dataset, outputs, extra), warn)


def batched(tokenizer, texts, offsets=False, batch=4096):
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


def specials(tokenizer):
    return dict(
        cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id, pad_id=tokenizer.pad_token_id
    )
