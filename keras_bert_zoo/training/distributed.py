"""Devices and precision: strategies by name, the dtype policy, and a distributed loop.

`get_strategy` / `set_precision` back the `--strategy` / `--mixed-precision` flags (on JAX,
`--strategy data-parallel` is `training.processes`).
`StrategyTrainer` is a training loop for `tf.distribute` strategies where `model.fit`
cannot go:

Keras 3's `fit(jit_compile=True)` under `MirroredStrategy` compiles the whole multi-replica
step with XLA and fails reading another replica's variables ("Trying to access resource
... located in device CPU:1 from device CPU:0"), and `fit` fails under
`MultiWorkerMirroredStrategy` (keras-team/keras#20585). `StrategyTrainer` keeps XLA where it
works: the forward and backward pass of one replica is a pure `jit_compile=True` function
(no variable writes), and the Keras optimizer then all-reduces the gradients across replicas
and applies them outside XLA. Models, optimizers, losses and callbacks stay Keras objects;
the loss is logged (metrics are computed after training, on validation data).
"""

import contextlib
import functools

import keras

from keras_bert_zoo.choices import PRECISIONS, STRATEGIES
from keras_bert_zoo.extras import require_tensorflow
from keras_bert_zoo.training.processes import data_parallel

# tf.distribute drives TensorFlow models only: Keras on TensorFlow imported it already.
tf = None
if keras.backend.backend() == "tensorflow":
    tf = require_tensorflow("tf.distribute strategies")


class OneDevice:
    """`--strategy none` off TensorFlow: one device, and a `scope()` that changes nothing
    (on TensorFlow it is tf.distribute's default strategy)."""

    def scope(self):
        return contextlib.nullcontext()


def uses_tf_distribute(strategy) -> bool:
    """Whether `strategy` is a tf.distribute strategy other than the default one (those
    train with `StrategyTrainer`, since `model.fit` fails there)."""
    if tf is None or strategy is None:
        return False
    default = tf.distribute.get_strategy()
    return isinstance(strategy, tf.distribute.Strategy) and strategy is not default


def keeps_global_policy(job):
    """Decorates a job that sets the run's precision globally (`set_precision`): the Keras
    dtype policy the caller had comes back when the job returns or fails, so a notebook or
    test that ran a mixed_bfloat16 job builds its next model in its own precision."""

    @functools.wraps(job)
    def run(*args, **kwargs):
        previous = keras.mixed_precision.global_policy()
        try:
            return job(*args, **kwargs)
        finally:
            keras.mixed_precision.set_global_policy(previous)

    return run


def set_precision(precision: str) -> None:
    """Sets the global Keras dtype policy ("float32", "mixed_bfloat16", "mixed_float16")."""
    if precision not in PRECISIONS:
        raise ValueError(f"`mixed_precision` must be one of {PRECISIONS}. Received: {precision!r}")
    keras.mixed_precision.set_global_policy(precision)


def get_strategy(name: str = "none", tpu: str | None = None):
    """A strategy by CLI name; "none" is the default (one device) strategy.

    tf.distribute strategies drive TensorFlow models only; "data-parallel" is Keras'
    `DataParallel` on JAX, over every device of every process (`training.processes`).
    """
    backend = keras.backend.backend()
    if name not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of {STRATEGIES}. Received: {name!r}")
    if name == "data-parallel":
        if backend != "jax":
            raise ValueError(
                f"`--strategy data-parallel` is Keras' DataParallel, which kbz runs on "
                f"KERAS_BACKEND=jax. Received: KERAS_BACKEND={backend}. On TensorFlow use "
                "`--strategy mirrored` (local devices) or `--strategy multi-worker` (TF_CONFIG)."
            )
        return data_parallel()
    if name != "none" and backend != "tensorflow":
        raise ValueError(
            f"`--strategy {name}` uses tf.distribute, which needs KERAS_BACKEND=tensorflow. "
            f"Received: KERAS_BACKEND={backend}. Use `--strategy none` on {backend}"
            + (" or `--strategy data-parallel`" if backend == "jax" else "")
            + ", or run with KERAS_BACKEND=tensorflow."
        )
    if name == "none":
        return OneDevice() if tf is None else tf.distribute.get_strategy()
    return _tf_strategy(name, tpu)


