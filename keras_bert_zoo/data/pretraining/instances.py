"""BERT pretraining data: text -> masked-LM / next-sentence instances -> TFRecord shards.

Input is google-research/bert's format: one sentence per line, a blank line between documents
(`input_format="raw"`: paragraphs of wrapped text, split into sentences here; two or more blank
lines end a document). Records use the original feature names and types, so they interoperate
with google-research/bert's `create_pretraining_data.py` and `run_pretraining.py`.

Semantics follow the original, with these documented choices: `masked_lm_prob` applies to the
maskable tokens (not [CLS]/[SEP]); `short_seq_prob` is drawn per instance; a true next segment
is always possible (a lone sentence takes the next one, or is split), so NSP labels are 50/50;
random replacement tokens exclude bracketed special tokens; whole words never span [SEP];
random next segments come from another document of the same input file (as when the original
runs once per shard), so input files are processed in parallel.
`next_sentence_labels`: 0 = B really follows A, 1 = B is from another document (original).

>>> instances = file_instances(documents, range(len(documents)), InstanceConfig(), vocab, 2, 0)
"""

import dataclasses
import logging
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from keras_bert_zoo.data.pretraining import text

logger = logging.getLogger(__name__)

TokenizeLines = Callable[[list], list]


class Instance(NamedTuple):
    """One training pair, unpadded: `[CLS] A [SEP] B [SEP]` ids after masking."""

    token_ids: np.ndarray
    segment_ids: np.ndarray
    masked_positions: np.ndarray
    masked_ids: np.ndarray
    is_random_next: bool


@dataclasses.dataclass(frozen=True)
class InstanceConfig:
    """The instance-building flags, with google-research/bert's names and defaults."""

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False

    def __post_init__(self):
        checks = {
            "max_seq_length": self.max_seq_length >= 5,
            "max_predictions_per_seq": self.max_predictions_per_seq >= 1,
            "masked_lm_prob": 0.0 < self.masked_lm_prob <= 1.0,
            "short_seq_prob": 0.0 <= self.short_seq_prob <= 1.0,
        }
        for flag, ok in checks.items():
            if not ok:
                raise ValueError(
                    f"--{flag}={getattr(self, flag)!r} is out of range (need "
                    "max_seq_length >= 5, max_predictions_per_seq >= 1, "
                    "0 < masked_lm_prob <= 1, 0 <= short_seq_prob <= 1)."
                )


