"""BERT tokenization as Keras layers: identical ids to the original BERT, with or without
TensorFlow.

- `tokenizer`: `BertTokenizer`, WordPiece with offsets (ids equal `tokenizers`' on any text),
  and `uses_graph`, which picks the implementation;
- `graph`: the TensorFlow ops (tf.data, SavedModels, the TensorFlow backend);
- `host`: Hugging Face `tokenizers` + numpy (JAX, PyTorch, no TensorFlow installed);
- `preprocessor`: `BertPreprocessor`, packing one or two segments for the encoder;
- `normalization`: BERT's text cleaning and pre-tokenization on code points, with the
  per-character tables in `_unicode_tables` (generated from `tokenizers` itself).

>>> tok = kbz.BertTokenizer.from_preset("bert_base_en_uncased")
>>> pre = kbz.BertPreprocessor.from_preset("bert_base_en_uncased", sequence_length=128)
"""

from keras_bert_zoo.tokenization.preprocessor import BertPreprocessor
from keras_bert_zoo.tokenization.tokenizer import (
    SPECIAL_TOKENS,
    BertTokenizer,
    check_vocabulary_size,
)

__all__ = ["SPECIAL_TOKENS", "BertPreprocessor", "BertTokenizer", "check_vocabulary_size"]
