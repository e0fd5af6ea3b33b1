"""Metric functions against hand-computed values and, where installed, seqeval/scipy/sklearn."""

import math

import numpy as np
import pytest

from keras_bert_zoo import metrics


def test_accuracy_and_f1_known_values():
    y_true, y_pred = [1, 1, 1, 0, 0, 2], [1, 0, 1, 1, 0, 2]
    assert metrics.accuracy(y_true, y_pred) == pytest.approx(4 / 6)
    # label 1: tp 2, predicted 3, actual 3 -> 2/3
    assert metrics.f1_score(y_true, y_pred, positive_label=1) == pytest.approx(2 / 3)
    # label 0: tp 1, predicted 2, actual 2 -> 1/2; label 2: 1.0
    assert metrics.f1_score(y_true, y_pred, average="macro") == pytest.approx((2 / 3 + 0.5 + 1) / 3)
    assert metrics.f1_score(y_true, y_pred, average="micro") == pytest.approx(4 / 6)
    assert metrics.f1_score([0, 0], [0, 0]) == 0.0  # no positives anywhere: 0, not NaN


def test_matthews_corrcoef_known_values():
    assert metrics.matthews_corrcoef([1, 1, 0, 0], [1, 1, 0, 0]) == 1.0
    assert metrics.matthews_corrcoef([1, 1, 0, 0], [0, 0, 1, 1]) == -1.0
    # tp=1 tn=1 fp=1 fn=1 -> 0; constant prediction -> 0 (undefined)
    assert metrics.matthews_corrcoef([1, 0, 1, 0], [1, 1, 0, 0]) == 0.0
    assert metrics.matthews_corrcoef([1, 0, 1], [1, 1, 1]) == 0.0
    # tp=2 tn=1 fp=1 fn=0: (2*1 - 1*0) / sqrt(3*2*2*1)
    assert metrics.matthews_corrcoef([1, 1, 0, 0], [1, 1, 1, 0]) == pytest.approx(2 / math.sqrt(12))


def test_correlations_known_values():
    assert metrics.pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert metrics.pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert metrics.pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert metrics.spearman([1, 2, 3, 4], [10, 20, 30, 1000]) == pytest.approx(1.0)
    # ties share the average rank: x ranks [1, 2.5, 2.5, 4], y ranks [1, 2, 3, 4]
    assert metrics.spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    assert math.isnan(metrics.pearson([1, 1, 1], [1, 2, 3]))


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="same length"):
        metrics.accuracy([1, 0], [1])
    with pytest.raises(ValueError, match="non-empty"):
        metrics.pearson([], [])
    with pytest.raises(ValueError, match="average"):
        metrics.f1_score([1], [1], average="weighted")
    with pytest.raises(ValueError, match="Sentence 0 has 2 gold tags but 1"):
        metrics.entity_scores([["O", "O"]], [["O"]])


@pytest.mark.parametrize(
    "tags, entities",
    [
        (["B-PER", "I-PER", "O", "B-LOC"], [("PER", 0, 2), ("LOC", 3, 4)]),
        (["I-PER", "I-PER", "O"], [("PER", 0, 2)]),  # I- after O starts a chunk (IOB1 / lenient)
        (["B-PER", "I-LOC", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 3)]),  # type change splits
        (["B-PER", "B-PER", "I-PER"], [("PER", 0, 1), ("PER", 1, 3)]),
        (["I-ORG", "B-ORG", "O"], [("ORG", 0, 1), ("ORG", 1, 2)]),  # IOB1 B- between same types
        (["B-ORG", "E-ORG", "S-PER", "O"], [("ORG", 0, 2), ("PER", 2, 3)]),  # IOBES
        (["B-creative-work", "I-creative-work"], [("creative-work", 0, 2)]),  # hyphenated type
        (["O", "O"], []),
    ],
)
def test_get_entities(tags, entities):
    assert metrics.get_entities(tags) == entities