def mask_tokens(
    token_ids: np.ndarray,
    vocab: text.VocabularyInfo,
    config: InstanceConfig,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Picks ~masked_lm_prob of the maskable tokens; 80% -> [MASK], 10% random, 10% kept.

    Returns (masked ids, sorted positions, original ids at those positions).

    >>> ids, positions, labels = mask_tokens(ids, vocab, InstanceConfig(), rng)
    """
    candidates = np.flatnonzero(~vocab.unselectable[token_ids])
    budget = min(
        config.max_predictions_per_seq, max(1, int(round(len(candidates) * config.masked_lm_prob)))
    )
    if config.do_whole_word_mask:
        continues = vocab.is_subword[token_ids[candidates[1:]]] & (np.diff(candidates) == 1)
        words = np.split(candidates, np.flatnonzero(~continues) + 1)
        chosen: list = []
        for w in rng.permutation(len(words)):
            if len(chosen) + len(words[w]) <= budget:  # a word that does not fit is skipped
                chosen.extend(words[w])
            if len(chosen) == budget:
                break
        positions = np.sort(np.asarray(chosen, dtype=np.int64))
    else:
        positions = np.sort(rng.permutation(candidates)[:budget])
    labels = token_ids[positions]
    roll = rng.random(len(positions))
    masked = token_ids.copy()
    masked[positions[roll < 0.8]] = vocab.mask_id
    randomized = positions[(roll >= 0.8) & (roll < 0.9)]
    masked[randomized] = rng.choice(vocab.random_ids, size=len(randomized))
    return masked, positions, labels


def _trim(tokens: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    front = int(rng.binomial(count, 0.5)) if count else 0  # each removal: front or back
    return tokens[front : len(tokens) - (count - front)]


def truncate_pair(
    a: np.ndarray, b: np.ndarray, max_num_tokens: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Shortens the longer segment first (ties: A), from a random end, until both fit."""
    excess = len(a) + len(b) - max_num_tokens
    if excess <= 0:
        return a, b
    difference = len(a) - len(b)
    if abs(difference) >= excess:
        cut_a, cut_b = (excess, 0) if difference > 0 else (0, excess)
    else:
        rest = excess - abs(difference)
        cut_a, cut_b = max(difference, 0) + (rest + 1) // 2, max(-difference, 0) + rest // 2
    return _trim(a, cut_a, rng), _trim(b, cut_b, rng)


def _random_segment(documents: list, index: int, target: int, rng) -> np.ndarray:
    other = int(rng.integers(len(documents) - 1))
    document = documents[other + (other >= index)]  # any document but this one
    pieces, total = [], 0
    for sentence in document[int(rng.integers(len(document))) :]:
        pieces.append(sentence)
        total += len(sentence)
        if total >= target:
            break
    return np.concatenate(pieces)


def _target_length(config: InstanceConfig, rng) -> int:
    longest = config.max_seq_length - 3
    return int(rng.integers(2, longest + 1)) if rng.random() < config.short_seq_prob else longest


def _make_instance(a, b, is_random, config, vocab, rng) -> Instance:
    a, b = truncate_pair(a, b, config.max_seq_length - 3, rng)
    ids = np.concatenate([[vocab.cls_id], a, [vocab.sep_id], b, [vocab.sep_id]]).astype(np.int32)
    segments = np.zeros(len(ids), np.int32)
    segments[len(a) + 2 :] = 1
    masked, positions, labels = mask_tokens(ids, vocab, config, rng)
    return Instance(masked, segments, positions.astype(np.int32), labels, bool(is_random))


def instances_from_document(
    documents: list,
    index: int,
    config: InstanceConfig,
    vocab: text.VocabularyInfo,
    rng: np.random.Generator,
) -> list:
    """Packs consecutive sentences of `documents[index]` into A/B pairs, then masks them.

    `documents`: list of documents, each a list of sentences (int32 id arrays); needs >= 2.
    """
    document, instances = documents[index], []
    chunk, length, i, target = [], 0, 0, _target_length(config, rng)
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = int(rng.integers(1, len(chunk))) if len(chunk) > 1 else 1
            a = np.concatenate(chunk[:a_end])
            is_random = bool(rng.random() < 0.5)
            if not is_random and len(chunk) == 1:  # B must be the real continuation
                if i + 1 < len(document):
                    i += 1
                    chunk.append(document[i])
                elif len(a) > 1:
                    cut = int(rng.integers(1, len(a)))
                    a, chunk = a[:cut], [a[:cut], a[cut:]]
                else:
                    is_random = True
            if is_random:
                b = _random_segment(documents, index, target - len(a), rng)
                i -= len(chunk) - a_end  # the unused sentences start the next pair
            else:
                b = np.concatenate(chunk[a_end:])
            instances.append(_make_instance(a, b, is_random, config, vocab, rng))
            chunk, length, target = [], 0, _target_length(config, rng)
        i += 1
    return instances


def check_documents(documents: list, source: str) -> None:
    """Clear errors for inputs that cannot make next-sentence pairs."""
    if len(documents) < 2:
        raise ValueError(
            f"{source}: found {len(documents)} document(s); next-sentence "
            "prediction needs at least 2. Separate documents with a blank line."
        )
    if all(len(document) == 1 for document in documents):
        raise ValueError(
            f"{source}: every document has a single sentence. Expected one "
            "sentence per line with blank lines only between documents; for "
            "running text pass --input_format raw."
        )


def file_instances(
    pool: list, indices, config: InstanceConfig, vocab: text.VocabularyInfo, dupe_factor: int, seed
) -> list:
    """`dupe_factor` passes (new pairs and masks each) over `pool[i]` for i in `indices`.

    Random next segments come from other documents of `pool`.

    >>> instances = file_instances(docs, range(len(docs)), InstanceConfig(), vocab, 2, seed=0)
    """
    rng = np.random.default_rng(seed)
    return [
        instance
        for _ in range(dupe_factor)
        for index in indices
        for instance in instances_from_document(pool, index, config, vocab, rng)
    ]


def document_chunks(documents: list, config: InstanceConfig, rng: np.random.Generator) -> list:
    """Static segmentation for dynamic masking: `(document, first, stop, target)` per pair.

    The sentences of each document are grouped as `instances_from_document` groups them
    (consecutive sentences up to a random target length), once. `instance_from_chunk` then
    makes a fresh A/B split, next-sentence choice and masks from each chunk on every pass,
    with an rng of its own, so any instance of any pass is computed without the ones before
    it (resume positions the stream in constant time). Unlike the offline generator, the
    sentences after A of a random-next pair are not put back to start the next pair.
    """
    chunks = []
    for index, document in enumerate(documents):
        first, length, target = 0, 0, _target_length(config, rng)
        for i, sentence in enumerate(document):
            length += len(sentence)
            if i == len(document) - 1 or length >= target:
                chunks.append((index, first, i + 1, target))
                first, length, target = i + 1, 0, _target_length(config, rng)
    return chunks


def instance_from_chunk(
    documents: list, chunk: tuple, config: InstanceConfig, vocab: text.VocabularyInfo, rng
) -> Instance:
    """One pair from a `document_chunks` chunk, with the offline generator's choices."""
    index, first, stop, target = chunk
    document = documents[index]
    sentences = document[first:stop]
    a_end = int(rng.integers(1, len(sentences))) if len(sentences) > 1 else 1
    a = np.concatenate(sentences[:a_end])
    is_random = bool(rng.random() < 0.5)
    if not is_random and len(sentences) == 1:  # B must be the real continuation
        if stop < len(document):
            sentences = [*sentences, document[stop]]
        elif len(a) > 1:
            cut = int(rng.integers(1, len(a)))
            a, sentences = a[:cut], [a[:cut], a[cut:]]
        else:
            is_random = True
    if is_random:
        b = _random_segment(documents, index, target - len(a), rng)
    else:
        b = np.concatenate(sentences[a_end:])
    return _make_instance(a, b, is_random, config, vocab, rng)
