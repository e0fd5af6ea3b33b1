"""Pretraining data in google-research/bert's formats.

- `text`: input files to documents of tokenized sentences (and sentence splitting);
- `instances`: documents to masked-LM / next-sentence instances, as the original builds them;
- `records`: instances serialized as TFRecord shards with the original feature names;
- `create`: `create_pretraining_data`, the orchestrator behind `kbz create-pretraining-data`;
- `datasets`: tf.data inputs for the pretrainer, from shards or masked on the fly from text.
"""

from keras_bert_zoo.data.pretraining.create import create_pretraining_data
from keras_bert_zoo.data.pretraining.datasets import dynamic_masking_dataset, pretraining_dataset

__all__ = ["create_pretraining_data", "dynamic_masking_dataset", "pretraining_dataset"]
