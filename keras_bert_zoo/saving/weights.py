"""Weights files: safetensors keyed by Keras variable path (`transformer_layer_0/intermediate/
kernel`).

Data only (no pickle, no code), readable by any safetensors library, and strict: every
variable of the model must be found with its exact shape, and every tensor in the file must
be used, unless the caller names a part (a task head) that is allowed to be new or unused.
"""

import logging
from pathlib import Path

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

logger = logging.getLogger(__name__)


def save_weights(variables, path) -> None:
    """Writes `variables` (Keras variables) to a safetensors file, float32, keyed by path."""
    tensors = {}
    for variable in variables:
        if variable.path in tensors:
            raise ValueError(f"Two variables share the path '{variable.path}'; rename a layer.")
        tensors[variable.path] = np.ascontiguousarray(np.asarray(variable.numpy(), np.float32))
    save_file(tensors, str(path), metadata={"format": "keras_bert_zoo"})


def read_weights(path) -> dict:
    """Reads a safetensors file into numpy arrays, with an error naming the file if broken."""
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as error:
        raise ValueError(
            f"Cannot read weights file {path}: {error}. The file is truncated or not a "
            "safetensors file; re-create it (kbz convert / kbz.save_preset)."
        ) from error


def assign_weights(variables, tensors: dict, source, new_ok=(), unused_ok=()) -> None:
    """Assigns `tensors[variable.path]` to each variable, strictly.

    Args:
        variables: the Keras variables to fill.
        tensors: name -> numpy array.
        source: the file (or checkpoint) name, for error messages.
        new_ok: variables (by path) that may be absent from `tensors` (a new task head);
            they keep their initial values and are logged.
        unused_ok: tensor names that may be left unused (another task's head).
    """
    missing, mismatched = [], []
    for variable in variables:
        value = tensors.get(variable.path)
        if value is None:
            if variable.path not in new_ok:
                missing.append(variable.path)
            continue
        if tuple(value.shape) != tuple(variable.shape):
            mismatched.append(
                f"{variable.path}: file {tuple(value.shape)}, model {tuple(variable.shape)}"
            )
    used = {variable.path for variable in variables}
    unused = sorted(set(tensors) - used - set(unused_ok))
    if missing or mismatched or unused:
        details = []
        if mismatched:
            details.append("shape mismatch: " + "; ".join(mismatched[:5]))
        if missing:
            details.append(f"missing from the file: {missing[:5]}")
        if unused:
            details.append(f"in the file but not in the model: {unused[:5]}")
        raise ValueError(
            f"The weights in {source} do not fit this architecture ({', '.join(details)}). "
            "Build the model with the architecture the weights were saved from (the preset's "
            "`architecture` block), or re-convert the checkpoint."
        )
    for variable in variables:
        if variable.path in tensors:
            variable.assign(tensors[variable.path])
    new = [v.path for v in variables if v.path not in tensors]
    if new:
        logger.info(
            "%d variables are newly initialized (not in %s): %s",
            len(new),
            source,
            ", ".join(new[:4]) + (" ..." if len(new) > 4 else ""),
        )


def load_weights(variables, path, new_ok=(), unused_ok=()) -> None:
    """`read_weights` then `assign_weights`."""
    assign_weights(variables, read_weights(path), Path(path).name, new_ok, unused_ok)


def draw_again(model, variables) -> None:
    """Gives each of `variables` a fresh value from its layer's `<name>_initializer`.

    For the variables a weights file lacks (the pooler of a tagger's checkpoint) in a model
    built under `layers.common.weights_follow`, which started them at zeros. Each must belong
    to one of `model`'s own layers (`model.get_layer`), as the encoder's pooler does.
    """
    for variable in variables:
        layer_name, _, name = variable.path.rpartition("/")
        layer = model.get_layer(layer_name) if "/" not in layer_name else None
        draw = getattr(layer, f"{name}_initializer", None)
        if draw is None:
            raise RuntimeError(f"No initializer found for {variable.path}: cannot draw it again.")
        variable.assign(draw(variable.shape, variable.dtype))
