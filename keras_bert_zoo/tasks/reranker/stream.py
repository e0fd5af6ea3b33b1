"""`kbz predict rerank` streamed (`RerankingTask.stream_predictions`): a pairs TSV read
`window` pairs at a time, each window scored (sorted by length inside) and its scores
appended in input order, resumable after a kill (`inference.outputs`). The ranked lists
and metrics gather a query's pairs from anywhere in the file, so they come from a table on
disk once every pair is scored (`ranked_stream`)."""

import os
from pathlib import Path

from keras_bert_zoo.data.line_stream import LineSource, count_lines, first_line
from keras_bert_zoo.data.readers import file_error
from keras_bert_zoo.data.rerank_reader import ranking_header, ranking_pairs
from keras_bert_zoo.finetuning.truncation import full_rows, warn_truncated
from keras_bert_zoo.inference.outputs import StreamOutput, partial_path
from keras_bert_zoo.inference.streaming import Progress, stream
from keras_bert_zoo.saving.atomic import fsync_path
from keras_bert_zoo.tasks.reranker.ranked_stream import ScoredRows, pairs_path
from keras_bert_zoo.tokenization.arrays import packed_arrays
from keras_bert_zoo.training import packed_prediction


def stream_scores(job, predictor, input, output, window, restart, identity, ranked_output):
    """The reranker's scores file and ranked lists (at `ranked_output`) of a pairs TSV, a
    window of pairs at a time, and with labels its metrics (`ranked_stream`)."""
    header, columns, labelled = ranking_header(input, first_line(input), labels_optional=True)
    network, truncated = predictor.network, {}

    def score(pairs):
        x = packed_arrays(
            predictor.preprocessor, [p.query for p in pairs], [p.passage for p in pairs]
        )
        truncated.update(job.token_counts([pairs[i] for i in full_rows(x["padding_mask"])]))
        logits = packed_prediction.predict_outputs(
            network, x, predictor.batch_size, False, packing=predictor.packing
        )
        return pairs, job.predict(None, logits, None)

    def records(source):
        lines = iter(source)
        next(lines)  # the header
        for pair in ranking_pairs(input, lines, len(header), columns):
            yield pair, source.mark()

    writer = ScoredRows(header, pairs_path(output))
    with StreamOutput(output, identity, writer, restart) as out:
        progress = Progress(count_lines(input) - 1, out.rows, "rerank")
        rows = stream(records(LineSource(input)), score, out, window, progress)
        if not rows:
            raise file_error(input, None, "has a header but no pairs", "Check the file.")
        # Under a hidden name until the scores file is complete: a run killed in between
        # finds no side file of its own in the way (`check_prediction_paths`).
        ranked = partial_path(ranked_output)
        metrics = writer.write_ranked(ranked, labelled, job.top_k, input)
    os.replace(ranked, ranked_output)
    fsync_path(ranked.parent)
    pairs_path(output).unlink()  # the file is complete: a rerun starts afresh
    length = predictor.preprocessor.sequence_length
    warn_truncated(input, "pairs", truncated, rows, length)
    return [Path(output), Path(ranked_output)], metrics
