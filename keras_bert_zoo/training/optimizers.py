"""Optimizers and learning-rate schedules, as BERT trains.

- `WarmupLinearDecay`: linear warmup to the peak rate, then linear decay to zero
  (google-research/bert's polynomial decay with power 1).
- `AdamW`: Keras' AdamW with epsilon where the Adam paper, PyTorch and Hugging Face put it.
- `GlobalBatchClip`: clipping of the global batch's gradient under tf.distribute, embedding
  rows summed per id (`AdamW` and `Lamb` use it).
- `create_optimizer`: AdamW (weight decay 0.01, epsilon 1e-6 as BERT) or LAMB, with LayerNorm
  weights and biases excluded from weight decay, global-norm clipping 1.0 and optional
  gradient accumulation, all Keras 3 optimizer features.
"""

import logging

import keras

from keras_bert_zoo.extras import require_tensorflow

logger = logging.getLogger(__name__)

# Substrings of variable names that never get weight decay (BERT's exclusion list).
NO_DECAY = ["layer_norm", "bias", "gamma", "beta"]


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """`peak * step / warmup_steps` while warming up, then linear decay to 0 at `total_steps`.

    Steps are optimizer updates: with `accumulation_steps` batches per update, the batch
    counter Keras passes in is divided by it.

    >>> schedule = kbz.training.WarmupLinearDecay(2e-5, warmup_steps=100, total_steps=1000)
    """

    def __init__(
        self,
        peak_learning_rate: float,
        warmup_steps: int,
        total_steps: int,
        accumulation_steps: int = 1,
    ):
        if total_steps < 1 or not 0 <= warmup_steps <= total_steps:
            raise ValueError(
                "Expected 0 <= warmup_steps <= total_steps and total_steps >= 1. Received: "
                f"warmup_steps={warmup_steps}, total_steps={total_steps}"
            )
        self.peak_learning_rate = float(peak_learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)
        self.accumulation_steps = int(accumulation_steps)

    def __call__(self, step):
        # Under gradient accumulation Keras counts every batch in `iterations`; the schedule
        # counts optimizer updates, as BERT's does.
        step = keras.ops.cast(step // self.accumulation_steps, "float32")
        peak = self.peak_learning_rate
        warmup = peak * step / max(self.warmup_steps, 1)
        decay_span = max(self.total_steps - self.warmup_steps, 1)
        decay = peak * keras.ops.maximum(0.0, (self.total_steps - step) / decay_span)
        return keras.ops.where(step < self.warmup_steps, warmup, decay)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "accumulation_steps": self.accumulation_steps,
        }


def summed_rows(gradient):
    """A TensorFlow `IndexedSlices` gradient (one row per lookup of an embedding, repeated ids
    repeated) as the dense gradient it stands for, the rows of a repeated id summed; any other
    gradient as it is (JAX and PyTorch gradients are dense)."""
    if not hasattr(gradient, "dense_shape"):  # torch tensors have `indices` too, as a method
        return gradient
    indices = keras.ops.expand_dims(gradient.indices, -1)
    shape = keras.ops.cast(gradient.dense_shape, indices.dtype)
    return keras.ops.scatter(indices, gradient.values, shape)


def _replica_context():
    """The tf.distribute replica context of a step running on more than one replica, else
    None (one device, a cross-replica context, or a backend other than TensorFlow)."""
    if keras.backend.backend() != "tensorflow":
        return None
    context = require_tensorflow("tf.distribute").distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return None
    return context


