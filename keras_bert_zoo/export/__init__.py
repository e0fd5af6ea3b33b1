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
from keras_bert_zoo.extras import TENSORFLOW_EXTRA, tensorflow_installed

# Lazy, so each export's missing TensorFlow error names that export.
_EXPORTS = {
    "export_onnx": "keras_bert_zoo.export.onnx",
    "export_saved_model": "keras_bert_zoo.export.saved_model",
}
__all__ = sorted([*_EXPORTS, "export_on_this_backend"])
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
logger = logging.getLogger(__name__)


def export_on_this_backend(export: bool, preset_directory) -> bool:
    """`export`, except when Keras runs off TensorFlow: the string-in SavedModel holds
    TensorFlow tokenization ops, so TensorFlow builds it. The training runs ask before any
    work, so a JAX or PyTorch run ends with its preset and a warning saying how to export it,
    not with an error after training."""
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
    return export
