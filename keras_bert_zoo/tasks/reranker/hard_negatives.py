"""Hard negatives for reranker training, mined by a sentence embedder from the file's passages.

For every query of a training file, the passages of the same file that an embedder ranks
closest to it (cosine similarity) and that the file does not already pair with it are added
as pairs labelled 0: the near misses a first-stage retriever returns, which a cross-encoder
must learn to push down (as sentence-transformers' `mine_hard_negatives` with its "top"
sampling). Pairs given in the file keep their labels: a passage labelled 1 for a query is
never mined as its negative, nor is a given negative repeated.

>>> embed = embedding_function("all_minilm_l6_v2")
>>> train = mine_hard_negatives(kbz.data.read_ranking_tsv("train.tsv"), embed, count=3)
"""

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from keras_bert_zoo.data.rerank_reader import RankingData, RankingPair
from keras_bert_zoo.layers.common import check_positive_int
from keras_bert_zoo.presets.factory import from_preset
from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.presets.sources import model_source, run_sequence_length
from keras_bert_zoo.tasks.embedder.spec import EMBEDDER
from keras_bert_zoo.tokenization import BertPreprocessor
from keras_bert_zoo.tokenization.arrays import packed_arrays
from keras_bert_zoo.training import bucketed_prediction

logger = logging.getLogger(__name__)


def embedder_source(source) -> tuple[Path | str, dict]:
    """`(preset, settings)` of `source` (`model_source`): a preset name or directory, or a
    `kbz finetune` run directory (its `preset/` and settings); an error naming
    `--negatives-from` if it is none of them."""
    resolved, settings = model_source(source)
    try:
        load_preset_config(resolved)
    except (ValueError, FileNotFoundError) as error:
        raise ValueError(
            f"--negatives-from {source}: not a preset name, preset directory or kbz finetune "
            f"output directory ({error}). Pass an embedder such as all_minilm_l6_v2 or a "
            "`kbz finetune embed` run."
        ) from error
    return resolved, settings


def embedding_function(source, batch_size: int = 64) -> Callable[[list[str]], np.ndarray]:
    """`embed(texts) -> [len(texts), hidden]` float32 vectors of the embedder `source`, at the
    sequence length of the run that made it or that its preset records (a sentence-transformers
    model's `max_seq_length`), else the default (`presets.sources.run_sequence_length`)."""
    source, settings = embedder_source(source)
    length = run_sequence_length(source, settings=settings)
    embedder = from_preset(source, task=EMBEDDER.name)
    preprocessor = BertPreprocessor.from_preset(source, sequence_length=length)
    buckets = bucketed_prediction.prediction_buckets(embedder, length)

    def embed(texts):
        x = packed_arrays(preprocessor, texts)
        return np.asarray(
            bucketed_prediction.predict(embedder, x, batch_size, buckets, False), np.float32
        )

    return embed


def _normalized(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def mine_hard_negatives(
    dataset: RankingData, embed: Callable[[list[str]], np.ndarray], count: int
) -> RankingData:
    """`dataset` with up to `count` mined negatives per query after its own pairs.

    Args:
        dataset: a labelled training file (`read_ranking_tsv`).
        embed: texts -> vectors (`embedding_function`); ranked by cosine similarity.
        count: negatives added per query (fewer when the file has fewer other passages).

    A mined pair carries the line of its query's first pair in the file.
    """
    check_positive_int("num_negatives", count)
    queries = list(dict.fromkeys(p.query for p in dataset.pairs))
    passages = list(dict.fromkeys(p.passage for p in dataset.pairs))
    paired = {query: set() for query in queries}
    first_line = {}
    for pair in dataset.pairs:
        paired[pair.query].add(pair.passage)
        first_line.setdefault(pair.query, pair.line)
    index = {passage: i for i, passage in enumerate(passages)}
    query_vectors = _normalized(embed(queries))
    passage_vectors = _normalized(embed(passages))
    mined = []
    for begin in range(0, len(queries), 1024):  # a block of similarities at a time
        block = query_vectors[begin : begin + 1024] @ passage_vectors.T
        for query, similarities in zip(queries[begin : begin + 1024], block, strict=True):
            known = [index[p] for p in paired[query]]
            similarities[known] = -np.inf  # the file's own pairs keep their labels
            take = min(count, len(passages) - len(known))
            if take <= 0:
                continue
            top = np.argpartition(-similarities, take - 1)[:take]
            top = top[np.argsort(-similarities[top], kind="stable")]
            mined += [RankingPair(query, passages[i], 0, first_line[query]) for i in top]
    logger.info(
        "Mined %d hard negatives for %d queries from %d passages.",
        len(mined),
        len(queries),
        len(passages),
    )
    return dataclasses.replace(dataset, pairs=[*dataset.pairs, *mined])
