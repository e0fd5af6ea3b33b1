"""Optional dependencies: a feature used without its extra raises one error naming both.

The base install is backend-neutral, as Keras' own: the model API, presets, `kbz convert` and
tokenization (through Hugging Face `tokenizers` off TensorFlow) need no backend library.
TensorFlow-only features (SavedModel export, TF1 checkpoint reading, tf.distribute, TFRecord
pretraining data, ONNX export through tf2onnx, the tf.data input pipelines) get TensorFlow from
`require_tensorflow`, so its absence reads "SavedModel export needs TensorFlow: pip install
'keras-bert-zoo[tensorflow]'" instead of a bare `No module named 'tensorflow'`.

Keras itself needs one backend library, and its default is TensorFlow: `kbz` in an
environment with only JAX or PyTorch runs on that one (`choose_backend`).
"""

import importlib
import importlib.util
import json
import os
import sys

TENSORFLOW_EXTRA = "pip install 'keras-bert-zoo[tensorflow]'"
# Off TensorFlow every job feeds numpy batches (kbz pretrain --text-file too); only the
# TensorFlow backend runs tf.data pipelines, and TFRecords need TensorFlow on any backend.
TF_DATA_PIPELINES = "The tf.data input pipelines of the jobs on the TensorFlow backend"
TF_RECORDS = "TFRecord pretraining data"


class MissingExtraError(ImportError):
    """A feature needs an optional dependency that is not installed; says which extra."""


def require_tensorflow(feature: str, module: str = "tensorflow"):
    """The `module` of the `tensorflow` extra (tensorflow, tensorflow_text, ...), or
    `MissingExtraError` naming `feature` and the extra to install.

    >>> tf = require_tensorflow("SavedModel export")
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtraError(
            f"{feature} needs TensorFlow ({error.name or module} is not installed): "
            f"{TENSORFLOW_EXTRA}"
        ) from error


def tensorflow_installed(module: str = "tensorflow_text") -> bool:
    """Whether `module` of the extra imports: by default tensorflow-text, so TensorFlow and
    tensorflow-text (False also where a test blocks them)."""
    try:
        require_tensorflow("", module)
    except MissingExtraError:
        return False
    return True


# Keras' backends that have an extra of ours, in the order `choose_backend` takes them.
BACKENDS = ("tensorflow", "jax", "torch")


def backend_installed(backend: str) -> bool:
    """Whether the library of a Keras backend is installed: found on the path, not imported
    (TensorFlow takes seconds to import). A spec without a file (a directory left behind, a
    test's blocker) does not count."""
    try:
        spec = importlib.util.find_spec(backend)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None


def configured_backend(environ=os.environ) -> tuple[str, str]:
    """Keras' backend as Keras reads it when first imported, and where it comes from:
    `KERAS_BACKEND`, else `keras.json` in `KERAS_HOME` (by default `~/.keras`, which Keras
    writes on its first import), else Keras' default, TensorFlow.

    >>> configured_backend({"KERAS_BACKEND": "jax"})
    ('jax', 'KERAS_BACKEND')
    """
    if environ.get("KERAS_BACKEND"):
        return environ["KERAS_BACKEND"], "KERAS_BACKEND"
    if "KERAS_HOME" in environ:
        home = environ["KERAS_HOME"]
    else:  # Keras' own fallback when the home directory is read-only
        base = os.path.expanduser("~")
        home = os.path.join(base if os.access(base, os.W_OK) else "/tmp", ".keras")
    path = os.path.expanduser(os.path.join(home, "keras.json"))
    try:
        with open(path) as file:
            backend = json.load(file).get("backend")
    except (OSError, ValueError, AttributeError):
        backend = None
    return (backend, path) if backend else ("tensorflow", "Keras' default")


def backend_to_run(backend: str, source: str, installed) -> tuple[str, str | None]:
    """`(backend, note)`: the configured `backend` when its library is `installed` (a
    collection of names), else the first installed of `BACKENDS` and a line saying so. A
    backend named in `KERAS_BACKEND` is the user's choice: not installed, it is an error.

    >>> backend_to_run("tensorflow", "Keras' default", {"jax", "torch"})[0]
    'jax'
    """
    if backend in installed:
        return backend, None
    fix = f"pip install 'keras-bert-zoo[{backend}]'" if backend in BACKENDS else "install it"
    available = [name for name in BACKENDS if name in installed]
    if source == "KERAS_BACKEND":
        raise MissingExtraError(
            f"KERAS_BACKEND={backend}, but {backend} is not installed: {fix}, or set "
            f"KERAS_BACKEND to an installed backend ({', '.join(available) or 'none is'})."
        )
    if not available:
        raise MissingExtraError(
            "Keras needs a backend library, and none of TensorFlow, JAX and PyTorch is "
            "installed: pip install 'keras-bert-zoo[tensorflow]' (or [jax], or [torch])."
        )
    note = (
        f"Keras' backend {backend} ({source}) is not installed: kbz runs on {available[0]} "
        f"(set KERAS_BACKEND to choose another)."
    )
    return available[0], note


def process_backend(environ=os.environ) -> str:
    """The Keras backend of this process, without importing Keras: Keras' own answer once it
    is loaded, else the one `kbz` runs on (`choose_backend`): the configured backend where its
    library is installed, else the first installed of `BACKENDS`. (Python code that imports
    Keras with a configured backend missing stops there, in Keras' import.)

    >>> process_backend() in BACKENDS
    True
    """
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "backend"):
        return keras.backend.backend()
    backend, source = configured_backend(environ)
    try:
        return backend_to_run(backend, source, _installed(backend))[0]
    except MissingExtraError:  # Keras' import will stop: nothing runs on any backend
        return backend


