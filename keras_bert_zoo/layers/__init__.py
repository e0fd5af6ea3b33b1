"""Keras layers of the BERT encoder and its heads (all `keras.ops`, all serializable)."""

from keras_bert_zoo.layers.common import LayerNorm
from keras_bert_zoo.layers.dropout import Dropout
from keras_bert_zoo.layers.embeddings import PositionEmbedding
from keras_bert_zoo.layers.encoder_block import FirstToken, TransformerEncoderBlock
from keras_bert_zoo.layers.heads import MaskedLMHead, OutputBias, SpanLogits
from keras_bert_zoo.layers.input_checks import InputChecks
from keras_bert_zoo.layers.pooling import InBatchSimilarity, SentencePooling

__all__ = [
    "Dropout",
    "FirstToken",
    "InBatchSimilarity",
    "InputChecks",
    "LayerNorm",
    "MaskedLMHead",
    "OutputBias",
    "PositionEmbedding",
    "SentencePooling",
    "SpanLogits",
    "TransformerEncoderBlock",
]
