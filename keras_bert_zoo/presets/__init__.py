"""Presets by name: the bundled preset files, weight downloads, and `from_preset`.

>>> kbz.list_presets()
>>> encoder = kbz.from_preset("bert_base_en_uncased")
>>> classifier = kbz.from_preset("bert_base_en_uncased", task="classifier", num_classes=2)

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
