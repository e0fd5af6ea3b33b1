"""`kbz predict classify` streamed (`ClassificationTask.stream_predictions`): a headed TSV
read `window` examples at a time, each window predicted (sorted by length inside) and
appended to the prediction file in input order, resumable after a kill
(`inference.outputs`). A labelled file's accuracy and F1 come from a confusion matrix added
up window by window (kept with each commit, `outputs.Tallied`); a regression's correlations
rank every score at once, so they are computed once the file is complete, from its labels
and the written scores read back (8 bytes a row each, no texts).
"""

from pathlib import Path

import numpy as np

from keras_bert_zoo.data.line_stream import LineSource, count_lines, first_line
from keras_bert_zoo.data.readers import (
    TextExample,
    column_index,
    encode_labels,
    file_error,
    regression_label,
    tsv_fields,
)
from keras_bert_zoo.finetuning.prediction_files import (
    classification_header,
    classification_rows,
    warn_if_collapsed_counts,
)
from keras_bert_zoo.finetuning.truncation import warn_truncated
from keras_bert_zoo.inference.outputs import StreamOutput, Tallied, TextRows
from keras_bert_zoo.inference.streaming import Progress, stream
from keras_bert_zoo.metrics import confusion_scores, pearson, spearman


def streams(job, predictor, input) -> bool:
    """Whether `input` streams: always, but for a labelled file and a model that recorded
    no label names (classes "0", "1", ...), where the file's own labels name the classes
    and the file is read whole, as before streaming."""
    if predictor.named or predictor.label_names is None:  # None: a regression
        return True
    return job.label_column not in first_line(input).split("\t")


def _records(path, source: LineSource, text_columns, label_column=None, label_names=None):
    """`(TextExample, mark)` per example of a headed TSV, checked line by line; with
    `label_column`, the label as its id in `label_names` (an unknown one named by its line),
    or as a number where `label_names` is None (a regression)."""
    lines = iter(source)
    _, first = next(lines)
    header = first.split("\t")
    labels = [label_column] if label_column is not None else []
    expected = [str(c) for c in (*text_columns, *labels)]
    columns = [column_index(path, header, c, "text_columns", expected) for c in text_columns]
    columns += [column_index(path, header, c, "label_column", expected) for c in labels]
    for number, fields in tsv_fields(path, lines, len(header)):
        texts, label = [fields[c] for c in columns[: len(text_columns)]] + [None], None
        if labels:
            value = fields[columns[-1]].strip()
            if label_names is None:
                label = regression_label(path, number, value)
            else:
                label = int(encode_labels(path, [(number, value)], label_names)[0])
        yield TextExample(texts[0], texts[1], label, number), source.mark()


def stream_classifications(job, predictor, input, output, window, restart, identity):
    """Writes the classifier TSV of `input`'s examples at `output`, a window at a time;
    returns it and, for a file with labels, accuracy and F1 (`ClassificationTask.metrics`)
    from a confusion matrix added up window by window (kept with each commit), or a
    regression's correlations once every row is written (`regression_scores`)."""
    names, columns = predictor.label_names, tuple(job.text_columns)
    lines, labelled = count_lines(input), job.label_column in first_line(input).split("\t")
    writer = TextRows(lambda start, p: classification_rows(p, names, start))
    writer.header = classification_header(names)
    size = len(names or [])
    writer = Tallied(writer, size * size) if labelled and names is not None else writer
    truncated, counts = {}, np.zeros(size, np.int64)

    def classify(examples):
        pairs = examples[0].text_b is not None
        predictions = predictor([(e.text_a, e.text_b) if pairs else e.text_a for e in examples])
        if names is not None:
            counts[:] += np.bincount(predictions.argmax(-1), minlength=size)
        full = [examples[i] for i in predictor.full_rows]
        truncated.update(job.token_counts(full) if full else {})
        if not labelled or names is None:
            return predictions
        cells = [e.label * size + p for e, p in zip(examples, predictions.argmax(-1), strict=True)]
        return predictions, np.bincount(cells, minlength=size * size)

    label_column = job.label_column if labelled else None
    records = _records(input, LineSource(input), columns, label_column, names)
    identity = {**identity, "text_columns": list(columns)}
    with StreamOutput(output, identity, writer, restart) as out:
        progress = Progress(lines - 1, out.rows, "classify")
        rows = stream(records, classify, out, window, progress)
    if not rows:
        raise file_error(input, None, "has a header but no examples", "Check the file.")
    length = predictor.preprocessor.sequence_length
    warn_truncated(input, "examples", truncated, rows, length)
    if labelled and names is None:
        return [Path(output)], regression_scores(input, output, columns, job.label_column)
    if labelled:  # every row's, a resumed run's earlier attempts too
        confusion = np.reshape(writer.totals, (size, size))
        warn_if_collapsed_counts(confusion.sum(0), names, input, confusion.sum(1))
        average = "binary" if size == 2 else "macro"
        return [Path(output)], confusion_scores(confusion, average)
    if names is not None:  # the rows of this attempt (a resumed run: those after the resume)
        warn_if_collapsed_counts(counts, names, input)
    return [Path(output)], {}


def regression_scores(input, output, text_columns, label_column) -> dict:
    """Pearson and Spearman of a complete prediction file against `input`'s labels, both
    read again a line at a time: a resumed run's earlier rows count too."""
    records = _records(input, LineSource(input), text_columns, label_column)
    labels = np.fromiter((example.label for example, _ in records), np.float64)
    lines = iter(LineSource(output))
    next(lines)  # the header
    scores = (float(line.split("\t")[1]) for _, line in lines)
    predictions = np.fromiter(scores, np.float64, len(labels))
    return {
        "pearson": pearson(labels, predictions),
        "spearman": spearman(labels, predictions),
    }
