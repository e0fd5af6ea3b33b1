"""`kbz predict classify` on a file without labels, streamed: the TSV read `window` rows at a
time, each window classified (sorted by length inside) and its rows appended to the
prediction file in input order, resumable after a kill (`inference.outputs`). The file is
the one `run_predict` writes whole.

A labelled file (an evaluation) is read whole by `run_predict`: its metrics need every
prediction at once. Tagging (CoNLL), reranking and SQuAD still read whole files: their
records span several lines (sentences, a query's passages, a paragraph's windows) and their
files are written by whole-dataset code (`finetuning`).
"""

from pathlib import Path

import numpy as np

from keras_bert_zoo.data.line_stream import LineSource, count_lines
from keras_bert_zoo.data.readers import TextExample, column_index, file_error, tsv_fields
from keras_bert_zoo.finetuning.classifier import ClassificationTask
from keras_bert_zoo.finetuning.prediction_files import (
    classification_header,
    classification_rows,
    warn_if_collapsed_counts,
)
from keras_bert_zoo.finetuning.truncation import warn_truncated
from keras_bert_zoo.inference.outputs import StreamOutput, TextRows
from keras_bert_zoo.inference.streaming import Progress, stream
from keras_bert_zoo.jobs.predictors import Predictor
from keras_bert_zoo.jobs.streaming import model_identity


def first_line(path) -> str:
    """The first line of a text file (gzip read transparently), without reading the rest."""
    for _, line in LineSource(path):
        return line
    raise file_error(path, None, "is empty; expected a TSV file", "Check the path.")


def _records(path, source: LineSource, text_columns):
    """`(TextExample, mark)` per example of a headed TSV, checked line by line."""
    lines = iter(source)
    _, first = next(lines)
    header = first.split("\t")
    expected = [str(c) for c in text_columns]
    columns = [column_index(path, header, c, "text_columns", expected) for c in text_columns]
    for number, fields in tsv_fields(path, lines, len(header)):
        texts = [fields[c] for c in columns] + [None]
        yield TextExample(texts[0], texts[1], None, number), source.mark()


def stream_classifications(
    model, predictor: Predictor, input, output, text_columns, window: int, restart: bool
) -> list[Path]:
    """Writes the classifier TSV of `input`'s examples at `output`, a window at a time."""
    names, columns = predictor.label_names, tuple(text_columns)
    lines = count_lines(input)
    identity = {
        "command": "predict classifier",
        "model": model_identity(model),
        "sequence_length": predictor.preprocessor.sequence_length,
        "batch_size": predictor.batch_size,
        "window": window,
        "text_columns": list(columns),
    }
    writer = TextRows(lambda start, p: classification_rows(p, names, start))
    writer.header = classification_header(names)
    job = ClassificationTask(predictor.preprocessor)
    truncated, counts = {}, np.zeros(len(names or []), np.int64)

    def classify(examples):
        pairs = examples[0].text_b is not None
        predictions = predictor([(e.text_a, e.text_b) if pairs else e.text_a for e in examples])
        if names is not None:
            counts[:] += np.bincount(predictions.argmax(-1), minlength=len(names))
        full = [examples[i] for i in predictor.full_rows]
        truncated.update(job.token_counts(full) if full else {})
        return predictions

    source = LineSource(input)
    with StreamOutput(output, identity, writer, restart) as out:
        progress = Progress(lines - 1, out.rows, "classify")
        rows = stream(_records(input, source, columns), classify, out, window, progress)
    if not rows:
        raise file_error(input, None, "has a header but no examples", "Check the file.")
    length = predictor.preprocessor.sequence_length
    warn_truncated(input, "examples", truncated, rows, length)
    if names is not None:  # the rows of this attempt (a resumed run: those after the resume)
        warn_if_collapsed_counts(counts, names, input)
    return [Path(output)]
