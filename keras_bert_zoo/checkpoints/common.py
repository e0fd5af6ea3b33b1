"""What every checkpoint converter shares: name tables, tensor rules, and writing the preset.

A converter reads a checkpoint into `{source_name: numpy array}`, maps it through a name
table of rows `(our_variable_path, [source_names], rule)`, and hands the result to
`save_converted`, which checks the vocabulary and every shape against the architecture
(naming the source file and variable on any mismatch), then writes a preset directory:
task "pretrainer" when the checkpoint carried the MLM/NSP heads, a fine-tuned head's task
(classifier, tagger, question_answerer) when it carried one, else "encoder".
"""

import dataclasses
import logging
from pathlib import Path

import numpy as np

from keras_bert_zoo.encoder import build_encoder
from keras_bert_zoo.layers.common import weights_follow
from keras_bert_zoo.saving.models import save_preset
from keras_bert_zoo.saving.vocabulary import load_vocabulary
from keras_bert_zoo.saving.weights import assign_weights, draw_again
from keras_bert_zoo.task_graphs import build_task

logger = logging.getLogger(__name__)

MAX_PREDICTIONS = 20  # google-research/bert's default `max_predictions_per_seq`
MLM_PATHS = (
    "mlm_head/dense/kernel",
    "mlm_head/dense/bias",
    "mlm_head/layer_norm/gamma",
    "mlm_head/layer_norm/beta",
    "mlm_output_bias/bias",
)
NSP_PATHS = ("nsp_head/kernel", "nsp_head/bias")
POOLER_PATHS = ("pooled_dense/kernel", "pooled_dense/bias")


@dataclasses.dataclass
class Converted:
    """A checkpoint mapped onto our variable paths, ready for `save_converted`.

    `origins` maps each of our paths to the source variable name(s), for error messages;
    `new` lists our paths the checkpoint lacks (initialised fresh, and logged); `embedder`
    the sentence-embedding pooling the checkpoint was trained with, if it says (the preset's
    `embedder` block) and `sequence_length` the length it truncates texts to (a
    sentence-transformers `max_seq_length`); `task` and `task_config` a fine-tuned head's
    task and settings (classifier, tagger, question_answerer), whose variables are in `tensors`.
    """

    architecture: dict
    tensors: dict
    origins: dict
    vocabulary: Path
    lowercase: bool
    source_file: Path
    config_file: Path
    heads: bool
    new: set = dataclasses.field(default_factory=set)
    provenance: str = ""
    embedder: dict | None = None
    task: str | None = None
    task_config: dict = dataclasses.field(default_factory=dict)
    sequence_length: int | None = None


def apply_rule(rule: str | None, arrays: list) -> np.ndarray:
    """Turns source arrays into one of ours.

    Rules: None (as is); "transpose" (`[out, in]` to Keras `[in, out]`); "qkv" (three
    `[out, in]` Linear weights or biases joined into our fused `[in, 3 * out]` kernel);
    "concat" (three `[in, out]` kernels or biases joined on the last axis); "merge_qkv"
    (keras-hub `[in, heads, head_dim]` kernels / `[heads, head_dim]` biases, flattened per
    head and joined); "merge_output" (keras-hub `[heads, head_dim, out]` to `[in, out]`).

    >>> apply_rule("transpose", [np.zeros((3, 2))]).shape
    (2, 3)
    """
    if rule is None:
        return arrays[0]
    if rule == "transpose":
        return arrays[0].T
    if rule == "qkv":
        return np.concatenate([a.T for a in arrays], axis=-1)
    if rule == "concat":
        return np.concatenate(arrays, axis=-1)
    if rule == "merge_qkv":
        return np.concatenate(
            [a.reshape(a.shape[0], -1) if a.ndim == 3 else a.reshape(-1) for a in arrays], axis=-1
        )
    if rule == "merge_output":
        return arrays[0].reshape(-1, arrays[0].shape[-1])
    raise ValueError(f"Unknown conversion rule {rule!r}.")


def map_tensors(table: list, tensors: dict, source_file) -> tuple[dict, dict, set]:
    """Applies a name table: `(ours -> array, ours -> source names, used source names)`.

    Raises a ValueError naming the first source variable the checkpoint lacks.
    """
    converted, origins, used = {}, {}, set()
    for ours, names, rule in table:
        missing = [name for name in names if name not in tensors]
        if missing:
            raise ValueError(
                f"{source_file}: variable {missing[0]} is missing from the checkpoint (needed "
                f"for {ours}). Is it a complete BERT checkpoint of this architecture?"
            )
        arrays = [np.asarray(tensors[name], dtype=np.float32) for name in names]
        converted[ours] = np.ascontiguousarray(apply_rule(rule, arrays))
        origins[ours] = " + ".join(names)
        used.update(names)
    return converted, origins, used


