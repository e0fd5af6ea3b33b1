"""Word-level labels on the first sub-word, truncation on word boundaries, and back to words."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_bert_zoo import data, metrics

CLS, SEP, PAD, UNK, IGNORE = 2, 3, 0, 1, -100
DATA = Path(__file__).parent / "data" / "finetune"


def align(pieces, labels, length, **kwargs):
    return data.align_labels(pieces, labels, length, cls_id=CLS, sep_id=SEP, pad_id=PAD, **kwargs)


def test_words_split_into_several_sub_words():
    # "Empire" -> 1 piece, "Statesman" -> 3 pieces, "Building" -> 2 pieces
    row = align([[10], [11, 12, 13], [14, 15]], [1, 2, 0], 10)
    assert row["token_ids"].tolist() == [CLS, 10, 11, 12, 13, 14, 15, SEP, PAD, PAD]
    assert row["labels"].tolist() == [
        IGNORE,
        1,
        2,
        IGNORE,
        IGNORE,
        0,
        IGNORE,
        IGNORE,
        IGNORE,
        IGNORE,
    ]
    assert row["word_index"].tolist() == [-1, 0, 1, -1, -1, 2, -1, -1, -1, -1]
    assert row["padding_mask"].tolist() == [1] * 8 + [0] * 2
    assert row["segment_ids"].tolist() == [0] * 10
    assert all(v.dtype == np.int32 for v in row.values())


def test_truncation_on_word_boundary_and_reverse_mapping():
    # room for 4 pieces: words 0 (1 piece) and 1 (2 pieces) fit; word 2 (2 pieces) does not
    row = align([[10], [11, 12], [13, 14], [15]], [1, 2, 3, 4], 6)
    assert row["token_ids"].tolist() == [CLS, 10, 11, 12, SEP, PAD]
    assert row["labels"].tolist() == [IGNORE, 1, 2, IGNORE, IGNORE, IGNORE]
    predictions = np.array([[0, 7, 8, 9, 0, 0]])
    assert data.word_predictions(predictions, row["word_index"][None], [4]) == [[7, 8, 0, 0]]
    assert data.word_predictions(predictions, row["word_index"][None], [4], fill_label=5) == [
        [7, 8, 5, 5]
    ]


def test_over_long_first_word_is_clipped_and_empty_words_use_unk():
    row = align([[10, 11, 12, 13, 14]], [1], 4)
    assert row["token_ids"].tolist() == [CLS, 10, 11, SEP]
    assert row["labels"].tolist() == [IGNORE, 1, IGNORE, IGNORE]
    row = align([[10], [], [11]], [1, 2, 3], 6, unk_id=UNK)
    assert row["token_ids"].tolist() == [CLS, 10, UNK, 11, SEP, PAD]
    assert row["labels"].tolist() == [IGNORE, 1, 2, 3, IGNORE, IGNORE]
    with pytest.raises(ValueError, match="Word 1 has no sub-word pieces; pass `unk_id`"):
        align([[10], []], [1, 2], 6)


def test_bad_arguments():
    with pytest.raises(ValueError, match="2 words but 1 labels"):
        align([[10], [11]], [1], 6)
    with pytest.raises(ValueError, match="at least 3"):
        align([[10]], [1], 2)
    with pytest.raises(ValueError, match="same batch"):
        data.word_predictions(np.zeros([2, 5]), np.zeros([2, 4]), [1, 1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=0, max_size=20), st.integers(3, 24))
def test_alignment_invariants(piece_counts, length):
    pieces = [[100 + 10 * w + k for k in range(n)] for w, n in enumerate(piece_counts)]
    labels = [w % 7 for w in range(len(pieces))]
    row = align(pieces, labels, length, unk_id=UNK)
    mask = row["padding_mask"].astype(bool)
    assert row["token_ids"][0] == CLS and row["token_ids"][mask.sum() - 1] == SEP
    assert np.all(row["token_ids"][~mask] == PAD) and np.all(row["labels"][~mask] == IGNORE)
    kept = row["word_index"][row["word_index"] >= 0]
    assert kept.tolist() == list(range(len(kept)))  # a prefix of the words, in order
    labelled = row["labels"] != IGNORE
    np.testing.assert_array_equal(labelled, row["word_index"] >= 0)
    for word in kept:
        position = int(np.flatnonzero(row["word_index"] == word)[0])
        assert row["token_ids"][position] == (pieces[word] or [UNK])[0]
    fits = sum(max(n, 1) for n in piece_counts) <= length - 2
    assert len(kept) == len(pieces) or not fits
    back = data.word_predictions(
        np.where(labelled, row["labels"], 0)[None],
        row["word_index"][None],
        [len(pieces)],
        fill_label=-1,
    )
    assert back == [labels[: len(kept)] + [-1] * (len(pieces) - len(kept))]


def toy_tokenize_word(word):
    """Deterministic stand-in for WordPiece: pieces of at most 3 characters."""
    return [1000 + sum(map(ord, word[i : i + 3])) % 5000 for i in range(0, len(word), 3)]


def test_wnut17_round_trip_and_entity_scores():
    train = data.read_conll(DATA / "wnut17_train_head.conll")
    words = [s.words for s in train.sentences]
    batch = data.encode_tagged(
        words, toy_tokenize_word, 48, cls_id=CLS, sep_id=SEP, tag_ids=train.tag_ids, unk_id=UNK
    )
    assert batch["token_ids"].shape == (120, 48) and batch["labels"].shape == (120, 48)
    num_words = [len(w) for w in words]
    back = data.word_predictions(
        np.where(batch["labels"] >= 0, batch["labels"], 0), batch["word_index"], num_words
    )
    truncated = [i for i, n in enumerate(num_words) if (batch["word_index"][i] >= 0).sum() < n]
    assert truncated  # 48 tokens cut some tweets short
    for i, ids in enumerate(train.tag_ids):
        kept = int((batch["word_index"][i] >= 0).sum())
        assert back[i][:kept] == ids[:kept].tolist() and set(back[i][kept:]) <= {0}
    names = train.tag_names
    gold = [s.tags for s in train.sentences]
    predicted = [[names[t] for t in row] for row in back]
    untruncated = [i for i in range(len(gold)) if i not in truncated]
    assert (
        metrics.entity_scores([gold[i] for i in untruncated], [predicted[i] for i in untruncated])[
            "f1"
        ]
        == 1.0
    )
    scores = metrics.entity_scores(gold, predicted)  # truncated entities count as misses
    assert scores["precision"] == 1.0 and scores["recall"] <= 1.0
    logits = np.eye(len(names))[np.where(batch["labels"] >= 0, batch["labels"], 0)]
    assert data.word_predictions(logits, batch["word_index"], num_words) == back


def test_encode_tagged_without_tags_for_inference():
    batch = data.encode_tagged(
        [["a", "bcdef"], ["g"]], toy_tokenize_word, 6, cls_id=CLS, sep_id=SEP
    )
    assert batch["token_ids"].shape == (2, 6) and np.all(batch["labels"] == IGNORE)
    assert batch["word_index"].tolist() == [[-1, 0, 1, -1, -1, -1], [-1, 0, -1, -1, -1, -1]]
    empty = data.encode_tagged([], toy_tokenize_word, 6, cls_id=CLS, sep_id=SEP)
    assert empty["token_ids"].shape == (0, 6) and empty["token_ids"].dtype == np.int32
    with pytest.raises(ValueError, match=r"Sentence 0 \('a  '\): Word 1 has no sub-word pieces"):
        data.encode_tagged(
            [["a", " "]], lambda w: [] if w == " " else [5], 6, cls_id=CLS, sep_id=SEP
        )
