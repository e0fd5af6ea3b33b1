"""Sequence packing in fine-tuning: `fit(packing=...)` and `kbz finetune --packing`.

A task that reads one vector per example (the classifier's and the reranker's `[CLS]`, the
embedder's mean over each text's tokens) or one output per token (the tagger) can train on
packed rows (`training.packed_batches`): several examples per row of up to
`--sequence-length` tokens (the embedder's pairs: twice that; the reranker's query groups:
that times the group's size), attention kept within each (`packed_encoder`), so almost no
token position is padding, where length buckets still pad each example to its bucket. Its
behaviour says so (`FinetuningTask.packs`), whether "auto" packs it (`packs_by_default`:
where packed rows were measured faster), and whether its targets are per example or per
token (`sequence_outputs`); the loss is averaged over each batch's examples, as it is over an
unpacked batch's, and the validation and predictions are unpacked.
"""

import logging

from keras_bert_zoo.task_graphs import IGNORE_LABEL
from keras_bert_zoo.training import packed_batches
from keras_bert_zoo.training.packed_batches import PackedSchedule

logger = logging.getLogger(__name__)

AUTO = "auto"


def use_packing(job, packing, bucketing: bool = True) -> bool:
    """Whether a run of `job` (a `FinetuningTask`) trains on packed rows: `packing` True,
    False or "auto" (None: "auto"), which packs where the task packs by default
    (`packs_by_default`) and length bucketing is on (`--no-bucketing` asks for full-length
    rows). An error naming the flag for a task that cannot pack."""
    packing = AUTO if packing is None else packing
    if not (isinstance(packing, bool) or packing == AUTO):
        raise ValueError(f"`packing` must be True, False or 'auto'. Received: packing={packing!r}.")
    if packing is True and not job.packs:
        raise ValueError(
            "packing=True packs examples read at their [CLS], by their tokens' mean or at each "
            "token (the classifier, the embedder, the reranker, the tagger); the "
            f"{job.spec.cli_name} task "
            "does not pack. Pass packing=False, or leave packing out (auto: packed where the "
            "task packs)."
        )
    if packing == AUTO:
        return job.packs and job.packs_by_default and bucketing
    return packing


def packed_schedule(lengths, batch_size: int, row_length: int, seed: int, multiple: int = 1):
    """The packed batches (`PackedSchedule`), logged in one line."""
    schedule = PackedSchedule(lengths, batch_size, row_length, seed, multiple)
    empty = schedule.batch_size - schedule.rows_per_batch
    logger.info(
        "Training on packed rows: %d rows of %d tokens per batch (%d examples on average, "
        "at most %d per row)%s, %.3f token positions per real token.",
        schedule.rows_per_batch,
        schedule.row_length,
        batch_size,
        schedule.slots,
        f" and {empty} empty row(s) to split it over {multiple} devices" if empty else "",
        1 / schedule.tokens_per_position(0),
    )
    return schedule


def packed_stream(job, x, y, schedule: PackedSchedule):
    """`packed_batches.training_stream` of `job`'s training arrays: targets per token where
    its outputs are (`sequence_outputs`: a tagger's labels, the places outside every example
    `IGNORE_LABEL`), else per example."""
    token_fill = IGNORE_LABEL if job.sequence_outputs else None
    return packed_batches.training_stream(x, y, schedule, token_fill)


def packed_loss(loss, per_token: bool = False):
    """`loss` averaged over the examples of a packed batch, as an unpacked batch averages it
    over its examples: over the example places (`sample_weight` 1, the unused places 0), or,
    for targets per token (`per_token`), over the rows of a loss summed over each row's
    tokens (the tagger's), each weighted by the batch's rows over its examples."""
    reduction = "sum_over_batch_size" if per_token else "mean_with_sample_weight"
    return type(loss).from_config({**loss.get_config(), "reduction": reduction})
