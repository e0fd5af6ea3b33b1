"""Prediction files of the fine-tuning tasks, and warnings for degenerate predictions.

- classifier: a TSV, one row per input example: `index` (0-based, as GLUE submissions),
  `prediction` (the class name, or the score of a regression) and one `probability_<class>`
  column per class;
- tagger: CoNLL, `word<TAB>predicted tag` per line, a blank line between sentences;
- question answerer: `predictions.json` (`{question id: answer text}`, scored by the
  official SQuAD script) and `nbest_predictions.json` beside it, in the format of
  google-research/bert's `run_squad.py`.
Every file is written atomically.
"""

import json
import logging
from pathlib import Path

import numpy as np

from keras_bert_zoo.saving.atomic import write_json, write_text

logger = logging.getLogger(__name__)
NBEST_FILE = "nbest_predictions.json"
_COLLAPSED_SHARE = 0.98  # predictions in one class beyond this share: the model learned nothing
_COLLAPSED_MINIMUM = 20  # fewer unlabelled examples than this may well all be one class


def write_classifications(path, predictions: np.ndarray, label_names) -> list[Path]:
    """`predictions`: `[n]` scores (regression, `label_names` None) or `[n, classes]`."""
    path = Path(path)
    write_text(
        path, classification_header(label_names) + classification_rows(predictions, label_names)
    )
    return [path]


def classification_header(label_names) -> str:
    """The classifier TSV's header line: `index`, `prediction`, a probability per class."""
    if label_names is None:
        return "index\tprediction\n"
    return "\t".join(["index", "prediction"] + [f"probability_{n}" for n in label_names]) + "\n"


def classification_rows(predictions: np.ndarray, label_names, start: int = 0) -> str:
    """The TSV lines of `predictions`, indexed from `start` (a streamed window's first row)."""
    if label_names is None:
        return "".join(f"{i}\t{v:.6g}\n" for i, v in enumerate(predictions, start))
    return "".join(
        "\t".join([str(i), str(label_names[int(p.argmax())])] + [f"{v:.6f}" for v in p]) + "\n"
        for i, p in enumerate(predictions, start)
    )


def write_conll(path, sentences, tags) -> list[Path]:
    """`sentences`: lists of words; `tags`: the predicted tag of each word."""
    path = Path(path)
    blocks = [
        "".join(f"{w}\t{t}\n" for w, t in zip(words, row, strict=True))
        for words, row in zip(sentences, tags, strict=True)
    ]
    write_text(path, "\n".join(blocks))
    return [path]


def write_squad(path, answers: dict, nbest: dict) -> list[Path]:
    """`predictions.json` at `path` and `nbest_predictions.json` beside it."""
    path = Path(path)
    write_text(path, json.dumps(answers, indent=2, ensure_ascii=False) + "\n")
    write_json(path.with_name(NBEST_FILE), nbest)
    return [path, path.with_name(NBEST_FILE)]


def warn_if_collapsed(predicted, gold, label_names, source) -> None:
    """A classifier that predicts (nearly) one class for every example has learned nothing.

    With labels (`gold`), when the data has other classes; without (`gold` None or empty),
    from `_COLLAPSED_MINIMUM` examples on, since a few new texts may well be one class.
    """
    size = len(label_names)
    counts = np.bincount(np.asarray(predicted, np.int64), minlength=size)
    labelled = gold is not None and len(gold)
    gold_counts = np.bincount(np.asarray(gold, np.int64), minlength=size) if labelled else None
    warn_if_collapsed_counts(counts, label_names, source, gold_counts)


def warn_if_collapsed_counts(counts, label_names, source, gold_counts=None) -> None:
    """`warn_if_collapsed` from the count of predictions per class and, with labels, of
    labels per class (what a streamed file keeps)."""
    counts = np.asarray(counts)
    total, top = int(counts.sum()), int(counts.argmax())
    if gold_counts is not None:
        if total < 2 or counts[top] < _COLLAPSED_SHARE * total:
            return
        share = float(gold_counts[top] / total)
        if share >= _COLLAPSED_SHARE:  # the data is (nearly) all that class too
            return
        logger.warning(
            "%s: %s are class %r although %.0f%% of the labels are: the model learned nothing "
            "useful. Train longer, or change the learning rate.",
            source,
            f"{counts[top]} of {total} predictions",
            label_names[top],
            100 * share,
        )
        return
    if total < _COLLAPSED_MINIMUM or counts[top] < _COLLAPSED_SHARE * total:
        return
    logger.warning(
        "%s: %s are class %r (the file has no labels to check them): a model that predicts "
        "one class has usually learned nothing useful. Check its validation metrics "
        "(metrics.json of the run), or train longer or with another learning rate.",
        source,
        f"{counts[top]} of {total} predictions",
        label_names[top],
    )


def warn_if_all_outside(predicted, gold, source) -> None:
    """A tagger that tags every word `O` finds no entity at all (without gold tags: from
    `_COLLAPSED_MINIMUM` sentences on)."""
    if any(t != "O" for row in predicted for t in row):
        return
    if gold and any(t != "O" for row in gold for t in row):
        logger.warning(
            "%s: every word was tagged O, so no entity was found (entity F1 0). Train longer "
            "(more epochs) or with a higher learning rate.",
            source,
        )
    elif not any(gold or []) and len(predicted) >= _COLLAPSED_MINIMUM:
        logger.warning(
            "%s: every word of %d sentences was tagged O (the file has no tags to check them): "
            "no entity was found. If the text has entities, the model learned nothing useful; "
            "check its validation metrics (metrics.json of the run), or train longer.",
            source,
            len(predicted),
        )
