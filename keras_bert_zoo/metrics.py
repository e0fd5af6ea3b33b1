"""Evaluation metrics in plain numpy/Python: classification, regression, entity-level tagging
and the official SQuAD exact match / F1.

Classification and regression scores are fractions in [0, 1] (correlations in [-1, 1]);
`squad_scores` returns percentages, as the official SQuAD script does.

>>> import keras_bert_zoo as kbz
>>> kbz.metrics.accuracy([0, 1, 1], [0, 1, 0])
0.6666666666666666
"""

import collections
import re
import string
from collections.abc import Mapping, Sequence

import numpy as np


def _pair(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.shape != y_pred.shape or y_true.ndim != 1 or y_true.size == 0:
        raise ValueError(
            "Expected two non-empty 1-D sequences of the same length; received "
            f"shapes {y_true.shape} and {y_pred.shape}."
        )
    return y_true, y_pred


def _f1(correct: float, predicted: float, actual: float) -> tuple[float, float, float]:
    """Precision, recall, F1 from counts (0 where undefined, like seqeval and scikit-learn)."""
    precision = correct / predicted if predicted else 0.0
    recall = correct / actual if actual else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def accuracy(y_true: Sequence, y_pred: Sequence) -> float:
    """Fraction of equal labels.

    >>> kbz.metrics.accuracy([1, 0], [1, 1])
    0.5
    """
    y_true, y_pred = _pair(y_true, y_pred)
    return float(np.mean(y_true == y_pred))


def f1_score(
    y_true: Sequence, y_pred: Sequence, average: str = "binary", positive_label=1
) -> float:
    """F1 for classification: `binary` (of `positive_label`), `macro` (unweighted mean over the
    labels seen in either input) or `micro` (equals accuracy for single-label data).

    >>> kbz.metrics.f1_score([1, 1, 0, 0], [1, 0, 1, 0])
    0.5
    """
    y_true, y_pred = _pair(y_true, y_pred)
    if average == "binary":
        labels = [positive_label]
    elif average in ("macro", "micro"):
        labels = np.unique(np.concatenate([y_true, y_pred]))
    else:
        raise ValueError(f"average must be 'binary', 'macro' or 'micro'; received {average!r}.")
    counts = np.array(
        [
            [np.sum((y_pred == k) & (y_true == k)), np.sum(y_pred == k), np.sum(y_true == k)]
            for k in labels
        ],
        dtype=np.float64,
    )
    if average == "micro":
        return _f1(*counts.sum(axis=0))[2]
    return float(np.mean([_f1(*row)[2] for row in counts]))


def confusion_scores(confusion, average: str = "binary", positive_label: int = 1) -> dict:
    """`accuracy` and `f1` (as `f1_score` averages it) of a confusion matrix of class ids
    (`confusion[true, predicted]` counts): what counts added up over parts of a corpus give.

    >>> kbz.metrics.confusion_scores([[1, 1], [1, 1]])
    {'accuracy': 0.5, 'f1': 0.5}
    """
    confusion = np.asarray(confusion, np.float64)
    true_sums, pred_sums = confusion.sum(axis=1), confusion.sum(axis=0)
    seen = np.flatnonzero(true_sums + pred_sums) if average != "binary" else [positive_label]
    counts = [[confusion[k, k], pred_sums[k], true_sums[k]] for k in seen]
    if average == "micro":
        f1 = _f1(*np.sum(counts, axis=0))[2]
    else:
        f1 = float(np.mean([_f1(*row)[2] for row in counts]))
    return {"accuracy": float(np.trace(confusion) / confusion.sum()), "f1": f1}


def matthews_corrcoef(y_true: Sequence, y_pred: Sequence) -> float:
    """Matthews correlation (multi-class form); 0 when undefined.

    >>> kbz.metrics.matthews_corrcoef([1, 1, 0, 0], [1, 1, 0, 0])
    1.0
    """
    y_true, y_pred = _pair(y_true, y_pred)
    labels, encoded = np.unique(np.concatenate([y_true, y_pred]), return_inverse=True)
    confusion = np.zeros([len(labels)] * 2, dtype=np.float64)
    np.add.at(confusion, (encoded[: len(y_true)], encoded[len(y_true) :]), 1)
    true_sums, pred_sums = confusion.sum(axis=1), confusion.sum(axis=0)
    correct, total = np.trace(confusion), confusion.sum()
    denominator = np.sqrt((total**2 - pred_sums @ pred_sums) * (total**2 - true_sums @ true_sums))
    return float((correct * total - true_sums @ pred_sums) / denominator) if denominator else 0.0


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson correlation; NaN when either input is constant.

    >>> kbz.metrics.pearson([1, 2, 3], [2, 4, 7])
    0.9933992677987828
    """
    x, y = (v.astype(np.float64) for v in _pair(x, y))
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x @ x) * (y @ y))
    return float(x @ y / denominator) if denominator else float("nan")


def _rank(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    order = np.argsort(values, kind="mergesort")
    _, first, counts = np.unique(values[order], return_index=True, return_counts=True)
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.repeat(first + (counts + 1) / 2, counts)
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation (average ranks for ties); NaN when either input is constant.

    >>> kbz.metrics.spearman([1, 2, 3], [2, 4, 7])
    1.0
    """
    x, y = _pair(x, y)
    return pearson(_rank(x.astype(np.float64)), _rank(y.astype(np.float64)))


def _split_tag(tag: str) -> tuple[str, str]:
    """`B-PER` -> (`B`, `PER`); `O` -> (`O`, `_`)."""
    return tag[:1], tag[1:].split("-", maxsplit=1)[-1] or "_"


def _chunk_ends(prev: str, tag: str, prev_type: str, type_: str) -> bool:
    return (
        prev in {"E", "S"}
        or (prev in {"B", "I"} and tag in {"B", "S", "O"})
        or (prev not in {"O", "."} and prev_type != type_)
    )


def _chunk_starts(prev: str, tag: str, prev_type: str, type_: str) -> bool:
    return (
        tag in {"B", "S"}
        or (prev in {"E", "S", "O"} and tag in {"E", "I"})
        or (tag not in {"O", "."} and prev_type != type_)
    )


def get_entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """Entity chunks `(type, start, end)` (end exclusive) with conlleval/seqeval rules: works
    for IOB2 (BIO), IOB1 and IOBES; an `I-` after `O` or after another type starts a chunk.

    >>> kbz.metrics.get_entities(["B-PER", "I-PER", "O", "I-LOC"])
    [('PER', 0, 2), ('LOC', 3, 4)]
    """
    entities, prev, prev_type, start = [], "O", "", 0
    for index, full_tag in enumerate(list(tags) + ["O"]):
        tag, type_ = _split_tag(full_tag)
        if _chunk_ends(prev, tag, prev_type, type_):
            entities.append((prev_type, start, index))
        if _chunk_starts(prev, tag, prev_type, type_):
            start = index
        prev, prev_type = tag, type_
    return entities


def _entity_sets(y_true, y_pred) -> tuple[set, set]:
    """The gold and predicted entities, each `(sentence, type, start, end)`."""
    if len(y_true) != len(y_pred):
        raise ValueError(
            f"Expected as many predicted sentences ({len(y_pred)}) as gold "
            f"sentences ({len(y_true)})."
        )
    gold, predicted = set(), set()
    for index, (true_tags, pred_tags) in enumerate(zip(y_true, y_pred, strict=True)):
        if len(true_tags) != len(pred_tags):
            raise ValueError(
                f"Sentence {index} has {len(true_tags)} gold tags but "
                f"{len(pred_tags)} predicted; predict one tag per word."
            )
        gold.update((index, *entity) for entity in get_entities(true_tags))
        predicted.update((index, *entity) for entity in get_entities(pred_tags))
    return gold, predicted


def entity_counts(y_true, y_pred) -> list[int]:
    """`[correct, predicted, gold]` entity counts of `entity_scores`' overall scores; the
    counts of parts of a corpus add up to the corpus's (`entity_f1` of the sums).

    >>> kbz.metrics.entity_counts([["B-PER", "O"]], [["B-PER", "B-LOC"]])
    [1, 2, 1]
    """
    gold, predicted = _entity_sets(y_true, y_pred)
    return [len(gold & predicted), len(predicted), len(gold)]


def entity_f1(counts) -> dict:
    """`precision`, `recall` and `f1` of `entity_counts`' `[correct, predicted, gold]`."""
    return dict(zip(("precision", "recall", "f1"), _f1(*counts), strict=True))


def entity_scores(y_true: Sequence[Sequence[str]], y_pred: Sequence[Sequence[str]]) -> dict:
    """Entity-level (exact chunk match) precision, recall and F1, overall (micro) and per type.

    >>> kbz.metrics.entity_scores([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]])["f1"]
    0.0
    """
    gold, predicted = _entity_sets(y_true, y_pred)
    per_type = {}
    for type_ in sorted({e[1] for e in gold | predicted}):
        g = {e for e in gold if e[1] == type_}
        p = {e for e in predicted if e[1] == type_}
        scores = _f1(len(g & p), len(p), len(g))
        per_type[type_] = dict(
            zip(("precision", "recall", "f1"), scores, strict=True), support=len(g)
        )
    precision, recall, f1 = _f1(len(gold & predicted), len(predicted), len(gold))
    return {"precision": precision, "recall": recall, "f1": f1, "per_type": per_type}


_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Official SQuAD normalisation: lowercase, drop punctuation and a/an/the, squash spaces.

    >>> kbz.metrics.normalize_answer("The  Denver Broncos!")
    'denver broncos'
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def _token_f1(prediction: str, truth: str) -> float:
    pred_tokens, true_tokens = normalize_answer(prediction).split(), normalize_answer(truth).split()
    if not pred_tokens or not true_tokens:  # SQuAD 2.0 rule for empty (no-answer) strings
        return float(pred_tokens == true_tokens)
    common = sum((collections.Counter(pred_tokens) & collections.Counter(true_tokens)).values())
    return _f1(common, len(pred_tokens), len(true_tokens))[2]


def squad_exact_match(prediction: str, ground_truths: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer (`[]`: no answer).

    >>> kbz.metrics.squad_exact_match("the Broncos", ["Denver Broncos", "Broncos"])
    1.0
    """
    truths = [t for t in ground_truths if normalize_answer(t)] or [""]
    return max(float(normalize_answer(prediction) == normalize_answer(t)) for t in truths)


def squad_f1(prediction: str, ground_truths: Sequence[str]) -> float:
    """Best token-overlap F1 over the gold answers (`[]`: no answer, scored against "").

    >>> kbz.metrics.squad_f1("Denver Broncos team", ["Denver Broncos"])
    0.8
    """
    truths = [t for t in ground_truths if normalize_answer(t)] or [""]
    return max(_token_f1(prediction, t) for t in truths)


def squad_scores(
    predictions: Mapping[str, str], gold_answers: Mapping[str, Sequence[str]]
) -> dict[str, float]:
    """Official SQuAD `exact_match` and `f1`, in percent, over every gold question (a missing
    prediction scores 0).

    >>> kbz.metrics.squad_scores({"q1": "Broncos"}, {"q1": ["Denver Broncos"]})
    {'exact_match': 0.0, 'f1': 66.66666666666666}
    """
    if not gold_answers:
        raise ValueError("No gold questions to score against.")
    exact = [
        squad_exact_match(predictions[q], g) if q in predictions else 0.0
        for q, g in gold_answers.items()
    ]
    f1 = [squad_f1(predictions[q], g) if q in predictions else 0.0 for q, g in gold_answers.items()]
    return {"exact_match": 100.0 * sum(exact) / len(exact), "f1": 100.0 * sum(f1) / len(f1)}
