"""`kbz predict` streamed: a classifier's TSV, a CoNLL file and a reranker's pairs, with or
without labels, read `window` rows (examples, sentences, pairs) at a time, each window
predicted (sorted by length inside) and appended to the prediction file in input order,
resumable after a kill (`inference.outputs`). The files are the ones `run_predict` writes
whole, and so are the metrics of a labelled file: a classifier's confusion matrix and a
tagger's entity counts add up window by window (kept with each commit, `outputs.Tallied`);
the reranker's ranked lists and metrics gather a query's pairs from anywhere in the file,
so they come from a table on disk once every pair is scored (`finetuning.ranked_stream`).
A regression's correlations rank every score at once: they are computed once the file is
complete, from its labels and the written scores read back (8 bytes a row each, no texts).

SQuAD is read whole: its JSON is one document, and its answers file is one JSON object.
"""

import os
from pathlib import Path

import numpy as np

from keras_bert_zoo.data.conll_reader import TaggingData, conll_sentences
from keras_bert_zoo.data.line_stream import LineSource, count_lines
from keras_bert_zoo.data.readers import (
    TextExample,
    column_index,
    encode_labels,
    file_error,
    regression_label,
    tsv_fields,
)
from keras_bert_zoo.data.rerank_reader import ranking_header, ranking_pairs
from keras_bert_zoo.finetuning.prediction_files import (
    classification_header,
    classification_rows,
    warn_if_all_outside,
    warn_if_collapsed_counts,
)
from keras_bert_zoo.finetuning.ranked_stream import ScoredRows, pairs_path
from keras_bert_zoo.finetuning.truncation import full_rows, warn_truncated
from keras_bert_zoo.inference.outputs import StreamOutput, Tallied, TextRows, partial_path
from keras_bert_zoo.inference.streaming import Progress, stream
from keras_bert_zoo.jobs.predictors import Predictor
from keras_bert_zoo.jobs.streaming import model_identity
from keras_bert_zoo.metrics import confusion_scores, entity_counts, entity_f1, pearson, spearman
from keras_bert_zoo.saving.atomic import fsync_path
from keras_bert_zoo.tasks.classifier.task import ClassificationTask
from keras_bert_zoo.tasks.reranker.task import RerankingTask, ranked_path
from keras_bert_zoo.tasks.tagger.task import TaggingTask
from keras_bert_zoo.tokenization.arrays import packed_arrays
from keras_bert_zoo.training import bucketed_prediction


def streams(predictor: Predictor, job, input) -> bool:
    """Whether `kbz predict` streams `input`: a classifier's TSV, a CoNLL file, or a
    reranker's pairs, labelled or not (everything but SQuAD). A labelled file for a model
    that recorded no label names (classes "0", "1", ...) is read whole, where the file's
    own labels name the classes, as before streaming."""
    if isinstance(job, RerankingTask):
        return True
    if not isinstance(job, (ClassificationTask, TaggingTask)):
        return False
    if predictor.named or predictor.label_names is None:  # None: a regression
        return True
    if isinstance(job, TaggingTask):
        return words_only(input)
    return job.label_column not in first_line(input).split("\t")


def stream_predictions(model, predictor: Predictor, job, input, output, window, restart):
    """`(prediction files, metrics)` of a file `streams` accepts, written a window at a time."""
    if isinstance(job, RerankingTask):
        return stream_scores(model, predictor, job, input, output, window, restart)
    if isinstance(job, ClassificationTask):
        return stream_classifications(model, predictor, job, input, output, window, restart)
    return stream_tags(model, predictor, input, output, window, restart)


def first_line(path) -> str:
    """The first line of a text file (gzip read transparently), without reading the rest."""
    for _, line in LineSource(path):
        return line
    raise file_error(path, None, "is empty; expected a TSV file", "Check the path.")


def words_only(path) -> bool:
    """Whether a CoNLL file's first word line has no tag column (text to tag)."""
    for _, line in LineSource(path):
        if line.strip() and not line.startswith("-DOCSTART-"):
            return len(line.split("\t") if "\t" in line else line.split()) == 1
    return False


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


def stream_classifications(
    model, predictor: Predictor, job, input, output, window: int, restart: bool
):
    """Writes the classifier TSV of `input`'s examples at `output`, a window at a time;
    returns it and, for a file with labels, accuracy and F1 (`ClassificationTask.metrics`)
    from a confusion matrix added up window by window (kept with each commit), or a
    regression's correlations once every row is written (`regression_scores`)."""
    names, columns = predictor.label_names, tuple(job.text_columns)
    lines, labelled = count_lines(input), job.label_column in first_line(input).split("\t")
    identity = _identity(job.spec.name, model, predictor, window, text_columns=list(columns))
    writer = TextRows(lambda start, p: classification_rows(p, names, start))
    writer.header = classification_header(names)
    size = len(names or [])
    writer = Tallied(writer, size * size) if labelled and names is not None else writer
    task = ClassificationTask(predictor.preprocessor)
    truncated, counts = {}, np.zeros(size, np.int64)

    def classify(examples):
        pairs = examples[0].text_b is not None
        predictions = predictor([(e.text_a, e.text_b) if pairs else e.text_a for e in examples])
        if names is not None:
            counts[:] += np.bincount(predictions.argmax(-1), minlength=size)
        full = [examples[i] for i in predictor.full_rows]
        truncated.update(task.token_counts(full) if full else {})
        if not labelled or names is None:
            return predictions
        cells = [e.label * size + p for e, p in zip(examples, predictions.argmax(-1), strict=True)]
        return predictions, np.bincount(cells, minlength=size * size)

    label_column = job.label_column if labelled else None
    records = _records(input, LineSource(input), columns, label_column, names)
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


