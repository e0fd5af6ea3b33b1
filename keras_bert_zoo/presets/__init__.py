"""Presets by name: the bundled preset files, weight downloads, and `from_preset`.

>>> "bert_base_en_uncased" in kbz.list_presets()
True
>>> encoder = kbz.from_preset("bert_tiny_en_uncased", load_weights=False)  # random weights
>>> classifier = kbz.from_preset(
...     "bert_tiny_en_uncased", task="classifier", num_classes=2, load_weights=False
... )

Names load when first used, so listing presets (`registry`) needs neither Keras nor TensorFlow.
"""

from keras_bert_zoo._lazy import lazy_attributes

_EXPORTS = {
    "PresetConfig": "keras_bert_zoo.saving.preset",
    "builtin_presets_dir": "keras_bert_zoo.presets.registry",
    "cache_dir": "keras_bert_zoo.presets.registry",
    "fetch_preset_weights": "keras_bert_zoo.presets.downloads",
    "from_preset": "keras_bert_zoo.presets.factory",
    "list_presets": "keras_bert_zoo.presets.registry",
    "load_preset_config": "keras_bert_zoo.presets.registry",
    "save_preset": "keras_bert_zoo.saving.models",
    "write_checksums": "keras_bert_zoo.saving.checksums",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(
    __name__, _EXPORTS, ("downloads", "factory", "hub", "pins", "registry", "transfer")
)