@functools.cache
def _tf_strategy(name: str, tpu: str | None):
    """One tf.distribute strategy per name and process. Two `MirroredStrategy` instances in
    one process number their all-reduces alike, and TensorFlow then fails ("Shape mismatch in
    the collective instance") once the two strategies reduce tensors of different shapes: a
    second run in the same process (a notebook, a sweep) must reuse the first one's strategy.
    A TPU system and a cluster are likewise initialised once."""
    if name == "mirrored":  # every local GPU; without one, every logical CPU device
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([device.name for device in devices])
    if name == "multi-worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _loss_value(loss, y, y_pred, sample_weight):
    """The compiled loss (a loss or a dict of losses per output) without metric updates."""
    if isinstance(loss, dict):
        weights = sample_weight or {}
        return tf.add_n(
            [_loss_value(loss[key], y[key], y_pred[key], weights.get(key)) for key in sorted(loss)]
        )
    return tf.cast(keras.losses.get(loss)(y, y_pred, sample_weight=sample_weight), tf.float32)


class StrategyTrainer:
    """Runs the training steps of a compiled Keras `model` under its strategy.

    Args:
        model: built and compiled inside `strategy.scope()` (loss and optimizer are used).
        strategy: any `tf.distribute` strategy.
        jit_compile: compile each replica's forward and backward pass with XLA.

    >>> with strategy.scope():
    ...     model = kbz.from_preset(p, task="classifier", num_classes=2)
    ...     model.compile(optimizer=..., loss=...)
    >>> StrategyTrainer(model, strategy, jit_compile=True).fit(dataset, epochs=2,
    ...                                                        steps_per_epoch=100)
    """

    def __init__(self, model: keras.Model, strategy, jit_compile: bool = False):
        if getattr(model, "optimizer", None) is None or getattr(model, "loss", None) is None:
            raise ValueError(
                "Compile the model (optimizer and loss) inside strategy.scope() "
                "before training it with StrategyTrainer."
            )
        self.model, self.strategy = model, strategy
        if not model.optimizer.built:  # slot variables must exist before the replicas step
            with strategy.scope():
                model.optimizer.build(model.trainable_variables)
        self._gradients = tf.function(self._forward_backward, jit_compile=jit_compile)
        self._step = tf.function(self._distributed_step)

    def _forward_backward(self, x, y, sample_weight):
        model = self.model
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            # Keras losses already divide by the number of replicas in a replica context, so
            # the all-reduced (summed) gradients are those of the global batch's mean loss.
            loss = _loss_value(model.loss, y, y_pred, sample_weight)
            scaled = model.optimizer.scale_loss(loss)
        replicas = tf.cast(self.strategy.num_replicas_in_sync, loss.dtype)
        return loss * replicas, tape.gradient(scaled, model.trainable_weights)

    def _replica_step(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        loss, gradients = self._gradients(x, y, sample_weight)
        weights = self.model.trainable_weights
        self.model.optimizer.apply_gradients(zip(gradients, weights, strict=True))
        return loss

    def _distributed_step(self, iterator):
        losses = self.strategy.run(self._replica_step, args=(next(iterator),))
        return self.strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

    def fit(
        self,
        dataset,
        epochs: int,
        steps_per_epoch: int,
        initial_epoch: int = 0,
        callbacks=(),
        verbose: int = 1,
    ) -> keras.callbacks.History:
        """Like `model.fit` over an endless `dataset` of global batches."""
        history = keras.callbacks.History()
        callback_list = keras.callbacks.CallbackList(
            [*callbacks, history],
            add_progbar=verbose != 0,
            model=self.model,
            verbose=verbose,
            epochs=epochs,
            steps=steps_per_epoch,
        )
        iterator = iter(self.strategy.experimental_distribute_dataset(dataset))
        self.model.stop_training = False
        callback_list.on_train_begin()
        for epoch in range(initial_epoch, epochs):
            callback_list.on_epoch_begin(epoch)
            total = 0.0
            for step in range(steps_per_epoch):
                callback_list.on_train_batch_begin(step)
                loss = float(self._step(iterator))
                total += loss
                callback_list.on_train_batch_end(step, {"loss": loss})
                if self.model.stop_training:
                    break
            logs = {"loss": total / (step + 1)}
            if not tf.math.is_finite(loss):
                logs["loss"] = loss
            callback_list.on_epoch_end(epoch, logs)
            if self.model.stop_training:
                break
        callback_list.on_train_end()
        return history