class GlobalBatchClip:
    """Clips the gradient of the global batch, as one device would (a mixin for Keras
    optimizers; `create_optimizer`'s AdamW and Lamb use it).

    Keras clips before its tf.distribute all-reduce, each replica its own share of the batch:
    under `MirroredStrategy` a global-norm clip then looked at half the gradient on each of
    two replicas, and training differed from one device on the same global batch once the
    clip bit. Here each replica all-reduces first, clips the sum, and hands Keras its
    `1 / replicas` share of the clipped sum (Keras' all-reduce adds the shares back up). This
    costs a second all-reduce of the gradients, only on several replicas with a clip set.

    Embedding gradients (TensorFlow's `IndexedSlices`) are summed per id first
    (`summed_rows`): Keras' norm squares each lookup's row on its own, which moved the clip
    and, through Adam's epsilon, weights with small gradients (the tagger and QA step tests
    drifted 3.6e-4 in loss from torch's `clip_grad_norm_` within ten steps).
    """

    def _clip_gradients(self, grads):
        if not (self.clipnorm or self.global_clipnorm or self.clipvalue):
            return grads
        grads = [None if g is None else summed_rows(g) for g in grads]
        context = _replica_context()
        if context is None:
            return super()._clip_gradients(grads)
        tf = require_tensorflow("tf.distribute")
        present = [i for i, g in enumerate(grads) if g is not None]
        summed = context.all_reduce(tf.distribute.ReduceOp.SUM, [grads[i] for i in present])
        clipped = super()._clip_gradients(summed)
        shares = list(grads)
        for i, g in zip(present, clipped, strict=True):
            shares[i] = g / context.num_replicas_in_sync
        return shares


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class AdamW(GlobalBatchClip, keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` with epsilon added to the bias-corrected root of the second
    moment: `lr * m_hat / (sqrt(v_hat) + epsilon)`, as the Adam paper, `torch.optim.AdamW`
    and Hugging Face's fine-tuning recipe compute it.

    Written by hand (the one method) because Keras folds both bias corrections into the step
    size and adds epsilon to the uncorrected `sqrt(v)`, which is `epsilon / sqrt(1 - beta_2^t)`
    in the corrected form: at BERT's epsilon 1e-6, 22x larger at the first step and still
    2.3x after 200 (a warmup), which damps the updates of weights with small gradients early
    in fine-tuning. With Keras' form, ten MiniLM fine-tuning steps drift 3e-4 in loss from
    transformers' loop after the first real update; with this one they stay within 1e-5
    (tests/test_recipe_parity.py). Same variables and config as Keras' AdamW.

    Clipping is `GlobalBatchClip`'s: the global batch's gradient, embedding rows summed per id.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.amsgrad:
            raise ValueError("kbz.training.AdamW has no amsgrad; use keras.optimizers.AdamW.")

    def update_step(self, gradient, variable, learning_rate):
        ops = keras.ops
        dtype = variable.dtype
        gradient = ops.cast(gradient, dtype)
        step = ops.cast(self.iterations + 1, dtype)
        first_correction = 1 - ops.power(ops.cast(self.beta_1, dtype), step)
        second_correction = 1 - ops.power(ops.cast(self.beta_2, dtype), step)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        m_hat = ops.divide(m, first_correction)
        v_hat = ops.divide(v, second_correction)
        step_size = ops.cast(learning_rate, dtype)
        self.assign_sub(
            variable, ops.divide(ops.multiply(m_hat, step_size), ops.sqrt(v_hat) + self.epsilon)
        )

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if keras.backend.backend() != "torch":
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        return _torch_adamw_step(self, grads, trainable_variables, learning_rate)


def _torch_adamw_step(optimizer, grads, variables, learning_rate):
    """`AdamW.update_step` for every variable at once with torch's multi-tensor (`_foreach`)
    ops, in place, as Keras' own torch Adam does: eager PyTorch pays a kernel launch and a
    full pass over memory per op, and the one-variable form spent a third of a MiniLM step
    (benchmarks/RESULTS.md, "PyTorch backend"). The same formula; the order of roundings
    differs (`sqrt(v) / sqrt(1 - beta_2^t)` for `sqrt(v / (1 - beta_2^t))`).
    """
    import torch  # the PyTorch backend's optimizer step: torch is installed there

    ops = keras.ops
    values = [v.value for v in variables]
    slots = [optimizer._get_variable_index(v) for v in variables]
    m = [optimizer._momentums[i].value for i in slots]
    v = [optimizer._velocities[i].value for i in slots]
    dtype = values[0].dtype
    step = ops.cast(optimizer.iterations + 1, dtype)
    first_correction = 1 - ops.power(ops.cast(optimizer.beta_1, dtype), step)
    second_correction = 1 - ops.power(ops.cast(optimizer.beta_2, dtype), step)
    grads = [ops.cast(g, dtype) for g in grads]
    with torch.no_grad():
        torch._foreach_lerp_(m, grads, 1 - optimizer.beta_1)  # m + (g - m) (1 - beta_1)
        torch._foreach_lerp_(v, torch._foreach_mul(grads, grads), 1 - optimizer.beta_2)
        denominators = torch._foreach_sqrt(v)
        torch._foreach_div_(denominators, ops.sqrt(second_correction))
        torch._foreach_add_(denominators, optimizer.epsilon)
        updates = torch._foreach_mul(m, ops.cast(learning_rate, dtype) / first_correction)
        torch._foreach_div_(updates, denominators)
        torch._foreach_sub_(values, updates)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class Lamb(GlobalBatchClip, keras.optimizers.Lamb):
    """`keras.optimizers.Lamb` clipping the global batch's gradient (`GlobalBatchClip`)."""


def create_optimizer(
    learning_rate: float,
    total_steps: int,
    warmup_fraction: float = 0.1,
    optimizer: str = "adamw",
    weight_decay: float = 0.01,
    clipnorm: float | None = 1.0,
    gradient_accumulation_steps: int | None = None,
    loss_scale: bool = False,
) -> keras.optimizers.Optimizer:
    """BERT's optimizer: AdamW or LAMB on a warmup + linear-decay schedule.

    Args:
        learning_rate: peak learning rate (after warmup).
        total_steps: optimizer updates of the whole run (the schedule reaches 0 there); with
            gradient accumulation, batches / `gradient_accumulation_steps`.
        warmup_fraction: fraction of `total_steps` spent warming up.
        optimizer: "adamw" or "lamb".
        weight_decay: decoupled weight decay, not applied to LayerNorm weights and biases.
        clipnorm: global gradient-norm clip (BERT: 1.0); None disables it.
        gradient_accumulation_steps: apply gradients every N batches (N x the batch size).
        loss_scale: wrap in `LossScaleOptimizer` (needed for `mixed_float16`).

    >>> opt = kbz.training.create_optimizer(2e-5, total_steps=1000)
    """
    schedule = WarmupLinearDecay(
        learning_rate,
        int(total_steps * warmup_fraction),
        total_steps,
        accumulation_steps=gradient_accumulation_steps or 1,
    )
    common = dict(
        learning_rate=schedule,
        weight_decay=weight_decay,
        global_clipnorm=clipnorm,
        gradient_accumulation_steps=gradient_accumulation_steps,
    )
    if optimizer == "adamw":
        opt = AdamW(beta_1=0.9, beta_2=0.999, epsilon=1e-6, **common)
    elif optimizer == "lamb":
        opt = Lamb(beta_1=0.9, beta_2=0.999, epsilon=1e-6, **common)
    else:
        raise ValueError(f"`optimizer` must be 'adamw' or 'lamb'. Received: {optimizer!r}")
    opt.exclude_from_weight_decay(var_names=NO_DECAY)
    if loss_scale:
        opt = keras.optimizers.LossScaleOptimizer(opt)
    return opt