def choose_backend(environ=os.environ) -> str | None:
    """For the `kbz` command line, before Keras is imported: keeps Keras' configured backend
    where its library is installed, else sets `KERAS_BACKEND` in `environ` to the first
    installed of TensorFlow, JAX and PyTorch and returns a line saying so. Without it `kbz`
    in a `pip install "keras-bert-zoo[jax]"` environment would stop in `import keras` with
    `No module named 'tensorflow'` (Keras' default). A Python caller that imported Keras
    already has its backend: nothing changes. `kbz.tune_process()` (which the `kbz` entry
    point calls) sets the process up for the same backend, through `process_backend`.
    """
    if "keras" in sys.modules:
        return None
    backend, source = configured_backend(environ)
    chosen, note = backend_to_run(backend, source, _installed(backend))
    if note:
        environ["KERAS_BACKEND"] = chosen
    return note


# The backend of a `kbz` command that runs no Keras model (`--runtime onnx|openvino`): Keras'
# numpy backend loads no backend library, where TensorFlow's import alone takes seconds
# (benchmarks/RESULTS.md, "Inference runtimes"); tokenization then runs on the host.
NO_COMPUTE_BACKEND = "numpy"


def choose_light_backend(environ=os.environ) -> bool:
    """For a `kbz` command whose model runs outside Keras (an exported runtime), before Keras
    is imported: puts Keras on its numpy backend unless `KERAS_BACKEND` names one; returns
    whether it did. The outputs are the runtime's either way; a first run that must export
    the model needs TensorFlow (`ExportNeedsTensorFlow`), and `kbz` then runs once more on it.

    >>> choose_light_backend({"KERAS_BACKEND": "jax"})  # the user's own choice stays
    False
    """
    if "keras" in sys.modules or environ.get("KERAS_BACKEND"):
        return False
    environ["KERAS_BACKEND"] = NO_COMPUTE_BACKEND
    return True


class ExportNeedsTensorFlow(ValueError):
    """A runtime's first export (tf2onnx converts TensorFlow's graph) on another backend."""


def _installed(backend: str) -> set:
    """`backend` if its library is installed, else those of `BACKENDS` that are."""
    if backend_installed(backend):
        return {backend}
    return {name for name in BACKENDS if backend_installed(name)}
