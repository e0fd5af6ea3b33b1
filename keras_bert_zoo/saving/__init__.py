"""Files the package writes and reads back: preset directories, weights, vocabularies.

- `preset`: the preset directory format (`preset.json`, `vocab.txt`, weights, `SHA256SUMS`);
- `models`: `save_preset` and `load_model`, between Keras models and files;
- `weights`: safetensors files keyed by Keras variable path, assigned strictly;
- `vocabulary`: the one `vocab.txt` reader and casing rule;
- `checksums`, `archives` and `atomic`: SHA256SUMS files, safe unzipping, and writes that
  never leave half a result.

Only `models` imports Keras.
"""

from keras_bert_zoo.saving.preset import PresetConfig, read_preset_directory
from keras_bert_zoo.saving.vocabulary import is_uncased, load_vocabulary
from keras_bert_zoo.saving.weights import load_weights, read_weights, save_weights

__all__ = [
    "PresetConfig",
    "is_uncased",
    "load_vocabulary",
    "load_weights",
    "read_preset_directory",
    "read_weights",
    "save_weights",
]
