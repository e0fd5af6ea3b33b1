"""SQuAD features: sliding windows over the context (answers back from logits: `squad_answers`).

Follows google-research/bert `run_squad.py`: the question is cut to `max_query_length`
tokens; the context is covered by windows of `max_seq_length - len(query) - 3` tokens moving
by `doc_stride`; each window is `[CLS] query [SEP] context-window [SEP]`; a token lying in
several windows is scored only in the window where it has the most context on both sides
(`token_is_max_context`). Training targets are the answer's first and last sub-words, or 0
(`[CLS]`) when the answer is not wholly inside the window or the question is unanswerable.
Instead of run_squad's whitespace-token bookkeeping, tokens carry character offsets, so
predicted answers are exact substrings of the context.

The tokenizer is any callable `tokenize(text) -> [(token_id, char_start, char_end), ...]`
(end exclusive); a BERT tokenizer splits on whitespace first, so tokenizing the whole context
equals run_squad's per-word sub-tokenization.

>>> import keras_bert_zoo as kbz
>>> examples = kbz.data.read_squad("examples/data/squad_heldout_sample.json")
>>> features = kbz.data.build_squad_features(examples, tokenize, cls_id=101, sep_id=102)
"""

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from keras_bert_zoo.data.squad_reader import SquadExample

Tokenize = Callable[[str], Sequence[tuple[int, int, int]]]


@dataclasses.dataclass
class SquadFeatures:
    """Model inputs and targets (int32 `[num_features, max_seq_length]` / `[num_features]`)
    plus what post-processing needs: the example each feature came from, each token's
    `(char_start, char_end)` in the context (`-1` for question, special and padding tokens)
    and whether a window is the token's max-context window."""

    token_ids: np.ndarray
    segment_ids: np.ndarray
    padding_mask: np.ndarray
    start_positions: np.ndarray
    end_positions: np.ndarray
    example_index: np.ndarray
    token_offsets: np.ndarray
    token_is_max_context: np.ndarray

    def __len__(self) -> int:
        return len(self.token_ids)

    def inputs(self) -> dict[str, np.ndarray]:
        """The encoder inputs: `token_ids`, `segment_ids`, `padding_mask`."""
        return {
            "token_ids": self.token_ids,
            "segment_ids": self.segment_ids,
            "padding_mask": self.padding_mask,
        }


def _tokenize_context(tokenize: Tokenize, context: str) -> tuple[np.ndarray, np.ndarray]:
    tokens = list(tokenize(context))
    ids = np.array([t[0] for t in tokens], np.int32)
    offsets = np.array([t[1:3] for t in tokens], np.int32).reshape(-1, 2)
    if len(offsets) and (
        offsets.min() < 0 or offsets.max() > len(context) or np.any(offsets[:, 1] < offsets[:, 0])
    ):
        raise ValueError(
            "`tokenize` must return (token_id, char_start, char_end) with "
            f"0 <= char_start <= char_end <= len(text); got {offsets.tolist()[:8]}"
            f"... for {context[:60]!r}."
        )
    return ids, offsets


def _answer_tokens(example: SquadExample, offsets: np.ndarray) -> tuple[int, int] | None:
    """First and last context tokens overlapping the first answer's characters."""
    if example.is_impossible or not example.answers:
        return None
    answer = example.answers[0]
    inside = np.flatnonzero(
        (offsets[:, 1] > answer.start) & (offsets[:, 0] < answer.start + len(answer.text))
    )
    return (int(inside[0]), int(inside[-1])) if len(inside) else None


