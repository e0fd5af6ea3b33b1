"""What a task model's `fit` on raw data adds to Keras': the default compile and the
per-epoch validation with the task's metrics (`finetuning.task_model`).

`compile_arguments` fills the "auto" parts of a `compile(...)` request as `kbz finetune`
does: BERT's AdamW on the task's warmup + linear-decay schedule over the steps the `fit`
runs, the task's loss, XLA except on PyTorch.
"""

import keras

from keras_bert_zoo.layers.backend import default_jit_compile
from keras_bert_zoo.training.optimizers import create_optimizer

AUTO = "auto"


def compile_arguments(request: dict, spec, task_loss, total_steps) -> dict:
    """Keras `compile` arguments from a task model's `compile` request (consumed): the
    optimizer, loss and `jit_compile` it gave, else the task's (`spec`'s schedule, the loss
    `task_loss()` makes), and the rest of its keywords (metrics, ...) as given."""
    optimizer = request.pop("optimizer", AUTO)
    schedule = {k: request.pop(k, None) for k in ("learning_rate", "warmup_fraction")}
    decay = request.pop("weight_decay", None)
    if optimizer == AUTO:
        optimizer = create_optimizer(
            schedule["learning_rate"] or spec.defaults["learning_rate"],
            total_steps,
            schedule["warmup_fraction"] or spec.defaults["warmup_fraction"],
            **({} if decay is None else {"weight_decay": decay}),  # else create_optimizer's
            loss_scale=keras.mixed_precision.dtype_policy().name == "mixed_float16",
        )
    loss = request.pop("loss", AUTO)
    if loss == AUTO:
        loss = task_loss()
    jit_compile = request.pop("jit_compile", AUTO)
    jit_compile = default_jit_compile() if jit_compile == AUTO else jit_compile
    return dict(optimizer=optimizer, loss=loss, jit_compile=jit_compile, **request)


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
