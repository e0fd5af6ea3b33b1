"""Optional dependencies: a feature used without its extra raises one error naming both.

The base install is backend-neutral, as Keras' own: the model API, presets, `kbz convert` and
tokenization (through Hugging Face `tokenizers` off TensorFlow) need no backend library.
TensorFlow-only features (SavedModel export, TF1 checkpoint reading, tf.distribute, TFRecord
pretraining data, ONNX export through tf2onnx, the tf.data input pipelines) get TensorFlow from
`require_tensorflow`, so its absence reads "SavedModel export needs TensorFlow: pip install
'keras-bert-zoo[tensorflow]'" instead of a bare `No module named 'tensorflow'`.
"""

import importlib

TENSORFLOW_EXTRA = "pip install 'keras-bert-zoo[tensorflow]'"
# Off TensorFlow, kbz finetune, predict and embed feed numpy batches; pretraining data is next.
TF_DATA_PIPELINES = "The tf.data input pipeline of kbz pretrain (and of every job on TensorFlow)"


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


def tensorflow_installed() -> bool:
    """Whether TensorFlow and tensorflow-text import (False also where a test blocks them)."""
    try:
        require_tensorflow("", "tensorflow_text")
    except MissingExtraError:
        return False
    return True
