"""Export for serving: SavedModels for TF Serving with raw strings in, ONNX for ONNX Runtime.

- `saved_model`: `export_saved_model`, the version directory with `serving_default`
  (strings in) and `serve_token_ids` (ids in) signatures, written atomically;
- `serving`: the per-task graph functions behind `serving_default`;
- `onnx`: `export_onnx`, a directory with `model.onnx` (token ids in) and what tokenizes for it;
- `quantization`: int8 by Keras (SavedModel) or ONNX Runtime (ONNX).

>>> kbz.export_saved_model(model, "exports/sentiment/1", preprocessor=pre)
>>> kbz.export_onnx(model, "exports/sentiment_onnx", preprocessor=pre, quantize="int8")
"""

from keras_bert_zoo.export.onnx import export_onnx
from keras_bert_zoo.export.saved_model import export_saved_model

__all__ = ["export_onnx", "export_saved_model"]
