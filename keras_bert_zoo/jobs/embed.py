"""Sentence vectors of texts: `embed_texts`, and `run_embed`, the job behind `kbz embed`.

The model is any preset (a name or a directory) or a `kbz finetune embed` output directory,
built with `task="embedder"`: a sentence-transformers checkpoint converted with
`kbz convert` pools and truncates as it was trained (its preset records the pooling and
`max_seq_length`), any other preset gets masked mean pooling and L2 normalisation.
`run_embed` runs it in Keras or, exported once, in ONNX Runtime or OpenVINO, in float32 or
int8 (`keras_bert_zoo.runtimes`).
"""

import logging
from pathlib import Path

import numpy as np

from keras_bert_zoo.data.line_stream import LineSource, count_lines
from keras_bert_zoo.inference.outputs import NpyRows, StreamOutput
from keras_bert_zoo.inference.streaming import DEFAULT_WINDOW, Progress, stream
from keras_bert_zoo.jobs.checks import check_apart, input_file, output_file
from keras_bert_zoo.jobs.streaming import model_identity
from keras_bert_zoo.layers.common import check_positive_int
from keras_bert_zoo.presets.factory import from_preset
from keras_bert_zoo.presets.sources import model_source, run_sequence_length
from keras_bert_zoo.ranking_metrics import retrieval_ranks, retrieval_scores
from keras_bert_zoo.runtimes import DEFAULT_PRECISION, DEFAULT_RUNTIME
from keras_bert_zoo.runtimes.loading import check_runtime, load_runner
from keras_bert_zoo.tasks.embedder.spec import EMBEDDER
from keras_bert_zoo.tokenization import BertPreprocessor
from keras_bert_zoo.tokenization.arrays import packed_arrays
from keras_bert_zoo.training import batching, packed_prediction

logger = logging.getLogger(__name__)


def load_embedder(model, sequence_length: int | None = None, **task_kwargs):
    """`(embedder, preprocessor)` of a preset name or directory, or a run directory.

    >>> embedder, pre = kbz.jobs.load_embedder("minilm_preset")
    """
    source, preprocessor = embedding_preprocessor(model, sequence_length)
    return from_preset(source, task=EMBEDDER.name, **task_kwargs), preprocessor


def embedding_preprocessor(model, sequence_length: int | None = None):
    """`(preset, preprocessor)` of a preset name or directory, or a run directory: the
    sequence length given, else the run's, else the preset's, else 128."""
    source, settings = model_source(model)  # a run directory: its preset/ and settings
    length = run_sequence_length(source, sequence_length, settings)
    check_positive_int("sequence_length", length)
    return source, BertPreprocessor.from_preset(source, sequence_length=length)


def embed_texts(embedder, preprocessor, texts, batch_size: int = 64) -> np.ndarray:
    """`[len(texts), hidden]` float32 vectors, in the order of `texts`.

    All texts are tokenized at once, then embedded sorted by length in batches trimmed to
    their length bucket (`bucketed_prediction.predict`): a corpus of short questions and long
    paragraphs is not padded to the longest text. Texts longer than the preprocessor's
    `sequence_length` are truncated (logged with a count, never silently).

    >>> vectors = kbz.jobs.embed_texts(embedder, pre, ["A sentence.", "Another one."])
    """
    check_positive_int("batch_size", batch_size)
    texts = [str(t) for t in texts]
    vectors, full = embed_window(embedder, preprocessor, texts, batch_size)
    warn_full(full, len(texts), preprocessor.sequence_length)
    return vectors


def embed_window(
    embedder, preprocessor, texts, batch_size: int, packing=packed_prediction.AUTO
) -> tuple[np.ndarray, int]:
    """`(vectors, how many texts fill every token position)` of a list of texts: the
    streaming engine's window, which warns once for the whole input; a Keras embedder's
    texts packed several to a row (`packing`, `training.packed_prediction`)."""
    if not texts:
        return np.zeros((0, embedder.output_shape[-1]), np.float32), 0
    x = _packed(preprocessor, texts)
    full = int(np.sum(batching.real_lengths(x) == preprocessor.sequence_length))
    vectors = packed_prediction.predict_outputs(embedder, x, batch_size, False, packing=packing)
    return np.asarray(vectors, np.float32), full


def warn_full(full: int, count: int, length: int) -> None:
    if full:
        logger.warning(
            "%d of %d texts fill all %d token positions and may be truncated; a larger "
            "sequence_length (--sequence-length) keeps more of them.",
            full,
            count,
            length,
        )


def _packed(preprocessor, texts, chunk: int = 4096) -> dict:
    """The preprocessor's numpy inputs of `texts`, tokenized a chunk at a time."""
    parts = [packed_arrays(preprocessor, texts[i : i + chunk]) for i in range(0, len(texts), chunk)]
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def recall_at_k(query_vectors, index_vectors, targets, ks=(1, 5)) -> dict:
    """Retrieval recall: the share of queries whose target row of the index ranks in the top k
    by dot product (cosine similarity for normalised vectors); also the mean reciprocal rank.

    >>> kbz.jobs.recall_at_k(questions, paragraphs, paragraph_of_question)
    {'recall@1': 0.62, 'recall@5': 0.88, 'mrr': 0.73}
    """
    return retrieval_scores(retrieval_ranks(query_vectors, index_vectors, targets), ks)


