"""What a task model's `fit` on raw data adds to Keras': its batches (packed rows or length
buckets), the default compile and the per-epoch validation with the task's metrics
(`finetuning.task_model`).

`compile_arguments` fills the "auto" parts of a `compile(...)` request as `kbz finetune`
does: BERT's AdamW on the task's warmup + linear-decay schedule over the steps the `fit`
runs, the task's loss, XLA except on PyTorch.
"""

import keras
import numpy as np

from keras_bert_zoo.finetuning.packed_training import packed_loss, packed_schedule, packed_stream
from keras_bert_zoo.layers.backend import default_jit_compile
from keras_bert_zoo.model import BertModel
from keras_bert_zoo.training import batching, packed_batches
from keras_bert_zoo.training.optimizers import create_optimizer
from keras_bert_zoo.training.processes import batch_devices

AUTO = "auto"


def training_schedule(
    job, dataset, x, batch_size, length, epochs, bucketing, packed, seed, devices=1
):
    """The batches of a run on the training arrays `x` (`batch_size` rows: examples, or
    groups of them): packed rows (`packed_training`; filled up for `devices`) or the task's
    length buckets. A packed example of several sequences (the embedder's pairs) fills rows
    of up to `length` tokens per sequence."""
    if packed:
        group = int(np.prod(np.shape(x["padding_mask"])[1:-1]))  # sequences per example
        lengths = batching.real_lengths(x, group="sum")
        return packed_schedule(lengths, batch_size, length * group, seed, devices)
    lengths = batching.real_lengths(x)
    return job.training_schedule(dataset, lengths, batch_size, length, epochs, bucketing, seed)


def check_one_batch(x, rows: int, source: str, fix: str, unit: str = "rows"):
    """Training arrays `x` of fewer `unit`s than one batch of `rows` are an error before any
    work; `source` names where they came from (the argument, or the file) and `fix` the way
    out in the caller's terms (an argument or a flag)."""
    if len(x["token_ids"]) < rows:
        raise ValueError(
            f"{source} gives {len(x['token_ids'])} training {unit}, fewer than one batch of "
            f"{rows}; {fix}."
        )


def training_stream(job, x, y, schedule, packed: bool):
    """`start_step -> batches` of `schedule`, and the callbacks they add (the packing report)."""
    if packed:
        stream = packed_stream(job, x, y, schedule)
        return stream, [packed_batches.PackingReport(schedule)]
    return batching.training_stream(x, y, schedule, job.sequence_outputs), []


def stepped_model(job, model, packed: bool):
    """The model a fit steps: the task model or the behaviour's wrapper around it, packed or
    not (its weights are the task model's)."""
    return job.packed_training_model(model) if packed else job.training_model(model)


def training_batches(job, model, dataset, batch_size, epochs, bucketing, packed, seed):
    """What `model.fit` on raw data trains: `(trained, schedule, stream, callbacks)`, the
    model stepped (`stepped_model`), the batches' schedule, an endless stream of them from
    the first and the callbacks they add; packed batches are split over the devices of a
    Keras distribution if one is set."""
    x, y = job.training_arrays(dataset, seed)
    job.start_head(model, y)
    rows = job.training_rows(batch_size)  # examples, or groups of them (the reranker's)
    check_one_batch(x, rows, "`x`", f"pass a smaller `batch_size` (got {batch_size})")
    length = model.preprocessor.sequence_length
    devices = batch_devices(keras.distribution.distribution())
    schedule = training_schedule(
        job, dataset, x, rows, length, epochs, bucketing, packed, seed, devices
    )
    stream, callbacks = training_stream(job, x, y, schedule, packed)
    return stepped_model(job, model, packed), schedule, stream(0), callbacks


def compile_arguments(request: dict, spec, task_loss, total_steps) -> dict:
    """Keras `compile` arguments from a task model's `compile` request (consumed): the
    optimizer, loss and `jit_compile` it gave, else the task's (`spec`'s schedule, the loss
    `task_loss()` makes), and the rest of its keywords (metrics, ...) as given."""
    optimizer = request.pop("optimizer", AUTO)
    # None: the task's default (a warmup fraction of 0 is a choice, not a default)
    schedule = {
        key: spec.defaults[key] if value is None else value
        for key in ("learning_rate", "warmup_fraction")
        for value in [request.pop(key, None)]
    }
    decay = request.pop("weight_decay", None)
    if optimizer == AUTO:
        optimizer = create_optimizer(
            schedule["learning_rate"],
            total_steps,
            schedule["warmup_fraction"],
            **({} if decay is None else {"weight_decay": decay}),  # else create_optimizer's
            loss_scale=keras.mixed_precision.dtype_policy().name == "mixed_float16",
        )
    loss = request.pop("loss", AUTO)
    if loss == AUTO:
        loss = task_loss()
    jit_compile = request.pop("jit_compile", AUTO)
    jit_compile = default_jit_compile() if jit_compile == AUTO else jit_compile
    return dict(optimizer=optimizer, loss=loss, jit_compile=jit_compile, **request)


def compile_task_model(model, trained, dataset, total_steps, packed=False):
    """Compiles `trained` (the task model `model`, or the behaviour's training wrapper around
    it) as `model.compile` asked, its "auto" parts filled in (`compile_arguments`);
    `packed`: its batches are packed rows, the task's loss averaged over their examples."""
    request = dict(model._compile_request or {})

    def task_loss():  # made only when the request leaves the loss "auto"
        job = model.job()
        loss = job.loss(dataset)
        return packed_loss(loss, job.sequence_outputs) if packed else loss

    arguments = compile_arguments(request, model.behaviour.spec, task_loss, total_steps)
    BertModel.compile(trained, **arguments)
    if packed and trained is not model:  # the task model holds the optimizer it trained
        BertModel.compile(model, **arguments)  # with (`model.optimizer`, saved with it)


class TaskValidation(keras.callbacks.Callback):
    """Evaluates the task model on raw `(x, y)` after each epoch: `val_<metric>` logs."""

    def __init__(self, model, x, y=None):
        super().__init__()
        self.task_model, self.job = model, model.job()
        self.dataset = model.raw_data(x, y)
        self.arrays = self.job.arrays(self.dataset)  # tokenized once

    def on_epoch_end(self, epoch, logs=None):
        scores = self.task_model.scores(self.job, self.dataset, self.arrays)
        if logs is not None:
            logs.update({f"val_{k}": v for k, v in scores.items()})
