"""Word-level tags to sub-word model inputs, and predictions back to words.

Each word's label goes on its first sub-word; the other sub-words, `[CLS]`, `[SEP]` and
padding get `ignore_label` (masked out of the loss and the metrics). Sentences longer than
`sequence_length - 2` sub-words are truncated on a word boundary; truncated words are
predicted as `fill_label` (the `O` tag, id 0) when mapping back, so gold entities in them
still count as misses. The tokenizer is any callable `tokenize_word(word) -> list[int]`.

>>> import keras_bert_zoo as kbz
>>> row = kbz.data.align_labels([[7], [8, 9]], [1, 2], 6, cls_id=2, sep_id=3)
>>> row["labels"].tolist()
[-100, 1, 2, -100, -100, -100]
"""

from collections.abc import Callable, Sequence

import numpy as np


def align_labels(
    word_pieces: Sequence[Sequence[int]],
    word_labels: Sequence[int],
    sequence_length: int,
    *,
    cls_id: int,
    sep_id: int,
    pad_id: int = 0,
    unk_id: int | None = None,
    ignore_label: int = -100,
) -> dict[str, np.ndarray]:
    """One sentence: `[CLS] pieces... [SEP] [PAD]...` with each label on its word's first piece.

    Returns int32 arrays of length `sequence_length`: `token_ids`, `segment_ids` (zeros),
    `padding_mask`, `labels` and `word_index` (the word whose first piece is there, else -1).
    A word with no pieces becomes `[unk_id]` (or raises when `unk_id` is None).

    >>> kbz.data.align_labels([[7], [8, 9]], [1, 2], 6, cls_id=2, sep_id=3)["word_index"]
    array([-1,  0,  1, -1, -1, -1], dtype=int32)
    """
    if len(word_pieces) != len(word_labels):
        raise ValueError(
            f"Got {len(word_pieces)} words but {len(word_labels)} labels; give one label per word."
        )
    if sequence_length < 3:
        raise ValueError(f"sequence_length must be at least 3; received {sequence_length}.")
    token_ids, labels, word_index = [cls_id], [ignore_label], [-1]
    budget = sequence_length - 2
    for index, (pieces, label) in enumerate(zip(word_pieces, word_labels, strict=True)):
        pieces = list(pieces)
        if not pieces:
            if unk_id is None:
                raise ValueError(
                    f"Word {index} has no sub-word pieces; pass `unk_id` to "
                    "stand in for such words."
                )
            pieces = [unk_id]
        if len(pieces) > budget - (len(token_ids) - 1):
            if index == 0:  # a single over-long first word: keep its first pieces
                pieces = pieces[:budget]
            else:
                break
        token_ids += pieces
        labels += [label] + [ignore_label] * (len(pieces) - 1)
        word_index += [index] + [-1] * (len(pieces) - 1)
    token_ids.append(sep_id)
    labels.append(ignore_label)
    word_index.append(-1)
    padding = sequence_length - len(token_ids)
    return {
        "token_ids": np.array(token_ids + [pad_id] * padding, np.int32),
        "segment_ids": np.zeros([sequence_length], np.int32),
        "padding_mask": np.array([1] * len(token_ids) + [0] * padding, np.int32),
        "labels": np.array(labels + [ignore_label] * padding, np.int32),
        "word_index": np.array(word_index + [-1] * padding, np.int32),
    }


def encode_tagged(
    sentences: Sequence[Sequence[str]],
    tokenize_word: Callable[[str], list[int]],
    sequence_length: int,
    *,
    cls_id: int,
    sep_id: int,
    tag_ids: Sequence[Sequence[int]] | None = None,
    pad_id: int = 0,
    unk_id: int | None = None,
    ignore_label: int = -100,
) -> dict[str, np.ndarray]:
    """Many sentences (lists of words) to `[num_sentences, sequence_length]` int32 arrays, as in
    `align_labels`; without `tag_ids` (inference) every label is `ignore_label`.

    >>> data = kbz.data.read_conll("examples/data/wnut17_dev_sample.conll")
    >>> batch = kbz.data.encode_tagged([s.words for s in data.sentences], tokenize_word, 128,
    ...                                cls_id=101, sep_id=102, tag_ids=data.tag_ids, unk_id=100)
    """
    if tag_ids is not None and len(tag_ids) != len(sentences):
        raise ValueError(f"Got {len(sentences)} sentences but {len(tag_ids)} tag sequences.")
    cache: dict[str, list[int]] = {}
    rows = []
    for index, words in enumerate(sentences):
        pieces = [
            cache[w] if w in cache else cache.setdefault(w, list(tokenize_word(w))) for w in words
        ]
        labels = tag_ids[index] if tag_ids is not None else [ignore_label] * len(words)
        try:
            rows.append(
                align_labels(
                    pieces,
                    labels,
                    sequence_length,
                    cls_id=cls_id,
                    sep_id=sep_id,
                    pad_id=pad_id,
                    unk_id=unk_id,
                    ignore_label=ignore_label,
                )
            )
        except ValueError as error:
            raise ValueError(f"Sentence {index} ({' '.join(words)[:60]!r}): {error}") from None
    keys = ("token_ids", "segment_ids", "padding_mask", "labels", "word_index")
    return {
        key: np.array([row[key] for row in rows], np.int32).reshape(-1, sequence_length)
        for key in keys
    }


def word_predictions(
    token_predictions: np.ndarray,
    word_index: np.ndarray,
    num_words: Sequence[int],
    fill_label: int = 0,
) -> list[list[int]]:
    """Per-token predictions (ids `[N, L]` or logits `[N, L, C]`) to one label per word, read at
    each word's first sub-word; words cut off by truncation get `fill_label`.

    >>> kbz.data.word_predictions(np.array([[0, 4, 5, 6]]), np.array([[-1, 0, -1, 1]]), [3])
    [[4, 6, 0]]
    """
    predictions, word_index = np.asarray(token_predictions), np.asarray(word_index)
    if predictions.ndim == 3:
        predictions = predictions.argmax(axis=-1)
    if predictions.shape != word_index.shape or len(num_words) != len(word_index):
        raise ValueError(
            f"token_predictions {predictions.shape}, word_index {word_index.shape} "
            f"and num_words ({len(num_words)}) must describe the same batch."
        )
    results = []
    for row_predictions, row_index, count in zip(predictions, word_index, num_words, strict=True):
        words = np.full([count], fill_label, dtype=np.int64)
        positions = np.flatnonzero((row_index >= 0) & (row_index < count))
        words[row_index[positions]] = row_predictions[positions]
        results.append(words.tolist())
    return results
