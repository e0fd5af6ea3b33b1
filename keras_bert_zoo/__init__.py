"""keras-bert-zoo: BERT for Keras 3 on TensorFlow.

>>> import keras_bert_zoo as kbz
>>> enc = kbz.from_preset("bert_tiny_en_uncased", load_weights=False)
"""

__version__ = "0.1.0"

from keras_bert_zoo import checkpoints, encoder, layers, presets, tasks
from keras_bert_zoo.encoder import build_encoder
from keras_bert_zoo.presets import from_preset, list_presets, save_preset
from keras_bert_zoo.pretraining import build_pretrainer
from keras_bert_zoo.tasks import build_classifier, build_question_answerer, build_tagger

__all__ = [
    "__version__",
    "build_classifier",
    "build_encoder",
    "build_pretrainer",
    "build_question_answerer",
    "build_tagger",
    "checkpoints",
    "encoder",
    "from_preset",
    "layers",
    "list_presets",
    "presets",
    "save_preset",
    "tasks",
]
