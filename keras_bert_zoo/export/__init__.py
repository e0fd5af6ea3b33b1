"""Export for serving: SavedModels for TF Serving with raw strings in, ONNX for ONNX Runtime.

- `saved_model`: `export_saved_model`, the version directory with `serving_default`
  (strings in) and `serve_token_ids` (ids in) signatures, written atomically;
- `serving`: the per-task graph functions behind `serving_default`;
- `onnx`: `export_onnx`, a directory with `model.onnx` (token ids in) and what tokenizes for it;
- `quantization`: int8 by Keras (SavedModel) or ONNX Runtime (ONNX).

>>> kbz.export_saved_model(model, "exports/sentiment/1", preprocessor=pre)
>>> kbz.export_onnx(model, "exports/sentiment_onnx", preprocessor=pre, quantize="int8")
"""

import logging

import keras

from keras_bert_zoo._lazy import lazy_attributes
from keras_bert_zoo.extras import (
    TENSORFLOW_EXTRA,
    MissingExtraError,
    require_tensorflow,
    tensorflow_installed,
)

# Lazy, so each export's missing TensorFlow error names that export.
_EXPORTS = {
    "export_onnx": "keras_bert_zoo.export.onnx",
    "export_saved_model": "keras_bert_zoo.export.saved_model",
}
__all__ = sorted([*_EXPORTS, "export_on_this_backend", "saved_model_missing"])
# What the SavedModel export imports, all from the `tensorflow` extra: the graph, the
# tokenization ops of its string signature, and the serving API of its warm-up requests.
SAVED_MODEL_MODULES = (
    "tensorflow",
    "tensorflow_text",
    "tensorflow_serving.apis.prediction_log_pb2",
)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
logger = logging.getLogger(__name__)


def saved_model_missing() -> str | None:
    """What keeps the SavedModel export from running here, naming the extra; None if nothing.

    >>> saved_model_missing() is None  # the `tensorflow` extra is installed
    True
    """
    for module in SAVED_MODEL_MODULES:
        try:
            require_tensorflow("The SavedModel export", module)
        except MissingExtraError as error:
            return str(error)
    return None


def export_on_this_backend(export: bool, preset_directory) -> bool:
    """`export`, except when Keras runs off TensorFlow or the export's libraries are missing:
    the string-in SavedModel holds TensorFlow tokenization ops, so TensorFlow builds it. The
    training runs ask before any work, so such a run ends with its preset and a warning
    saying how to export it, not with an error after training."""
    if export and keras.backend.backend() != "tensorflow":
        # Where TensorFlow is not installed, KERAS_BACKEND=tensorflow alone fails: extra first.
        install = f"install TensorFlow ({TENSORFLOW_EXTRA}), then run "
        install = "" if tensorflow_installed() else install
        logger.warning(
            "The SavedModel export needs KERAS_BACKEND=tensorflow (running on %s): skipped. To "
            "export the result later, %s`KERAS_BACKEND=tensorflow kbz export %s DST`; or pass "
            "--no-export.",
            keras.backend.backend(),
            install,
            preset_directory,
        )
        return False
    missing = saved_model_missing() if export else None
    if missing:
        logger.warning(
            "%s; the run skips its export/1. Export the result later with `kbz export %s "
            "DST`, or pass --no-export.",
            missing,
            preset_directory,
        )
        return False
    return export
