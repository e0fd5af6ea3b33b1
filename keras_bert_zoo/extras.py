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
