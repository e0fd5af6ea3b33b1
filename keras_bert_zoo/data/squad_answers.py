"""SQuAD answers from start/end logits: the best span per question, its n-best list, and
the official exact match / F1.

As google-research/bert's `run_squad.py`: the `n_best_size` top starts and ends of every
window of a question make the candidate spans (start <= end, at most `max_answer_length`
tokens, start in its max-context window); candidates are ranked by start + end logit, equal
answer texts kept once, and the n-best `probability` is the softmax of those scores. Spans
are cut from the context by character offsets, so answers are exact substrings.

>>> answers = kbz.data.postprocess(examples, features, start_logits, end_logits)
>>> nbest = kbz.data.nbest_predictions(examples, features, start_logits, end_logits)
"""

from collections.abc import Sequence

import numpy as np

from keras_bert_zoo import metrics
from keras_bert_zoo.data.squad import SquadFeatures
from keras_bert_zoo.data.squad_reader import SquadExample


def _candidates(features, index, start_logits, end_logits, n_best_size, max_answer_length):
    """`(score, char_start, char_end, start_logit, end_logit)` of the valid spans among the
    top start/end logits of window `index`."""
    offsets = features.token_offsets[index]
    starts = np.argsort(-start_logits, kind="stable")[:n_best_size]
    ends = np.argsort(-end_logits, kind="stable")[:n_best_size]
    found = []
    for s in starts:
        if offsets[s, 0] < 0 or not features.token_is_max_context[index, s]:
            continue
        for e in ends:
            if offsets[e, 0] >= 0 and s <= e < s + max_answer_length:
                start, end = float(start_logits[s]), float(end_logits[e])
                found.append((start + end, int(offsets[s, 0]), int(offsets[e, 1]), start, end))
    return found


def _per_question(examples, features, start_logits, end_logits, n_best_size, max_answer_length):
    """Yields `(example, candidates best first, null score)` for each question."""
    start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
    expected = features.token_ids.shape
    if start_logits.shape != expected or end_logits.shape != expected:
        raise ValueError(
            f"start/end logits must be [num_features, max_seq_length] = {expected};"
            f" received {start_logits.shape} and {end_logits.shape}."
        )
    by_example: dict[int, list[int]] = {}
    for index, example_index in enumerate(features.example_index.tolist()):
        by_example.setdefault(example_index, []).append(index)
    for example_index, example in enumerate(examples):
        found, null_score = [], np.inf
        for index in by_example.get(example_index, []):
            found += _candidates(
                features,
                index,
                start_logits[index],
                end_logits[index],
                n_best_size,
                max_answer_length,
            )
            null_score = min(null_score, float(start_logits[index, 0] + end_logits[index, 0]))
        yield example, sorted(found, key=lambda c: -c[0]), null_score


def postprocess(
    examples: Sequence[SquadExample],
    features: SquadFeatures,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    *,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    version_2_with_negative: bool = False,
    null_score_diff_threshold: float = 0.0,
) -> dict[str, str]:
    """`{question_id: answer_text}` from start/end logits `[num_features, max_seq_length]`:
    the best-scoring valid span among every window's candidates. With
    `version_2_with_negative`, the answer is "" when the null score (`[CLS]` start + end,
    lowest over the windows) beats the best span by more than `null_score_diff_threshold`.

    >>> answers = kbz.data.postprocess(examples, features, start_logits, end_logits)
    """
    answers = {}
    for example, found, null_score in _per_question(
        examples, features, start_logits, end_logits, n_best_size, max_answer_length
    ):
        best = found[0] if found else None
        text = example.context[best[1] : best[2]] if best else ""
        if version_2_with_negative and (
            best is None or null_score - best[0] > null_score_diff_threshold
        ):
            text = ""
        answers[example.qas_id] = text
    return answers


def nbest_predictions(
    examples: Sequence[SquadExample],
    features: SquadFeatures,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    *,
    n_best_size: int = 20,
    max_answer_length: int = 30,
) -> dict[str, list[dict]]:
    """`{question_id: [{"text", "probability", "start_logit", "end_logit", "answer_start",
    "answer_end"}, ...]}`, best first, at most `n_best_size` distinct texts:
    `nbest_predictions.json` of `run_squad.py` (an "empty" entry with probability 1 when no
    span is valid, as there), plus the character offsets of each text in the context (end
    exclusive, `context[answer_start:answer_end] == text`; -1 for "empty"), as the exported
    SavedModel's `answer_start` / `answer_end`."""
    nbest = {}
    for example, found, _ in _per_question(
        examples, features, start_logits, end_logits, n_best_size, max_answer_length
    ):
        entries, seen = [], set()
        for _, begin, end, start_logit, end_logit in found:
            text = example.context[begin:end]
            if text in seen:
                continue
            seen.add(text)
            entries.append(
                {
                    "text": text,
                    "start_logit": start_logit,
                    "end_logit": end_logit,
                    "answer_start": begin,
                    "answer_end": end,
                }
            )
            if len(entries) == n_best_size:
                break
        if not entries:
            entries = [
                {
                    "text": "empty",
                    "start_logit": 0.0,
                    "end_logit": 0.0,
                    "answer_start": -1,
                    "answer_end": -1,
                }
            ]
        scores = np.array([e["start_logit"] + e["end_logit"] for e in entries])
        probabilities = np.exp(scores - scores.max())
        probabilities /= probabilities.sum()
        nbest[example.qas_id] = [
            {"text": e["text"], "probability": float(p)}
            | {k: v for k, v in e.items() if k != "text"}
            for e, p in zip(entries, probabilities, strict=True)
        ]
    return nbest


def squad_evaluate(
    examples: Sequence[SquadExample], predictions: dict[str, str]
) -> dict[str, float]:
    """Official SQuAD `exact_match` and `f1` (percent) of `predictions` against the examples'
    gold answers (an unanswerable question's gold answer is "").

    >>> kbz.data.squad_evaluate(examples, answers)
    {'exact_match': 81.0, 'f1': 88.2}
    """
    gold = {e.qas_id: [a.text for a in e.answers] for e in examples}
    return metrics.squad_scores(predictions, gold)
