"""Does an int8 model keep its float32 model's answers? Measured when the int8 model is written.

Rows are drawn from the user's own inputs (`split_rows`): up to `CALIBRATION_ROWS` (at most
half of them) calibrate a static quantizer (OpenVINO's), up to `HELD_OUT_ROWS` others measure
the result. The measure
is the task's decision, compared with float32 on the same rows (`agreement`):

- embedder: recall@1 agreement: each int8 vector retrieves its own text's float32 vector
  first among the held-out rows' (and the mean cosine of the two vectors is reported);
- classifier with several classes, tagger (real tokens), question answerer (start and end):
  the share of argmax decisions that stay the same;
- one-logit scorer (regression, reranker): the share of row pairs ordered the same.

`loss = 1 - agreement`; above `tolerance` (default `DEFAULT_TOLERANCE`, half a point, the
quality budget sentence-transformers documents for its int8 backends) the writer warns.
"""

import logging

import numpy as np

from keras_bert_zoo.console import status
from keras_bert_zoo.tasks import registry
from keras_bert_zoo.training import bucketed_prediction

logger = logging.getLogger(__name__)
CALIBRATION_ROWS, HELD_OUT_ROWS = 300, 200
DEFAULT_TOLERANCE = 0.005
QUALITY_FILE = "quality.json"  # an int8 export's measure, kept beside it


def split_rows(count: int, calibrate: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray, bool]:
    """`(calibration rows, held-out rows, whether the two are disjoint)` of `count` rows.

    Too few rows for both: the measure reuses calibration rows, and says so."""
    order = np.random.default_rng(seed).permutation(count)
    calibration = order[: min(CALIBRATION_ROWS, max(count // 2, 1))] if calibrate else order[:0]
    held_out = order[len(calibration) : len(calibration) + HELD_OUT_ROWS]
    if len(held_out) == 0:
        return calibration, order[:HELD_OUT_ROWS], False
    return calibration, held_out, True


def agreement(task: str, reference, quantized, inputs: dict) -> dict:
    """`{"metric", "agreement", ...}` of `quantized` outputs against `reference` (float32).

    What is compared follows the task's spec (`tasks.registry`): vectors, per-token outputs
    (span logits, tags) or one output per input; "encoder" (no task) its pooled vectors."""
    spec = registry.find(task)
    if spec is not None and spec.vectors:
        return _retrieval(np.asarray(reference), np.asarray(quantized))
    per_token = spec is not None and spec.sequence_outputs
    if per_token and isinstance(reference, dict):  # span logits: each output's argmax
        mask = np.asarray(inputs["padding_mask"]) > 0
        same = [_span_same(reference[k], quantized[k], mask) for k in reference]
        return {"metric": "start/end argmax agreement", "agreement": float(np.mean(same))}
    if isinstance(reference, dict):  # an encoder's outputs: how close its pooled vectors stay
        return _retrieval(np.asarray(reference["pooled_output"]), quantized["pooled_output"])
    reference, quantized = np.asarray(reference), np.asarray(quantized)
    if per_token:
        mask = np.asarray(inputs["padding_mask"]) > 0
        return {"metric": "tag agreement", "agreement": _argmax_same(reference, quantized, mask)}
    if reference.shape[-1] == 1:
        return {"metric": "pair order agreement", "agreement": _concordance(reference, quantized)}
    same = float(np.mean(reference.argmax(-1) == quantized.argmax(-1)))
    return {"metric": "label agreement", "agreement": same}


def _retrieval(reference: np.ndarray, quantized: np.ndarray) -> dict:
    def unit(v):
        return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)

    reference, quantized = unit(reference), unit(quantized)
    best = (quantized @ reference.T).argmax(axis=1)
    # A duplicate text's float vector is as right as the text's own.
    found = np.all(np.isclose(reference[best], reference, atol=1e-6), axis=1)
    return {
        "metric": "recall@1 agreement",
        "agreement": float(np.mean(found)),
        "mean_cosine": float(np.mean(np.sum(reference * quantized, axis=1))),
    }


def _argmax_same(reference, quantized, mask) -> float:
    same = np.asarray(reference).argmax(-1) == np.asarray(quantized).argmax(-1)
    return float(np.sum(same & mask) / max(int(np.sum(mask)), 1))


def _span_same(reference, quantized, mask) -> float:
    """The share of rows whose best start (or end) token among the real ones stays the same."""
    lowest = np.finfo(np.float32).min
    best = [np.where(mask, np.asarray(x), lowest).argmax(-1) for x in (reference, quantized)]
    return float(np.mean(best[0] == best[1]))


def _concordance(reference, quantized) -> float:
    a, b = reference[:, 0], quantized[:, 0]
    upper = np.triu_indices(len(a), k=1)
    da, db = (a[:, None] - a[None, :])[upper], (b[:, None] - b[None, :])[upper]
    ties = np.abs(da) <= 1e-6 * max(float(np.abs(a).max(initial=0)), 1.0)
    return float(np.mean((np.sign(da) == np.sign(db)) | ties)) if len(da) else 1.0


def report(result: dict, what: str, tolerance: float) -> dict:
    """Logs `result` (from `agreement`, with `rows`, `held_out`) and adds `loss`, `tolerance`,
    `within_tolerance`; a loss above `tolerance` is a warning that says what to do."""
    loss = 1.0 - result["agreement"]
    within = loss <= tolerance + 1e-9  # one changed row in 200 is exactly half a point
    result = {**result, "loss": loss, "tolerance": tolerance, "within_tolerance": within}
    rows = f"{result['rows']} {'held-out' if result['held_out'] else 'calibration'} rows"
    cosine = f", mean cosine {result['mean_cosine']:.4f}" if "mean_cosine" in result else ""
    summary = f"{what}: {result['metric']} with float32 {result['agreement']:.2%} on {rows}{cosine}"
    if result["within_tolerance"]:
        status.info("%s (within the %.1f-point tolerance).", summary, 100 * tolerance)
    else:
        logger.warning(
            "QUALITY LOSS: %s, a loss of %.1f points, more than the %.1f-point tolerance. "
            "Its outputs differ from the float32 model's; use --precision float32, or check "
            "the task's metric on labelled data before relying on it.",
            summary,
            100 * loss,
            100 * tolerance,
        )
    return result


def outputs_on_rows(runner, sample: dict, rows, task: str):
    """`(rows, outputs of runner on them, whether held out)`, the rows of `sample` (tokenized
    inputs) predicted in length buckets; `rows` None draws them (`split_rows`)."""
    if rows is None:
        _, chosen, held = split_rows(len(sample["token_ids"]), False)
    else:
        chosen, held = rows
    x = _rows(sample, chosen)
    buckets = bucketed_prediction.prediction_buckets(runner, x["token_ids"].shape[1])
    sequence_outputs = getattr(registry.find(task), "sequence_outputs", False)
    return chosen, bucketed_prediction.predict(runner, x, 32, buckets, sequence_outputs), held


def compare(task: str, float32, candidate, sample: dict, what: str, tolerance: float) -> dict:
    """`report` of `candidate` (an int8 runner) against `float32` (`outputs_on_rows`' result
    for the float32 model) on the same rows."""
    rows, outputs, held = float32
    quantized = outputs_on_rows(candidate, sample, (rows, held), task)[1]
    result = agreement(task, outputs, quantized, _rows(sample, rows))
    return report({**result, "rows": len(rows), "held_out": held}, what, tolerance)


def _rows(sample: dict, rows) -> dict:
    return {k: np.asarray(v)[np.sort(rows)] for k, v in sample.items()}
