"""LoRA (low-rank adaptation) on the encoder's projections, through Keras' own `enable_lora`.

`enable_lora(model, rank)` calls `keras.layers.Dense.enable_lora` on the chosen projections
of every `TransformerEncoderBlock` and freezes everything else except the task head (and the
pooler where the task reads it): only `rank * (fan_in + fan_out)` values per adapted kernel,
plus the head, are trained. `merge_lora(model)` returns a plain model of the same
architecture whose kernels hold `W + (alpha / rank) * A @ B`: what `model.keras`, presets
and exports are made of, so they load anywhere with no LoRA variables.

Differs from PEFT's BERT default (query and value only) in one point forced by our layout:
query, key and value are one fused `attention_qkv` kernel, so an adapter there adapts all
three through one shared `A` (with the same parameter count as separate query and value
adapters of the same rank).
"""

import hashlib
import json

import keras
import numpy as np

from keras_bert_zoo.layers.encoder_block import TransformerEncoderBlock

# The Keras Dense sub-layers of each TransformerEncoderBlock LoRA can adapt.
PROJECTIONS = ("attention_qkv", "attention_output", "intermediate", "output_dense")
TARGETS = {"all": PROJECTIONS, "attention": ("attention_qkv", "attention_output")}
# Trained in full beside the adapters when present (PEFT's `modules_to_save`): each task's
# new head, and the pooler that feeds the classifier (many checkpoints' poolers were never
# trained for classification: sentence-transformers' MiniLM, or converted encoders without
# one, start it at random).
TRAINED_LAYERS = ("pooled_dense", "classifier_head", "tagger_head", "span_head")


def _walk(model):
    for layer in model.layers:
        yield layer
        if isinstance(layer, keras.Model):
            yield from _walk(layer)


def check_targets(targets) -> tuple:
    """`targets` ("all", "attention" or projection names) as a tuple of projection names."""
    names = TARGETS.get(targets) if isinstance(targets, str) else targets
    names = tuple(names or ())
    unknown = [name for name in names if name not in PROJECTIONS]
    if not names or unknown:
        raise ValueError(
            f"`targets` must be one of {sorted(TARGETS)} or a list of projection names from "
            f"{list(PROJECTIONS)}. Received: targets={targets!r}"
        )
    return tuple(name for name in PROJECTIONS if name in names)  # canonical order


def lora_layers(model) -> list:
    """`(block name, projection, Dense)` of every LoRA-enabled projection, in layer order."""
    return [
        (block.name, name, getattr(block, name))
        for block in _walk(model)
        if isinstance(block, TransformerEncoderBlock) and block.built
        for name in PROJECTIONS
        if getattr(getattr(block, name), "lora_enabled", False)
    ]


def _kernel_variable(dense):
    # The stored kernel variable: `Dense.kernel` is a property that adds the adapter.
    return next(v for v in dense.variables if v.name == "kernel")


def base_kernels(model, targets=None) -> list:
    """The frozen kernel variables under the adapters (without the low-rank update), or,
    with `targets`, the kernels of those projections (adapters or not), in layer order."""
    if targets is None:
        return [_kernel_variable(dense) for _, _, dense in lora_layers(model)]
    names = check_targets(targets)
    return [
        _kernel_variable(getattr(block, name))
        for block in _walk(model)
        if isinstance(block, TransformerEncoderBlock) and block.built
        for name in names
    ]


def lora_variables(model) -> list:
    """The adapters' `lora_kernel_a` / `lora_kernel_b` variables, in layer order."""
    return [
        v for _, _, dense in lora_layers(model) for v in (dense.lora_kernel_a, dense.lora_kernel_b)
    ]


def trained_layers(model) -> list:
    """The layers (of `TRAINED_LAYERS`) trained in full beside the adapters."""
    return [layer for layer in _walk(model) if layer.name in TRAINED_LAYERS]


def lora_settings(model) -> dict | None:
    """`{"rank", "alpha", "targets"}` of a LoRA-enabled model, None if it has no adapters."""
    layers = lora_layers(model)
    if not layers:
        return None
    dense = layers[0][2]
    return {
        "rank": int(dense.lora_rank),
        "alpha": float(dense.lora_alpha),
        "targets": list(dict.fromkeys(name for _, name, _ in layers)),
    }


