"""Data parallel training on JAX over every device of one or several processes.

`--strategy data-parallel` on JAX is `keras.distribution.DataParallel` over all devices: the
variables are replicated, each global batch is split along its first axis and XLA all-reduces
the gradients. Several processes (one per host, or local ones in the tests) join through
`keras.distribution.initialize` (`jax.distributed.initialize`), configured as Keras documents
by the environment of each process (`PROCESS_ENVIRONMENT`).

Unlike Keras' own multi-process data sharding (`auto_shard_dataset`), which rebatches a
`tf.data` pipeline, each process here feeds its rows of every global batch (`shard_batches`):
batch k of a run stays a pure function of (seed, k), so exact resume still holds. Process 0
writes the run's outputs (`is_chief`, `jobs.process_run`); `broadcast`, `same_everywhere` and
`barrier` keep the processes in step. Prediction in a multi-process run goes through
`local_forward`, since Keras' `predict` cannot fetch outputs that span other processes' devices.
"""

import logging
import os
import weakref

import keras
import numpy as np

from keras_bert_zoo.training.batching import run_in_batches

jax = None
if keras.backend.backend() == "jax":  # the running backend only (Keras imported it already)
    import jax
    from jax.experimental import multihost_utils

logger = logging.getLogger(__name__)
ADDRESS, COUNT, INDEX = (
    "KERAS_DISTRIBUTION_JOB_ADDRESSES",  # process 0's host:port (the coordinator) first
    "KERAS_DISTRIBUTION_NUM_PROCESSES",
    "KERAS_DISTRIBUTION_PROCESS_ID",  # 0 .. NUM_PROCESSES - 1; 0 writes the outputs
)
PROCESS_ENVIRONMENT = (ADDRESS, COUNT, INDEX)


def _integer(name: str):
    value = os.environ.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer. Received: {name}={value!r}.") from None


def join_processes() -> None:
    """Joins the other processes of the run when the environment names several
    (`KERAS_DISTRIBUTION_NUM_PROCESSES` > 1); one process needs nothing."""
    count, index = _integer(COUNT), _integer(INDEX)
    if count is None or count == 1 or jax.distributed.is_initialized():
        return
    missing = [name for name in (ADDRESS, INDEX) if os.environ.get(name) is None]
    if count < 1 or missing or not 0 <= index < count:
        raise ValueError(
            f"--strategy data-parallel over {COUNT}={count} processes needs, on every process, "
            f"{ADDRESS}=<process 0's host>:<free port> and {INDEX}=<0 .. {count - 1}>, "
            f"a different one per process. Missing or out of range: {missing or [INDEX]}."
        )
    try:
        keras.distribution.initialize()
    except RuntimeError as error:  # JAX ran something first: it joins only before that
        raise RuntimeError(
            f"Joining the processes of --strategy data-parallel failed ({error}). Start a "
            "fresh Python process for the run (JAX joins before its first computation)."
        ) from error


def data_parallel() -> keras.distribution.DataParallel:
    """`DataParallel` over every device of every process (joined first), fed per process."""
    join_processes()
    distribution = keras.distribution.DataParallel(
        devices=keras.distribution.list_devices(), auto_shard_dataset=False
    )
    logger.info(
        "Data parallel over %d devices in %d processes (this is process %d).",
        jax.device_count(),
        jax.process_count(),
        jax.process_index(),
    )
    return distribution


def check_global_batch(batch_size: int, distribution, group_size: int = 1) -> None:
    """A global batch splits evenly over the devices of `distribution` (if a Keras one);
    `group_size`: examples that train as one row (a reranker's query group), never split."""
    if not isinstance(distribution, keras.distribution.DataParallel):
        return
    devices = distribution.device_mesh.devices.size
    if batch_size % (devices * group_size):
        unit = devices * group_size
        groups = f" groups of {group_size}" if group_size > 1 else ""
        raise ValueError(
            f"--batch-size {batch_size} must be a multiple of the {devices} devices that "
            f"--strategy data-parallel splits each global batch over ({process_count()} "
            f"processes x {devices // process_count()} devices){groups}. Pass --batch-size "
            f"{-(-batch_size // unit) * unit}, or use fewer devices."
        )