def _identity(task, model, predictor, window, **options) -> dict:
    """What determines a streamed prediction file (a resume must match it)."""
    return {
        "command": f"predict {task}",
        "model": model_identity(model),
        "sequence_length": predictor.preprocessor.sequence_length,
        "batch_size": predictor.batch_size,
        "window": window,
        **options,
    }


def stream_tags(model, predictor: Predictor, input, output, window: int, restart: bool):
    """Writes the CoNLL predictions of a CoNLL file at `output`, a window of sentences at a
    time (`write_conll`'s layout: `word<TAB>tag` lines, a blank line between); returns them
    and, for a file with tags, the entity scores (`TaggingTask.metrics`), from entity counts
    added up window by window (`metrics.entity_counts`)."""
    names, labelled = predictor.label_names, not words_only(input)
    job, truncated, tagged = TaggingTask(predictor.preprocessor), {}, [0, False]
    network, length = predictor.network, predictor.preprocessor.sequence_length
    buckets = bucketed_prediction.prediction_buckets(network, length)

    def tag(sentences):
        dataset = TaggingData(str(input), sentences, names, [])
        x, _, word_index, cut = job.encode(dataset)
        truncated.update(cut)
        outputs = bucketed_prediction.predict(network, x, predictor.batch_size, buckets, True)
        tags = job.predict(dataset, outputs, word_index)
        tagged[0] += len(tags)
        tagged[1] = tagged[1] or any(t != "O" for row in tags for t in row)
        rows = [(s.words, row) for s, row in zip(sentences, tags, strict=True)]
        return (rows, entity_counts([s.tags for s in sentences], tags)) if labelled else rows

    def conll(start, rows):
        blocks = ("".join(f"{w}\t{t}\n" for w, t in zip(*row, strict=True)) for row in rows)
        return ("\n" if start else "") + "\n".join(blocks)

    def records(source):
        for sentence in conll_sentences(input, source, labels_optional=True):
            if labelled:  # a tag the model does not know is named with its line
                lines = [(sentence.line + i, t) for i, t in enumerate(sentence.tags)]
                encode_labels(input, lines, names, "tag")
            yield sentence, source.mark()

    writer = Tallied(TextRows(conll), 3) if labelled else TextRows(conll)
    identity = _identity(job.spec.name, model, predictor, window)
    with StreamOutput(output, identity, writer, restart) as out:
        rows = stream(records(LineSource(input)), tag, out, window, Progress(None, out.rows, "tag"))
    warn_truncated(input, "sentences", truncated, rows, length)
    if not tagged[1] and tagged[0]:  # every word of this attempt's sentences tagged O
        gold = [["B-entity"]] if labelled and writer.totals[2] else None  # the file has some
        warn_if_all_outside([["O"]] * tagged[0], gold, input)
    return [Path(output)], (entity_f1(writer.totals) if labelled else {})


def stream_scores(model, predictor: Predictor, job, input, output, window: int, restart: bool):
    """The reranker's scores file and ranked lists of a pairs TSV, a window of pairs at a
    time, and with labels its metrics (`finetuning.ranked_stream`)."""
    header, columns, labelled = ranking_header(input, first_line(input), labels_optional=True)
    network, length = predictor.network, predictor.preprocessor.sequence_length
    buckets = bucketed_prediction.prediction_buckets(network, length)
    truncated = {}

    def score(pairs):
        x = packed_arrays(
            predictor.preprocessor, [p.query for p in pairs], [p.passage for p in pairs]
        )
        truncated.update(job.token_counts([pairs[i] for i in full_rows(x["padding_mask"])]))
        logits = bucketed_prediction.predict(network, x, predictor.batch_size, buckets, False)
        return pairs, job.predict(None, logits, None)

    def records(source):
        lines = iter(source)
        next(lines)  # the header
        for pair in ranking_pairs(input, lines, len(header), columns):
            yield pair, source.mark()

    writer = ScoredRows(header, pairs_path(output))
    identity = _identity(job.spec.name, model, predictor, window)
    with StreamOutput(output, identity, writer, restart) as out:
        progress = Progress(count_lines(input) - 1, out.rows, "rerank")
        rows = stream(records(LineSource(input)), score, out, window, progress)
        if not rows:
            raise file_error(input, None, "has a header but no pairs", "Check the file.")
        # Under a hidden name until the scores file is complete: a run killed in between
        # finds no side file of its own in the way (`check_prediction_paths`).
        ranked = partial_path(ranked_path(output))
        metrics = writer.write_ranked(ranked, labelled, job.top_k, input)
    os.replace(ranked, ranked_path(output))
    fsync_path(ranked.parent)
    pairs_path(output).unlink()  # the file is complete: a rerun starts afresh
    warn_truncated(input, "pairs", truncated, rows, length)
    return [Path(output), ranked_path(output)], metrics