def base_fingerprint(model, targets=None) -> str:
    """sha256 of the frozen kernels under the adapters (float32 bytes, in layer order); with
    `targets`, of those projections' kernels (the same value before `enable_lora`)."""
    digest = hashlib.sha256()
    for variable in base_kernels(model, targets):
        value = np.ascontiguousarray(keras.ops.convert_to_numpy(variable), np.float32)
        digest.update(json.dumps([variable.path, list(value.shape)]).encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def enable_lora(model, rank: int, alpha: float | None = None, targets="all") -> keras.Model:
    """Adds rank-`rank` adapters to the encoder's projections and freezes the rest.

    Args:
        model: a task model (or encoder) of this package, built.
        rank: the adapters' rank `r`; each adapted `[m, n]` kernel gains `r * (m + n)`
            trainable values.
        alpha: the update is scaled by `alpha / rank`; default `rank` (scale 1), as Keras'
            `Dense.enable_lora` and PEFT at its default rank 8 (`lora_alpha=8`).
        targets: "all" (default: query/key/value, attention output and both feed-forward
            projections, which the QLoRA study found needed to match full fine-tuning),
            "attention" (the fused query/key/value and attention output), or a list of
            names from `PROJECTIONS`.

    Everything else is frozen (embeddings, LayerNorms, biases, the adapted kernels) except
    the layers of `TRAINED_LAYERS` the model has: the task head and, for classifiers, the
    pooler. Call it before `compile` (and inside the strategy's scope). Returns `model`.

    >>> model = kbz.from_preset("my_preset", task="classifier", num_classes=2)
    >>> kbz.enable_lora(model, rank=8)
    >>> model.compile(keras.optimizers.AdamW(5e-4), kbz.tasks.classifier_loss(2))
    """
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"`rank` must be a positive integer. Received: rank={rank!r}")
    if alpha is not None and not (isinstance(alpha, (int, float)) and alpha > 0):
        raise ValueError(f"`alpha` must be a positive number. Received: alpha={alpha!r}")
    names = check_targets(targets)
    if lora_layers(model):
        raise ValueError(
            f"Model '{model.name}' already has LoRA adapters {lora_settings(model)}; enable "
            "LoRA once, on a freshly built or loaded model."
        )
    blocks = [b for b in _walk(model) if isinstance(b, TransformerEncoderBlock)]
    if not blocks or not all(b.built for b in blocks):
        raise ValueError(
            f"Model '{model.name}' has no built transformer layers to adapt. Pass a model "
            "from kbz.from_preset / kbz.build_encoder or a task built on one."
        )
    kept = {id(v) for layer in trained_layers(model) for v in layer.trainable_variables}
    for variable in model.trainable_variables:
        if id(variable) not in kept:
            variable.trainable = False
    for block in blocks:
        for name in names:
            getattr(block, name).enable_lora(rank, lora_alpha=alpha)
    return model


def merged_kernels(model) -> dict:
    """`{kernel path: W + (alpha / rank) * A @ B}` in float32 for every adapted kernel."""
    merged = {}
    for _, _, dense in lora_layers(model):
        kernel, a, b = (
            keras.ops.convert_to_numpy(v).astype(np.float32)
            for v in (_kernel_variable(dense), dense.lora_kernel_a, dense.lora_kernel_b)
        )
        scale = np.float32(dense.lora_alpha / dense.lora_rank)
        merged[_kernel_variable(dense).path] = kernel + scale * (a @ b)
    return merged


def merge_lora(model) -> keras.Model:
    """A plain copy of `model` (same config, no LoRA variables) with the adapters merged.

    Outputs equal the LoRA model's (float32 rounding); `kbz.save_preset`, `.keras` files and
    `kbz.export_saved_model` of the copy load as an ordinary fine-tuned model. A model
    without adapters is returned as it is.

    >>> plain = kbz.lora.merge_lora(model)
    >>> kbz.save_preset(plain, "my_finetuned_preset")
    """
    if not lora_layers(model):
        return model
    values = {v.path: v for v in model.weights}
    merged = merged_kernels(model)
    plain = model.__class__.from_config(model.get_config())
    if getattr(model, "preset_config", None) is not None:  # save_preset reads its vocabulary
        plain.preset_config = model.preset_config
    for variable in plain.weights:
        value = merged.get(variable.path)
        variable.assign(value if value is not None else values[variable.path])
    return plain