def doc_spans(num_tokens: int, window: int, doc_stride: int) -> list[tuple[int, int]]:
    """run_squad's `(start, length)` windows over `num_tokens` context tokens.

    >>> kbz.data.doc_spans(10, 4, 3)
    [(0, 4), (3, 4), (6, 4)]
    """
    spans, start = [], 0
    while start < num_tokens:
        length = min(num_tokens - start, window)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def max_context_flags(spans: Sequence[tuple[int, int]], num_tokens: int) -> np.ndarray:
    """bool `[num_spans, num_tokens]`: the span where each token has the most context,
    score `min(left, right) + 0.01 * span_length`, the first span winning ties."""
    scores = np.full([len(spans), num_tokens], -np.inf)
    for index, (start, length) in enumerate(spans):
        position = np.arange(start, start + length)
        scores[index, position] = (
            np.minimum(position - start, start + length - 1 - position) + 0.01 * length
        )
    best = scores.argmax(axis=0) if len(spans) else np.zeros([num_tokens], np.int64)
    return np.arange(len(spans))[:, None] == best[None, :]


def build_squad_features(
    examples: Sequence[SquadExample],
    tokenize: Tokenize,
    *,
    cls_id: int,
    sep_id: int,
    pad_id: int = 0,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
) -> SquadFeatures:
    """Tokenizes questions and contexts and cuts them into windows (see the module docstring).

    >>> features = kbz.data.build_squad_features(examples, tokenize, cls_id=101, sep_id=102)
    >>> model.fit(features.inputs(), (features.start_positions, features.end_positions))
    """
    if max_seq_length - max_query_length - 3 < 1 or doc_stride < 1:
        raise ValueError(
            f"Need max_seq_length - max_query_length - 3 >= 1 and doc_stride >= 1; "
            f"received {max_seq_length}, {max_query_length}, {doc_stride}."
        )
    cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    rows = []
    for example_index, example in enumerate(examples):
        query = [t[0] for t in tokenize(example.question)][:max_query_length]
        if example.context not in cache:
            cache[example.context] = _tokenize_context(tokenize, example.context)
        ids, offsets = cache[example.context]
        spans = doc_spans(len(ids), max_seq_length - len(query) - 3, doc_stride)
        flags = max_context_flags(spans, len(ids))
        answer = _answer_tokens(example, offsets)
        for span_index, (start, length) in enumerate(spans):
            rows.append(
                _window(
                    query,
                    ids[start : start + length],
                    offsets[start : start + length],
                    flags[span_index, start : start + length],
                    answer,
                    start,
                    example_index,
                    (cls_id, sep_id, pad_id, max_seq_length),
                )
            )
    return _stack(rows, max_seq_length)


def _window(query, ids, offsets, is_max_context, answer, start, example_index, layout) -> dict:
    cls_id, sep_id, pad_id, max_seq_length = layout
    first = len(query) + 2  # position of the first context token
    tokens = [cls_id, *query, sep_id, *ids.tolist(), sep_id]
    padding = max_seq_length - len(tokens)
    token_offsets = np.full([max_seq_length, 2], -1, np.int32)
    token_offsets[first : first + len(ids)] = offsets
    max_context = np.zeros([max_seq_length], bool)
    max_context[first : first + len(ids)] = is_max_context
    positions = (0, 0)
    if answer is not None and start <= answer[0] and answer[1] < start + len(ids):
        positions = (answer[0] - start + first, answer[1] - start + first)
    return {
        "token_ids": tokens + [pad_id] * padding,
        "segment_ids": [0] * first + [1] * (len(ids) + 1) + [0] * padding,
        "padding_mask": [1] * len(tokens) + [0] * padding,
        "start_positions": positions[0],
        "end_positions": positions[1],
        "example_index": example_index,
        "token_offsets": token_offsets,
        "token_is_max_context": max_context,
    }


def _stack(rows: list[dict], max_seq_length: int) -> SquadFeatures:
    length = [max_seq_length]
    shapes = {
        "token_ids": length,
        "segment_ids": length,
        "padding_mask": length,
        "start_positions": [],
        "end_positions": [],
        "example_index": [],
        "token_offsets": [max_seq_length, 2],
        "token_is_max_context": length,
    }
    return SquadFeatures(
        **{
            name: np.array(
                [row[name] for row in rows], bool if name == "token_is_max_context" else np.int32
            ).reshape([len(rows), *shape])
            for name, shape in shapes.items()
        }
    )