def run_embed(
    model,
    input,
    output,
    batch_size: int = 64,
    sequence_length: int | None = None,
    window: int = DEFAULT_WINDOW,
    restart: bool = False,
    runtime: str = DEFAULT_RUNTIME,
    precision: str = DEFAULT_PRECISION,
    packing=None,
) -> dict:
    """Embeds each line of `input` (one vector per line, blank lines too) into `output` .npy,
    streaming: `window` lines at a time are read, sorted by length, embedded and written
    into the preallocated file, so memory holds one window, never the input; a killed run
    continues where it stopped when the same command runs again (`inference.outputs`).

    Args:
        model: a preset name or directory, or a `kbz finetune embed` output directory.
        input: a UTF-8 text file, one text per line (gzip read transparently).
        output: the `.npy` file to write (float32 `[lines, hidden]`); it appears complete
            or not at all (an existing file is replaced at the end).
        sequence_length: tokens per text (default: the run's own, else the length the
            preset records, such as a sentence-transformers model's `max_seq_length`, else 128).
        window: lines held in memory at once (and sorted by length for bucketing).
        restart: discard an unfinished output and start afresh (by default the same
            command continues it, and a different run is refused).
        runtime: "keras", "onnx" or "openvino" (`keras_bert_zoo.runtimes`; the exported ones
            are written once into the cache and reused).
        precision: "float32" or "int8"; an int8 model is checked against float32 on rows of
            `input` when it is written, and a loss above the tolerance is a warning.
        packing: texts packed several to a row of the longest one's length, each pooled
            over its own tokens (`training.packed_prediction`: the same vectors, almost no
            padding); True, False or None ("auto": on where it was measured faster, with
            the Keras runtime; True with another runtime is an error).

    >>> kbz.jobs.run_embed("minilm_preset", "sentences.txt", "vectors.npy")
    """
    output = Path(output)
    output_file("--output", output, "the .npy file of vectors", "vectors.npy")
    if output.suffix != ".npy":
        raise ValueError(f"--output must be a .npy file. Received: {output}")
    check_positive_int("batch_size", batch_size)
    check_positive_int("window", window)
    packing = packed_prediction.check_packing(packing, runtime == DEFAULT_RUNTIME)
    check_runtime(runtime, precision, model, EMBEDDER.name)
    check_apart({"--output": output}, {"--input": input, "--model": model})
    path = input_file("--input", input, "a text file, one text per line")
    rows = count_lines(path)
    if not rows:
        raise ValueError(f"--input {path} is empty. Pass a text file with one text per line.")
    source, preprocessor = embedding_preprocessor(model, sequence_length)
    sample = None  # int8 only: the rows it calibrates on and is checked against float32 with
    if precision != DEFAULT_PRECISION:
        sample = _packed(preprocessor, _first_lines(path, _SAMPLE_ROWS))
    embedder = load_runner(source, EMBEDDER.name, runtime, precision, sample=sample)
    width = _width(embedder, preprocessor)
    length = preprocessor.sequence_length
    identity = {
        "command": "embed",
        "model": model_identity(model),
        "runtime": runtime,
        "precision": precision,
        "sequence_length": length,
        "batch_size": batch_size,
        "window": window,
        "rows": rows,
    }
    source, full = LineSource(path), [0]

    def embed(texts):
        vectors, count = embed_window(embedder, preprocessor, texts, batch_size, packing)
        full[0] += count
        return vectors

    records = ((text, source.mark()) for _, text in source)
    with StreamOutput(output, identity, NpyRows(rows, width), restart) as out:
        progress = Progress(rows, out.rows, f"embed [{runtime} {precision}]", unit="text")
        try:
            stream(records, embed, out, window, progress)
        except ValueError as error:  # a malformed line: named with its flag, as everywhere
            if str(error).startswith(str(path)):
                raise ValueError(f"--input {error}") from None
            raise
    warn_full(full[0], rows, length)
    result = {"file": str(output), "shape": [rows, width], **embedder.task_config}
    return {**result, "runtime": runtime, "precision": precision}


_SAMPLE_ROWS = 1000  # rows an int8 export calibrates and is checked on (runtimes.loading)


def _width(embedder, preprocessor) -> int:
    """The vectors' width: a Keras model's output shape, else one text run (a runtime's)."""
    if hasattr(embedder, "output_shape"):
        return embedder.output_shape[-1]
    return np.asarray(embedder.predict(_packed(preprocessor, [""]))).shape[-1]


def _first_lines(path, count: int) -> list[str]:
    """Up to `count` lines from the start; a malformed line ends the sample early (the
    streaming pass reports it with its number, after the rows before it are written)."""
    texts = []
    try:
        for _, text in LineSource(path):
            texts.append(text)
            if len(texts) == count:
                break
    except ValueError:
        pass
    return texts or [""]
