"""keras-bert-zoo: BERT for Keras 3 on TensorFlow.

>>> import keras_bert_zoo as kbz
>>> enc = kbz.from_preset("bert_tiny_en_uncased", load_weights=False)
"""

__version__ = "0.1.0"

from keras_bert_zoo import checkpoints, layers, presets
from keras_bert_zoo.encoder import build_encoder
from keras_bert_zoo.presets import from_preset, list_presets, save_preset

__all__ = [
    "__version__",
    "build_encoder",
    "checkpoints",
    "from_preset",
    "layers",
    "list_presets",
    "presets",
    "save_preset",
]
