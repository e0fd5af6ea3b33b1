"""`kbz predict tag` streamed (`TaggingTask.stream_predictions`): a CoNLL file read
`window` sentences at a time, each window tagged (sorted by length inside) and appended to
the prediction file in input order, resumable after a kill (`inference.outputs`); a tagged
file's entity scores come from entity counts added up window by window (kept with each
commit, `outputs.Tallied`)."""

from pathlib import Path

from keras_bert_zoo.data.conll_reader import TaggingData, conll_sentences, words_only
from keras_bert_zoo.data.line_stream import LineSource
from keras_bert_zoo.data.readers import encode_labels
from keras_bert_zoo.finetuning.prediction_files import warn_if_all_outside
from keras_bert_zoo.finetuning.truncation import warn_truncated
from keras_bert_zoo.inference.outputs import StreamOutput, Tallied, TextRows
from keras_bert_zoo.inference.streaming import Progress, stream
from keras_bert_zoo.metrics import entity_counts, entity_f1
from keras_bert_zoo.training import bucketed_prediction


def streams(predictor, input) -> bool:
    """Whether `input` streams: always, but for a tagged file and a model that recorded no
    tag names ("0", "1", ...), where the file's own tags name the classes and the file is
    read whole, as before streaming."""
    return predictor.named or words_only(input)


def stream_tags(job, predictor, input, output, window, restart, identity):
    """Writes the CoNLL predictions of a CoNLL file at `output`, a window of sentences at a
    time (`write_conll`'s layout: `word<TAB>tag` lines, a blank line between); returns them
    and, for a file with tags, the entity scores (`TaggingTask.metrics`), from entity counts
    added up window by window (`metrics.entity_counts`)."""
    names, labelled = predictor.label_names, not words_only(input)
    truncated, tagged = {}, [0, False]
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
    with StreamOutput(output, identity, writer, restart) as out:
        rows = stream(records(LineSource(input)), tag, out, window, Progress(None, out.rows, "tag"))
    warn_truncated(input, "sentences", truncated, rows, length)
    if not tagged[1] and tagged[0]:  # every word of this attempt's sentences tagged O
        gold = [["B-entity"]] if labelled and writer.totals[2] else None  # the file has some
        warn_if_all_outside([["O"]] * tagged[0], gold, input)
    return [Path(output)], (entity_f1(writer.totals) if labelled else {})