def test_entity_scores_known_values():
    # seqeval's README example: one of two gold entities found, one of two predictions right.
    y_true = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    y_pred = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    scores = metrics.entity_scores(y_true, y_pred)
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.5, 0.5, 0.5)
    assert scores["per_type"]["PER"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}
    assert scores["per_type"]["MISC"]["f1"] == 0.0
    # an entity that continues into the next sentence does not merge across sentences
    assert metrics.entity_scores([["B-A"], ["I-A"]], [["B-A"], ["I-A"]])["f1"] == 1.0


def _random_tags(rng, count, tags):
    return [
        [tags[i] for i in rng.integers(0, len(tags), rng.integers(1, 12))] for _ in range(count)
    ]


@pytest.mark.parametrize(
    "tag_set",
    [
        ["O", "B-A", "I-A", "B-B", "I-B"],
        ["O", "B-A", "I-A", "E-A", "S-A", "B-B", "I-B", "E-B", "S-B"],
    ],
)
def test_entity_scores_match_seqeval(tag_set):
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    rng = np.random.default_rng(0)
    for _ in range(20):
        y_true = _random_tags(rng, 15, tag_set)
        y_pred = [[tag_set[i] for i in rng.integers(0, len(tag_set), len(s))] for s in y_true]
        ours = metrics.entity_scores(y_true, y_pred)
        assert ours["precision"] == pytest.approx(seqeval_metrics.precision_score(y_true, y_pred))
        assert ours["recall"] == pytest.approx(seqeval_metrics.recall_score(y_true, y_pred))
        assert ours["f1"] == pytest.approx(seqeval_metrics.f1_score(y_true, y_pred))
        report = seqeval_metrics.classification_report(y_true, y_pred, output_dict=True)
        for type_, values in ours["per_type"].items():
            if type_ in report:
                assert values["f1"] == pytest.approx(report[type_]["f1-score"])
                assert values["support"] == report[type_]["support"]


def test_correlations_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = rng.integers(0, 6, 40).astype(float)  # many ties
        y = x + rng.normal(size=40)
        assert metrics.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0])
        assert metrics.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0])


def test_classification_metrics_match_sklearn():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(2)
    for _ in range(20):
        y_true, y_pred = rng.integers(0, 3, 30), rng.integers(0, 3, 30)
        assert metrics.f1_score(y_true, y_pred, average="macro") == pytest.approx(
            sk.f1_score(y_true, y_pred, average="macro")
        )
        assert metrics.f1_score(y_true, y_pred) == pytest.approx(
            sk.f1_score(y_true, y_pred, labels=[1], average="macro")
        )
        assert metrics.matthews_corrcoef(y_true, y_pred) == pytest.approx(
            sk.matthews_corrcoef(y_true, y_pred)
        )


@pytest.mark.parametrize(
    "text, normalized",
    [
        ("The Denver Broncos!", "denver broncos"),
        ("  an   apple, a pear ", "apple pear"),
        ("Theatre", "theatre"),  # articles only as whole words
        ("U.S. $5.5 billion", "us 55 billion"),
    ],
)
def test_normalize_answer(text, normalized):
    assert metrics.normalize_answer(text) == normalized


def test_squad_exact_match_and_f1_known_values():
    assert metrics.squad_exact_match("the denver Broncos.", ["Denver Broncos"]) == 1.0
    assert metrics.squad_exact_match("Broncos", ["Denver Broncos"]) == 0.0
    # precision 2/3, recall 1 -> 0.8; the max over gold answers is taken
    assert metrics.squad_f1("Denver Broncos team", ["Denver Broncos"]) == pytest.approx(0.8)
    assert metrics.squad_f1("Broncos", ["Carolina Panthers", "Broncos"]) == 1.0
    assert metrics.squad_f1("", ["Denver Broncos"]) == 0.0
    # SQuAD 2.0: no gold answer means the right prediction is the empty string
    assert metrics.squad_exact_match("", []) == 1.0
    assert metrics.squad_f1("Broncos", []) == 0.0


def test_squad_scores_percent_and_missing_predictions():
    gold = {"q1": ["Denver Broncos"], "q2": ["Santa Clara"], "q3": ["February 7"]}
    scores = metrics.squad_scores({"q1": "Denver Broncos", "q2": "Clara"}, gold)
    assert scores["exact_match"] == pytest.approx(100 / 3)
    assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)
