"""Checkpoint converters: name tables from other BERT formats to our variable paths.

- `google`: Google's original TF1 release (encoder, pooler, MLM and NSP heads);
- `huggingface`: transformers `BertModel` / `BertForPreTraining` / `BertForMaskedLM`, and
  (`huggingface_tasks`) the sequence / token classification and QA task models;
- `keras_hub`: keras-hub `BertBackbone` presets, read as data;
- `to_huggingface`: a preset directory back to a transformers directory;
- `convert`: the entry point behind `kbz convert`, telling the formats apart.

>>> kbz.checkpoints.convert("uncased_L-12_H-768_A-12.zip", "bert_base_uncased")
"""

from keras_bert_zoo.checkpoints.common import Converted, apply_rule, save_converted
from keras_bert_zoo.checkpoints.convert import (
    SOURCE_FORMATS,
    TARGET_FORMATS,
    convert,
    detect_format,
)
from keras_bert_zoo.checkpoints.google import (
    convert_google,
    google_head_tables,
    google_name_table,
    read_google,
)
from keras_bert_zoo.checkpoints.huggingface import (
    convert_huggingface,
    huggingface_head_tables,
    huggingface_name_table,
    read_huggingface,
    read_huggingface_config,
    read_huggingface_weights,
)
from keras_bert_zoo.checkpoints.keras_hub import (
    convert_keras_hub,
    keras_hub_name_table,
    read_keras_hub,
)
from keras_bert_zoo.checkpoints.to_huggingface import export_huggingface

__all__ = [
    "SOURCE_FORMATS",
    "TARGET_FORMATS",
    "Converted",
    "apply_rule",
    "convert",
    "convert_google",
    "convert_huggingface",
    "convert_keras_hub",
    "detect_format",
    "export_huggingface",
    "google_head_tables",
    "google_name_table",
    "huggingface_head_tables",
    "huggingface_name_table",
    "keras_hub_name_table",
    "read_google",
    "read_huggingface",
    "read_huggingface_config",
    "read_huggingface_weights",
    "read_keras_hub",
    "save_converted",
]
