"""SQuAD windows, training targets and post-processing on hand-made and real examples."""

import re
from pathlib import Path

import numpy as np
import pytest

from keras_bert_zoo import data

DATA = Path(__file__).parent / "data" / "finetune"
GREEK = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
WORDS = GREEK + ["which", "one", "in", "the", "1990", "bron", "denver", "who", "won"]
VOCAB = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    + WORDS
    + ["##s", "##cos"]
    + [c for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
)
INDEX = {piece: i for i, piece in enumerate(VOCAB)}
PAD, UNK, CLS, SEP = 0, 1, 2, 3


def _word_pieces(word: str, offset: int) -> list[tuple[int, int, int]]:
    """Greedy longest-match-first WordPiece; a word it cannot cover becomes [UNK]."""
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in INDEX:
                pieces.append((INDEX[piece], offset + start, offset + end))
                start = end
                break
        else:
            return [(UNK, offset, offset + len(word))]
    return pieces


def toy_tokenize(text: str) -> list[tuple[int, int, int]]:
    """Lowercase, split on whitespace and punctuation, then WordPiece, with character offsets."""
    tokens = []
    for match in re.finditer(r"\w+|[^\w\s]", text):
        word = match.group().lower()
        if len(word) != len(match.group()):
            tokens.append((UNK, match.start(), match.end()))
        else:
            tokens += _word_pieces(word, match.start())
    return tokens


def example(context, answer=None, question="which one", qas_id="q", impossible=False):
    answers = () if answer is None else (data.SquadAnswer(answer, context.index(answer)),)
    return data.SquadExample(qas_id, question, context, answers, impossible)


def features_for(examples, **kwargs):
    kwargs.setdefault("max_query_length", 8)
    return data.build_squad_features(
        examples, toy_tokenize, cls_id=CLS, sep_id=SEP, pad_id=PAD, **kwargs
    )


def peaked(features, peaks):
    """Logits 0 everywhere except 10 at each (feature, start, end) in `peaks`."""
    start, end = np.zeros(features.token_ids.shape), np.zeros(features.token_ids.shape)
    for index, s, e in peaks:
        start[index, s], end[index, e] = 10.0, 10.0
    return start, end


def test_toy_tokenizer():
    assert toy_tokenize("In the 1990s, Broncos") == [
        (INDEX["in"], 0, 2),
        (INDEX["the"], 3, 6),
        (INDEX["1990"], 7, 11),
        (INDEX["##s"], 11, 12),
        (UNK, 12, 13),  # "," is not in the toy vocabulary
        (INDEX["bron"], 14, 18),
        (INDEX["##cos"], 18, 21),
    ]


