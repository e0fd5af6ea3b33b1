"""Sentence vectors of texts: `embed_texts`, and `run_embed`, the job behind `kbz embed`.

The model is any preset (a name or a directory) or a `kbz finetune embed` output directory,
built with `task="embedder"`: a sentence-transformers checkpoint converted with
`kbz convert` pools and truncates as it was trained (its preset records the pooling and
`max_seq_length`), any other preset gets masked mean pooling and L2 normalisation.
"""

import logging
from pathlib import Path

import numpy as np

from keras_bert_zoo.data.readers import open_text
from keras_bert_zoo.jobs.checks import input_file, output_file
from keras_bert_zoo.layers.common import check_positive_int
from keras_bert_zoo.presets.factory import from_preset
from keras_bert_zoo.presets.sources import model_source, run_sequence_length
from keras_bert_zoo.ranking_metrics import retrieval_ranks, retrieval_scores
from keras_bert_zoo.saving.atomic import staged_file
from keras_bert_zoo.tokenization import BertPreprocessor
from keras_bert_zoo.tokenization.arrays import packed_arrays
from keras_bert_zoo.training import batching, bucketed_prediction

logger = logging.getLogger(__name__)


def load_embedder(model, sequence_length: int | None = None, **task_kwargs):
    """`(embedder, preprocessor)` of a preset name or directory, or a run directory.

    >>> embedder, pre = kbz.jobs.load_embedder("minilm_preset")
    """
    source, settings = model_source(model)  # a run directory: its preset/ and settings
    length = run_sequence_length(source, sequence_length, settings)
    check_positive_int("sequence_length", length)
    embedder = from_preset(source, task="embedder", **task_kwargs)
    return embedder, BertPreprocessor.from_preset(source, sequence_length=length)


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
    if not texts:
        return np.zeros((0, embedder.output_shape[-1]), np.float32)
    x = _packed(preprocessor, texts)
    length = preprocessor.sequence_length
    full = int(np.sum(batching.real_lengths(x) == length))
    if full:
        logger.warning(
            "%d of %d texts fill all %d token positions and may be truncated; a larger "
            "sequence_length (--sequence-length) keeps more of them.",
            full,
            len(texts),
            length,
        )
    buckets = bucketed_prediction.prediction_buckets(embedder, length)
    vectors = bucketed_prediction.predict(embedder, x, batch_size, buckets, False, label="embed")
    return np.asarray(vectors, np.float32)


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


def read_lines(path, flag: str = "--input") -> list[str]:
    """The lines of a UTF-8 text file (one text per line; gzip read transparently), or an
    error naming `flag`."""
    path = input_file(flag, path, "a text file, one text per line")
    with open_text(path) as handle:
        lines = handle.read().splitlines()
    if not lines:
        raise ValueError(f"{flag} {path} is empty. Pass a text file with one text per line.")
    return lines


def run_embed(
    model,
    input,
    output,
    batch_size: int = 64,
    sequence_length: int | None = None,
) -> dict:
    """Embeds each line of `input` (one vector per line, blank lines too) into `output` .npy.

    Args:
        model: a preset name or directory, or a `kbz finetune embed` output directory.
        input: a UTF-8 text file, one text per line.
        output: the `.npy` file to write (float32 `[lines, hidden]`), written atomically
            (an existing file is replaced).
        sequence_length: tokens per text (default: the run's own, else the length the
            preset records, such as a sentence-transformers model's `max_seq_length`, else 128).

    >>> kbz.jobs.run_embed("minilm_preset", "sentences.txt", "vectors.npy")
    """
    output = Path(output)
    output_file("--output", output, "the .npy file of vectors", "vectors.npy")
    if output.suffix != ".npy":
        raise ValueError(f"--output must be a .npy file. Received: {output}")
    check_positive_int("batch_size", batch_size)
    texts = read_lines(input)
    embedder, preprocessor = load_embedder(model, sequence_length)
    vectors = embed_texts(embedder, preprocessor, texts, batch_size)
    with staged_file(output) as temporary:
        with open(temporary, "wb") as file:
            np.save(file, vectors)
    return {"file": str(output), "shape": list(vectors.shape), **embedder.task_config}
