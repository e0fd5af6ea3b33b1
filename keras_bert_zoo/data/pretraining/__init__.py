"""Pretraining data in google-research/bert's formats.

- `text`: input files to documents of tokenized sentences (and sentence splitting);
- `instances`: documents to masked-LM / next-sentence instances, as the original builds them;
- `features`: an instance's numpy features (the original names), the pretrainer's model
  inputs made from them, a stream's seed and position: no TensorFlow;
- `records`: instances serialized as TFRecord shards with the original feature names;
- `create`: `create_pretraining_data`, the orchestrator behind `kbz create-pretraining-data`;
- `datasets`: tf.data inputs for the pretrainer from shards, positioned by step (resume);
- `masking`: the same, masked on the fly from text (dynamic masking): numpy batches off
  TensorFlow, wrapped in tf.data on it.

Only TFRecords need TensorFlow (imported where used, or a `MissingExtraError`).
"""

from keras_bert_zoo.data.pretraining.create import create_pretraining_data
from keras_bert_zoo.data.pretraining.datasets import RecordStream, pretraining_dataset
from keras_bert_zoo.data.pretraining.masking import MaskingStream, dynamic_masking_dataset

__all__ = [
    "MaskingStream",
    "RecordStream",
    "create_pretraining_data",
    "dynamic_masking_dataset",
    "pretraining_dataset",
]