def test_doc_spans_follow_run_squad():
    assert data.doc_spans(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert data.doc_spans(10, 4, 8) == [(0, 4), (4, 4), (8, 2)]  # stride capped at the window
    assert data.doc_spans(3, 4, 2) == [(0, 3)]
    assert data.doc_spans(0, 4, 2) == []


def test_windows_layout_and_answer_crossing_a_window_boundary():
    examples = [example(" ".join(GREEK), "eta theta iota")]  # tokens 6..8 of 12
    features = features_for(examples, max_seq_length=12, doc_stride=3, max_query_length=8)
    # query "which one" = 2 tokens -> windows of 12 - 2 - 3 = 7 tokens: (0,7), (3,7), (6,6)
    assert len(features) == 3 and features.example_index.tolist() == [0, 0, 0]
    q = [INDEX["which"], INDEX["one"]]
    assert features.token_ids[0].tolist() == [CLS, *q, SEP] + [INDEX[w] for w in GREEK[:7]] + [SEP]
    assert features.token_ids[2].tolist() == (
        [CLS, *q, SEP] + [INDEX[w] for w in GREEK[6:]] + [SEP, PAD]
    )
    assert features.segment_ids[2].tolist() == [0] * 4 + [1] * 7 + [0]
    assert features.padding_mask[2].tolist() == [1] * 11 + [0]
    # window 0 holds only "eta" (the answer crosses its end): target [CLS]
    assert features.start_positions.tolist() == [0, 4 + 3, 4 + 0]
    assert features.end_positions.tolist() == [0, 4 + 5, 4 + 2]
    for index in (1, 2):
        s, e = features.start_positions[index], features.end_positions[index]
        offsets = features.token_offsets[index]
        assert examples[0].context[offsets[s, 0] : offsets[e, 1]] == "eta theta iota"
    assert np.all(features.token_offsets[:, :4] == -1) and features.token_offsets.dtype == np.int32
    for array in (features.token_ids, features.segment_ids, features.padding_mask):
        assert array.dtype == np.int32 and array.shape == (3, 12)


def test_max_context_flags_hand_computed():
    features = features_for([example(" ".join(GREEK), "eta")], max_seq_length=12, doc_stride=3)
    flags = features.token_is_max_context[:, 4:11]
    # score min(left, right) + 0.01 * span_length; e.g. token 6: 0.07 / 3.07 / 0.06 -> window 1
    best_window = [0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
    for token, window in enumerate(best_window):
        for index, start in enumerate((0, 3, 6)):
            if start <= token < start + (7 if index < 2 else 6):
                assert flags[index, token - start] == (index == window), (token, index)
    assert not features.token_is_max_context[:, :4].any()


def test_postprocess_answer_crossing_window_boundary_and_max_context():
    examples = [example(" ".join(GREEK), "eta theta iota")]
    features = features_for(examples, max_seq_length=12, doc_stride=3)
    start, end = peaked(features, [(1, 7, 9)])
    assert data.postprocess(examples, features, start, end) == {"q": "eta theta iota"}
    # in window 2 "eta" is not at its max context: the span starting there is not a candidate
    start, end = peaked(features, [(2, 4, 6)])
    start[0, 5], end[0, 5] = 5.0, 5.0  # a weaker, valid span: "beta" in window 0
    assert data.postprocess(examples, features, start, end) == {"q": "beta"}


def test_postprocess_n_best_and_max_answer_length():
    examples = [example(" ".join(GREEK[:5]), "gamma")]
    features = features_for(examples, max_seq_length=16)
    start, end = peaked(features, [(0, 6, 6)])  # "gamma" at position 4 + 2
    start[0, 1] = 20.0  # the highest start is a question token
    assert data.postprocess(examples, features, start, end, n_best_size=1) == {"q": ""}
    assert data.postprocess(examples, features, start, end, n_best_size=2) == {"q": "gamma"}
    start, end = peaked(features, [(0, 4, 8)])  # "alpha ... epsilon": 5 tokens
    start[0, 6], end[0, 6] = 1.0, 1.0
    assert data.postprocess(examples, features, start, end)["q"] == "alpha beta gamma delta epsilon"
    # at most 3 tokens: the best span left is alpha (10) .. gamma (1)
    answers = data.postprocess(examples, features, start, end, max_answer_length=3)
    assert answers["q"] == "alpha beta gamma"
    start[0, 4], end[0, 8] = 0.0, 0.0  # end before start is never a span
    start[0, 8], end[0, 4] = 10.0, 10.0
    assert data.postprocess(examples, features, start, end)["q"] == "epsilon"


def test_sub_word_answers_come_back_exactly():
    context = "In the 1990s the Broncos won"
    examples = [example(context, "1990"), example(context, "Broncos", qas_id="r")]
    features = features_for(examples, max_seq_length=32)
    assert features.start_positions.tolist() == [4 + 2, 4 + 5]  # "1990" of "1990"+"##s"
    assert features.end_positions.tolist() == [4 + 2, 4 + 6]  # "bron" "##cos"
    start, end = peaked(features, [(0, 6, 6), (1, 9, 10)])
    assert data.postprocess(examples, features, start, end) == {"q": "1990", "r": "Broncos"}


def test_query_truncation_and_unanswerable():
    long_question = " ".join(["which"] * 100)
    examples = [example("alpha beta", None, long_question, impossible=True)]
    features = features_for(examples, max_seq_length=80, max_query_length=64)
    assert features.token_ids[0, :66].tolist() == [CLS] + [INDEX["which"]] * 64 + [SEP]
    assert (features.start_positions[0], features.end_positions[0]) == (0, 0)
    start, end = peaked(features, [(0, 66, 66)])
    assert data.postprocess(examples, features, start, end) == {"q": "alpha"}
    start[0, 0], end[0, 0] = 11.0, 11.0  # null score 22 beats 20
    answers = data.postprocess(examples, features, start, end, version_2_with_negative=True)
    assert answers == {"q": ""}
    assert data.postprocess(
        examples, features, start, end, version_2_with_negative=True, null_score_diff_threshold=5.0
    ) == {"q": "alpha"}
    assert data.squad_evaluate(examples, answers) == {"exact_match": 100.0, "f1": 100.0}


def test_bad_arguments():
    examples = [example("alpha beta", "beta")]
    features = features_for(examples, max_seq_length=16)
    with pytest.raises(ValueError, match=r"\[num_features, max_seq_length\] = \(1, 16\)"):
        data.postprocess(examples, features, np.zeros([1, 8]), np.zeros([1, 8]))
    with pytest.raises(ValueError, match="max_seq_length - max_query_length - 3"):
        features_for(examples, max_seq_length=64, max_query_length=64)
    with pytest.raises(ValueError, match="char_start <= char_end"):
        data.build_squad_features(examples, lambda text: [(5, 0, 99)], cls_id=CLS, sep_id=SEP)


def round_trip(examples, tokenize, cls_id, sep_id, **kwargs):
    """Gold span -> features -> logits peaked at the gold positions -> postprocess."""
    features = data.build_squad_features(examples, tokenize, cls_id=cls_id, sep_id=sep_id, **kwargs)
    assert features.token_ids.shape[1] == kwargs.get("max_seq_length", 384)
    start, end = np.zeros(features.token_ids.shape), np.zeros(features.token_ids.shape)
    rows = np.arange(len(features))
    start[rows, features.start_positions] = 10.0
    end[rows, features.end_positions] = 10.0
    answers = data.postprocess(examples, features, start, end, max_answer_length=1000)
    exact = 0
    for e in examples:  # SQuAD's dev answers sometimes cut a word ("8" of "18"): then the
        gold = e.answers[0]  # prediction is the whole token around the gold text
        prediction = answers[e.qas_id]
        offset = e.context.rfind(prediction, 0, gold.start + len(prediction))
        assert offset >= 0 and offset + len(prediction) >= gold.start + len(gold.text), e.qas_id
        assert len(prediction) <= len(gold.text) + 4, (prediction, gold.text)
        exact += prediction == gold.text
    assert exact >= 0.9 * len(examples)
    return features, answers


def test_real_squad_round_trip_with_default_windows():
    examples = data.read_squad(DATA / "squad_v1.1_sample.json")
    features, answers = round_trip(examples, toy_tokenize, CLS, SEP)  # 384 / 128 / 64
    assert len(features) > len(examples)  # character-level pieces need several windows
    assert set(features.example_index.tolist()) == set(range(len(examples)))
    assert data.squad_evaluate(examples, answers)["exact_match"] > 90.0


def test_real_squad_round_trip_with_real_tokenizer():
    tokenization = pytest.importorskip("keras_bert_zoo.tokenization")
    tokenize, cls_id, sep_id = _real_tokenizer(tokenization)
    examples = data.read_squad(DATA / "squad_v1.1_sample.json")
    features, answers = round_trip(
        examples, tokenize, cls_id, sep_id, max_seq_length=128, doc_stride=32
    )
    assert len(features) > len(examples)
    assert data.squad_evaluate(examples, answers)["exact_match"] > 90.0


def _real_tokenizer(tokenization):
    """The package's BERT tokenizer (uncased vocabulary) as a `tokenize(text)` callable."""
    tokenizer = tokenization.BertTokenizer.from_preset("bert_tiny_en_uncased")

    def tokenize(text):
        ids, starts, ends = tokenizer.tokenize_with_offsets(text, unit="char")
        return list(
            zip(ids.numpy().tolist(), starts.numpy().tolist(), ends.numpy().tolist(), strict=True)
        )

    return tokenize, tokenizer.cls_token_id, tokenizer.sep_token_id
