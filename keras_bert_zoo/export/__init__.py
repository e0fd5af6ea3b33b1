"""Export for serving: SavedModels for TF Serving with raw strings in.

- `saved_model`: `export_saved_model`, the version directory with `serving_default`
  (strings in) and `serve_token_ids` (ids in) signatures, written atomically;
- `serving`: the per-task graph functions behind `serving_default`.

>>> kbz.export_saved_model(model, "exports/sentiment/1", preprocessor=pre)
"""

from keras_bert_zoo.export.saved_model import export_saved_model

__all__ = ["export_saved_model"]
