"""keras-bert-zoo: BERT for Keras 3 on TensorFlow.

>>> import keras_bert_zoo as kbz
>>> enc = kbz.from_preset("bert_tiny_en_uncased", load_weights=False)
>>> pre = kbz.BertPreprocessor.from_preset("bert_tiny_en_uncased", sequence_length=128)
"""

__version__ = "0.1.0"

from keras_bert_zoo import checkpoints, data, encoder, layers, metrics, presets, tasks, training
from keras_bert_zoo.encoder import build_encoder
from keras_bert_zoo.export import export_saved_model
from keras_bert_zoo.presets import from_preset, list_presets, save_preset
from keras_bert_zoo.pretraining import build_pretrainer
from keras_bert_zoo.tasks import build_classifier, build_question_answerer, build_tagger
from keras_bert_zoo.tokenization import BertPreprocessor, BertTokenizer

__all__ = [
    "BertPreprocessor",
    "BertTokenizer",
    "__version__",
    "build_classifier",
    "build_encoder",
    "build_pretrainer",
    "build_question_answerer",
    "build_tagger",
    "checkpoints",
    "data",
    "encoder",
    "export_saved_model",
    "from_preset",
    "layers",
    "list_presets",
    "metrics",
    "presets",
    "save_preset",
    "tasks",
    "training",
]