def batch_devices(distribution) -> int:
    """The devices a global batch is split over: a Keras `DataParallel`'s mesh, a
    `tf.distribute` strategy's replicas, else 1."""
    if isinstance(distribution, keras.distribution.DataParallel):
        return distribution.device_mesh.devices.size
    return getattr(distribution, "num_replicas_in_sync", 1)


def process_count() -> int:
    return jax.process_count() if jax is not None else 1


def is_chief() -> bool:
    """True on the process that writes a run's outputs (process 0; the only one, usually)."""
    return jax is None or jax.process_index() == 0


def broadcast(value: int) -> int:
    """Process 0's `value` (an int32: JAX's default integers), on every process (each must
    call it)."""
    if process_count() == 1:
        return value
    return int(multihost_utils.broadcast_one_to_all(np.int32(value)))


def same_everywhere(value: int) -> bool:
    """Whether every process passed the same int32 `value` (each must call it)."""
    if process_count() == 1:
        return True
    values = np.asarray(multihost_utils.process_allgather(np.int32(value)))
    return bool((values == values.flat[0]).all())


def barrier(name: str) -> None:
    """Waits until every process has reached the barrier called `name`."""
    if process_count() > 1:
        multihost_utils.sync_global_devices(name)


def shard_batches(stream, batch_size: int, distribution):
    """`start_step -> dataset` of this process's rows of `stream`'s global batches (a
    tf.data dataset or, as `training.batching.numpy_stream` gives, an iterator of batches).

    The rows are those the devices of this process hold in `distribution`'s layout of a
    batch (contiguous: the mesh lists each process's devices together), so Keras puts the
    global batch back together in its original order. One process: `stream` itself.
    """
    if process_count() == 1 or not isinstance(distribution, keras.distribution.DataParallel):
        return stream
    layout = distribution.get_data_layout((batch_size,)).backend_layout
    slices = [index[0] for index in layout.addressable_devices_indices_map((batch_size,)).values()]
    begin, end = min(s.start or 0 for s in slices), max(s.stop or batch_size for s in slices)

    def rows(*batch):
        return keras.tree.map_structure(
            lambda t: t[begin:end], batch if len(batch) > 1 else batch[0]
        )

    def shard(start):
        batches = stream(start)
        if hasattr(batches, "map"):  # a tf.data.Dataset
            return batches.map(rows)
        return (rows(*batch) for batch in batches)

    return shard


_FORWARDS = weakref.WeakKeyDictionary()  # model -> its compiled local forward pass


def local_forward(model):
    """`run(inputs, batch_size, batch_done=None)`: `model(batch, training=False)` on this
    process's first device with a copy of the replicated weights, so every process predicts
    alone, with no collective (the outputs are numpy); `batch_done(rows)` after each batch."""
    if model not in _FORWARDS:
        owner = weakref.ref(model)  # the cache must not keep the model alive

        def forward(trainable, non_trainable, inputs):
            return owner().stateless_call(trainable, non_trainable, inputs, training=False)[0]

        _FORWARDS[model] = jax.jit(forward) if model.jit_compile else forward
    function, device = _FORWARDS[model], jax.local_devices()[0]

    def run(inputs: dict, batch_size: int, batch_done=None):
        def local(variables):
            return [jax.device_put(np.asarray(v.value), device) for v in variables]

        weights = local(model.trainable_variables), local(model.non_trainable_variables)
        previous = keras.distribution.distribution()
        keras.distribution.set_distribution(None)  # this pass is one device's, not the mesh's
        try:
            return run_in_batches(
                lambda batch: function(*weights, batch), inputs, batch_size, batch_done
            )
        finally:
            keras.distribution.set_distribution(previous)

    return run
