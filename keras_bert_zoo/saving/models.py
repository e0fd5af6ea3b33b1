"""Keras models to and from files: `save_preset` and `load_model`.

Importing this module imports the model API, which registers every layer and `BertModel`
with Keras, so `.keras` files of this package load. `load_model` uses `safe_mode=True`: no
Lambda layers or other code is deserialized.
"""

from pathlib import Path

import keras

from keras_bert_zoo.encoder import architecture_of, find_encoder
from keras_bert_zoo.layers.common import weights_follow
from keras_bert_zoo.saving.atomic import staged_file
from keras_bert_zoo.saving.preset import check_new_directory, write_preset_directory
from keras_bert_zoo.task_graphs import TASKS  # noqa: F401  (registers every model-API layer)


def save_preset(
    model,
    directory,
    vocabulary=None,
    lowercase: bool | None = None,
    metadata: dict | None = None,
    overwrite: bool = False,
    sequence_length: int | None = None,
) -> Path:
    """Writes a preset directory (preset.json, vocab.txt, weights, SHA256SUMS) atomically.

    Args:
        model: an encoder or a task model built on one; its `task` and `task_config` are
            written, so `kbz.from_preset(directory, task=model.task)` rebuilds the same head.
        directory: where to write; must not exist unless `overwrite`.
        vocabulary: vocab.txt path or list of tokens; default: the model's preset vocabulary.
        lowercase: the tokenizer's lowercasing; default: the model's preset setting.
        metadata: optional `description`, `license`, `provenance`.
        sequence_length: the length the model was trained or fine-tuned at, recorded as the
            default of `kbz.BertPreprocessor.from_preset`, `kbz export`, `kbz embed` and
            `kbz predict`; default: the model's preset's (None: not recorded).

    >>> kbz.save_preset(model, "my_preset")
    """
    check_new_directory(directory, overwrite)
    origin = getattr(model, "preset_config", None)  # set by from_preset: its vocabulary
    vocabulary = vocabulary if vocabulary is not None else getattr(origin, "vocabulary_path", None)
    lowercase = lowercase if lowercase is not None else getattr(origin, "lowercase", None)
    if sequence_length is None:
        sequence_length = getattr(origin, "sequence_length", None)
    if vocabulary is None or lowercase is None:
        raise ValueError(
            "save_preset needs `vocabulary` (vocab.txt path or token list) and "
            "`lowercase` for a model that was not loaded from a preset."
        )
    return write_preset_directory(
        directory,
        architecture_of(find_encoder(model)),
        model.weights,
        vocabulary,
        lowercase,
        task=getattr(model, "task", "encoder"),
        task_config=getattr(model, "task_config", {}),
        metadata=metadata,
        overwrite=overwrite,
        sequence_length=sequence_length,
    )


def save_model_file(model, path, include_optimizer: bool = False) -> Path:
    """Saves `model` as a `.keras` file atomically, by default without optimizer state.

    Keras has no switch for leaving the optimizer out, so the model is copied (config and
    weights) without it; a fine-tuned BERT's file is then a third of the size (AdamW's two
    moments double the weights). `include_optimizer=True` keeps it, to continue training.
    """
    path = Path(path)
    if not include_optimizer and getattr(model, "optimizer", None) is not None:
        copy = model.__class__.from_config(model.get_config())
        copy.set_weights(model.get_weights())
        model = copy
    with staged_file(path) as temporary:
        model.save(temporary)
    return path


def load_model(path, compile: bool = True) -> keras.Model:
    """Loads a `.keras` file saved from a model of this package (safe mode).

    >>> model = kbz.load_model("runs/sst2/model.keras")
    >>> model.task, model.task_config["num_classes"]
    ('classifier', 2)
    """
    path = Path(path)
    if path.suffix != ".keras" or not path.is_file():
        raise ValueError(f"`path` must be an existing .keras file. Received: path={path}")
    with weights_follow():  # the file holds every variable (Keras raises if one is missing)
        return keras.models.load_model(path, compile=compile, safe_mode=True)
