"""LoRA adapter files: the trained part of a LoRA model on its own, in safetensors.

`save_lora_weights` writes only the `lora_kernel_a` / `lora_kernel_b` variables and the
layers trained in full beside them (the task head and the classifier's pooler: PEFT's
`modules_to_save`), keyed by Keras variable path, with metadata: the rank, alpha, targets,
the encoder's architecture and a sha256 of the frozen base kernels under the adapters.
`load_lora_weights` refuses a file made on another base (architecture or kernels differ)
before assigning anything. A BERT-base classifier's adapter at rank 8 is about 6 MB, its
full weights 440 MB.
"""

import json
from pathlib import Path

import keras
import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

from keras_bert_zoo.architecture import normalized
from keras_bert_zoo.encoder import architecture_of, find_encoder
from keras_bert_zoo.lora import (
    base_fingerprint,
    enable_lora,
    lora_settings,
    lora_variables,
    trained_layers,
)
from keras_bert_zoo.saving.atomic import staged_file
from keras_bert_zoo.saving.weights import assign_weights

FORMAT = "keras_bert_zoo.lora"


def _adapter_variables(model) -> list:
    head = [v for layer in trained_layers(model) for v in layer.weights]
    return [*lora_variables(model), *head]


def save_lora_weights(model, path) -> Path:
    """Writes `model`'s adapters and trained head to a safetensors file, atomically.

    >>> kbz.enable_lora(model, rank=8); model.fit(...)
    >>> kbz.save_lora_weights(model, "runs/sst2/adapter.safetensors")
    """
    settings = lora_settings(model)
    if settings is None:
        raise ValueError(
            f"Model '{model.name}' has no LoRA adapters to save. Call kbz.enable_lora(model, "
            "rank) before training, or save the whole model with kbz.save_preset."
        )
    tensors = {
        v.path: np.ascontiguousarray(keras.ops.convert_to_numpy(v), np.float32)
        for v in _adapter_variables(model)
    }
    metadata = {
        "format": FORMAT,
        "lora": json.dumps(settings),
        "task": str(getattr(model, "task", "encoder")),
        "architecture": json.dumps(architecture_of(find_encoder(model)), sort_keys=True),
        "base_sha256": base_fingerprint(model),
    }
    path = Path(path)
    with staged_file(path) as temporary:
        save_file(tensors, str(temporary), metadata=metadata)
    return path


def read_lora_file(path) -> tuple[dict, dict]:
    """`(metadata, tensors)` of an adapter file, with an error naming a file that is not one."""
    try:
        with safe_open(str(path), framework="numpy") as handle:
            metadata = handle.metadata() or {}
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    except (SafetensorError, OSError, ValueError) as error:
        raise ValueError(f"Cannot read LoRA adapter file {path}: {error}.") from error
    if metadata.get("format") != FORMAT:
        raise ValueError(
            f"{path} is not a LoRA adapter file of this package (its metadata format is "
            f"{metadata.get('format')!r}, expected {FORMAT!r}). Write one with "
            "kbz.save_lora_weights or kbz finetune --lora-rank."
        )
    return metadata, tensors


def load_lora_weights(model, path) -> keras.Model:
    """Loads an adapter file into `model`: the base it was trained on, with the same head.

    A model without adapters gets them first (`enable_lora` with the file's rank, alpha and
    targets). The encoder's architecture and the frozen kernels under the adapters must be
    the ones the file was saved from, else a `ValueError` says which differs. Returns `model`.

    >>> model = kbz.from_preset("my_preset", task="classifier", num_classes=2)
    >>> kbz.load_lora_weights(model, "runs/sst2/adapter.safetensors")
    """
    metadata, tensors = read_lora_file(path)
    saved = json.loads(metadata["lora"])
    # normalized: files from before `attention_dropout` existed lack it
    architecture = normalized(json.loads(metadata["architecture"]))
    ours = normalized(architecture_of(find_encoder(model)))
    if architecture != ours:
        differences = {
            k: (architecture.get(k), ours.get(k))
            for k in architecture
            if architecture.get(k) != ours.get(k)
        }
        raise ValueError(
            f"LoRA adapter {path} was trained on another architecture (file vs model: "
            f"{differences}). Load it into a model built from the preset it was trained on."
        )
    settings = lora_settings(model)
    if settings is not None and settings != saved:
        raise ValueError(
            f"Model '{model.name}' has LoRA {settings}, the adapter {path} {saved}. Load it "
            "into a model without adapters (they are then added as the file says)."
        )
    if base_fingerprint(model, saved["targets"]) != metadata["base_sha256"]:
        raise ValueError(
            f"LoRA adapter {path} was trained on other base weights: the kernels under the "
            "adapters differ from the ones it was saved with (sha256 mismatch). Load it into "
            "a model from the same preset (or checkpoint) the run started from."
        )
    if settings is None:
        enable_lora(model, saved["rank"], alpha=saved["alpha"], targets=saved["targets"])
    assign_weights(_adapter_variables(model), tensors, Path(path).name)
    return model
