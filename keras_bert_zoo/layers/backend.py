"""The running Keras backend, and whether a value is concrete or being traced (issue 16).

The model path runs on TensorFlow, JAX and PyTorch. TensorFlow is imported here only when
Keras runs on it (`tf` is `None` otherwise), so building, saving and running models on JAX or
PyTorch imports no TensorFlow. Keras has no public "is this value traced?" test, so
`is_traced` asks each backend in its own terms: a TensorFlow graph tensor or a trace outside
eager mode, a JAX tracer (`jax.jit`, `grad`, Keras' compiled steps), a PyTorch value under
`torch.compile` or on the shape-only "meta" device, or a symbolic `keras.KerasTensor`.
`in_xla_trace` tells a TensorFlow trace under `jit_compile=True` from a plain graph.
"""

import keras

BACKEND = keras.backend.backend()

# Each backend's library is imported only when it is the running backend (Keras has already
# imported it then, so this costs nothing).
tf = jax = torch = None
if BACKEND == "tensorflow":
    import tensorflow as tf
elif BACKEND == "jax":
    import jax
elif BACKEND == "torch":
    import torch

control_flow_util = None
if tf is not None:  # TensorFlow backend only
    try:  # private TensorFlow module: if a release moves it, `in_xla_trace` says False
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # pragma: no cover - depends on the TensorFlow release
        control_flow_util = None


def jax_platform() -> str | None:
    """Where JAX runs ("cpu", "gpu", "tpu"), or None when Keras does not run on JAX."""
    return jax.devices()[0].platform if jax is not None else None


def is_traced(value) -> bool:
    """True when `value` has no concrete contents to read (symbolic, traced or compiled)."""
    if keras.backend.is_keras_tensor(value):
        return True
    if tf is not None:
        return tf.is_symbolic_tensor(value) or (tf.is_tensor(value) and not tf.executing_eagerly())
    if jax is not None:
        return isinstance(value, jax.core.Tracer)
    if torch is not None:
        return torch.compiler.is_compiling() or (
            isinstance(value, torch.Tensor) and value.device.type == "meta"
        )
    return False


def in_xla_trace() -> bool:
    """True while TensorFlow traces a function compiled with `jit_compile=True`.

    TensorFlow's own check (the one `tf.function(jit_compile=True)` enters), from a private
    module: if a release moves it, this says False (tests/test_dropout.py would fail).
    """
    if control_flow_util is None or tf is None or tf.executing_eagerly():
        return False
    try:
        return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))
    except AttributeError:  # the helper was renamed
        return False


def tensorflow_without_xla() -> bool:
    """True on TensorFlow outside an XLA trace, where every op runs as a kernel of its own
    (a plain graph, as `kbz embed`, `kbz predict` and SavedModels run, or eagerly), so the
    number of full-size ops and copies is what a layer's form decides."""
    return tf is not None and not in_xla_trace()


def default_jit_compile() -> bool:
    """Whether training steps compile by default: with XLA on TensorFlow and JAX; not on
    PyTorch, where Keras' `jit_compile` is `torch.compile`, which on a CPU compiles C++ for
    minutes per batch shape (one per length bucket), more than it saves."""
    return BACKEND != "torch"