def present_groups(groups: dict, tensors: dict) -> list:
    """Names of the head groups (`{group: table rows}`) that have any variable in `tensors`."""
    return [
        group
        for group, rows in groups.items()
        if any(name in tensors for _, names, _ in rows for name in names)
    ]


def _check_vocabulary(converted: Converted) -> None:
    rows = converted.tensors["token_embedding/embeddings"].shape[0]
    origin = converted.origins.get("token_embedding/embeddings", "token_embedding/embeddings")
    if converted.architecture["vocabulary_size"] != rows:
        raise ValueError(
            f"{converted.config_file} says vocab_size {converted.architecture['vocabulary_size']}"
            f" but variable {origin} in {converted.source_file} has {rows} rows. The config "
            "and the checkpoint belong to different models."
        )
    lines = len(load_vocabulary(converted.vocabulary))
    if lines != rows:
        raise ValueError(
            f"The vocabulary {converted.vocabulary} has {lines} tokens but variable {origin} in "
            f"{converted.source_file} has {rows} rows. Use the vocab.txt released with this "
            "checkpoint."
        )


def _check_shapes(model, converted: Converted) -> None:
    for variable in model.weights:
        value = converted.tensors.get(variable.path)
        if value is not None and tuple(value.shape) != tuple(variable.shape):
            raise ValueError(
                f"{converted.source_file}: variable {converted.origins.get(variable.path)} has "
                f"shape {tuple(value.shape)}, but the architecture in {converted.config_file} "
                f"needs {tuple(variable.shape)} for {variable.path}. The config does not "
                "describe this checkpoint."
            )


def build_converted_model(converted: Converted, heads: bool | None = None):
    """The encoder (or pretrainer, with heads) holding the converted weights."""
    heads = converted.heads if heads is None else heads
    _check_vocabulary(converted)
    tensors = dict(converted.tensors)
    if not heads:
        dropped = [p for p in (*MLM_PATHS, *NSP_PATHS) if tensors.pop(p, None) is not None]
        if dropped:
            logger.info("%s: pretraining heads are not kept (encoder only).", converted.source_file)
    with weights_follow():  # every variable is assigned or drawn below
        encoder = build_encoder(**converted.architecture)
    if converted.task:  # a fine-tuned head; tagger and QA graphs hold no pooler
        model = build_task(converted.task, encoder, **converted.task_config)
        kept = {v.path for v in model.weights}
        if any(tensors.pop(p, None) is not None for p in POOLER_PATHS if p not in kept):
            logger.info("%s: the pooler is not kept (%s).", converted.source_file, converted.task)
    elif heads:
        model = build_task("pretrainer", encoder, max_predictions=MAX_PREDICTIONS)
    else:
        model = encoder
    _check_shapes(model, converted)
    new = {v.path for v in model.weights if v.path not in tensors}
    unexpected = new - set(converted.new)
    if unexpected:
        raise ValueError(
            f"{converted.source_file}: no variable for {sorted(unexpected)[:5]}; "
            "the checkpoint is incomplete."
        )
    if new:
        logger.warning(
            "%s lacks %s; they are newly initialised.",
            converted.source_file,
            ", ".join(sorted(new)),
        )
    assign_weights(model.weights, tensors, converted.source_file, new_ok=new)
    draw_again(encoder, [v for v in encoder.weights if v.path in new])
    return model


def save_converted(
    converted: Converted,
    destination,
    overwrite: bool = False,
    heads: bool | None = None,
    metadata: dict | None = None,
) -> Path:
    """Builds the model, assigns the converted weights strictly, writes the preset directory.

    >>> save_converted(converted, "my_preset")  # task "pretrainer" if heads were converted
    """
    heads = converted.heads if heads is None else heads
    model = build_converted_model(converted, heads)
    metadata = {"provenance": converted.provenance, **(metadata or {})}
    if converted.embedder:
        metadata.setdefault("embedder", dict(converted.embedder))
    return save_preset(
        model,
        destination,
        vocabulary=converted.vocabulary,
        lowercase=converted.lowercase,
        metadata=metadata,
        overwrite=overwrite,
        sequence_length=converted.sequence_length,
    )
