"""Where exported runtime models are kept: `cache_dir()/runtimes/<fingerprint>/<variant>/`.

The fingerprint is a sha256 of what the model computes: the preset's architecture, task and
task settings, casing, vocabulary file and weights file (content hashes, not paths or times),
the task arguments the caller adds (an embedder's pooling) and this package's version (the
export code is part of the result); of a Keras model in memory (a task model's
`use_runtime`), its config and weights (`model_fingerprint`). A preset saved again with other
weights gets a new fingerprint, a copy of the same preset elsewhere the same one. Nothing is
written next to the user's model: presets may sit in read-only or shared places, and a run
directory holds only what its run wrote.

Each variant (`onnx-float32`, `onnx-int8`, `openvino-float32`, `openvino-int8-<data>`) is
written through `saving.atomic.staged_directory`, so a crash or a second process never leaves
a half-written export under its name, and a finished one is reused as is.
"""

import hashlib
import json
import logging
from pathlib import Path

import keras
import numpy as np

from keras_bert_zoo import __version__
from keras_bert_zoo.console import status
from keras_bert_zoo.presets.registry import cache_dir, load_preset_config
from keras_bert_zoo.saving.atomic import staged_directory
from keras_bert_zoo.saving.checksums import sha256_file

logger = logging.getLogger(__name__)
COMPLETE = "complete.json"  # written last inside the staging directory: what was built


def fingerprint(preset, task: str, task_kwargs: dict | None = None) -> str:
    """A hex digest naming what `from_preset(preset, task=task, **task_kwargs)` computes.

    >>> fingerprint("runs/sst2/preset", "classifier")[:12]
    '3f1c0a9e52b4'
    """
    config = load_preset_config(preset)
    described = {
        "architecture": config.architecture,
        "task": task,
        "preset_task": config.task,
        "task_config": config.task_config,
        "task_kwargs": task_kwargs or {},
        "lowercase": config.lowercase,
        "vocabulary": sha256_file(config.vocabulary_path),
        "weights": _weights_digest(config),
        "keras_bert_zoo": __version__,
    }
    text = json.dumps(described, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def model_fingerprint(model, task: str) -> str:
    """A hex digest naming what the Keras `model` in memory computes for `task`: its config
    and every weight's value (a `fit` or `load_weights` after an export gives a new one), and
    this package's version; the same model loaded in another process gets the same one."""
    digest = hashlib.sha256()
    described = {"task": task, "config": model.get_config(), "keras_bert_zoo": __version__}
    digest.update(json.dumps(described, sort_keys=True, default=str).encode())
    for variable in model.weights:
        digest.update(variable.path.encode())
        digest.update(np.ascontiguousarray(keras.ops.convert_to_numpy(variable)).tobytes())
    return "model-" + digest.hexdigest()[:26]


def _weights_digest(config) -> str:
    if config.weights_path is not None and config.weights_path.is_file():
        return sha256_file(config.weights_path)
    if config.weights_sha256:  # a named preset not downloaded yet: its recorded digest
        return config.weights_sha256
    raise ValueError(
        f"Preset '{config.name}' has no weights on this machine (looked in "
        f"{config.weights_path or config.directory}); a runtime export needs trained weights."
    )


def runtimes_dir() -> Path:
    """`cache_dir()/runtimes` (`$KBZ_CACHE_DIR` moves it with the preset cache)."""
    return cache_dir() / "runtimes"


def variant_dir(key: str, variant: str) -> Path:
    return runtimes_dir() / key / variant


def is_built(directory: Path) -> bool:
    return (Path(directory) / COMPLETE).is_file()


def build_once(directory: Path, build, what: str) -> Path:
    """`directory`, built by `build(staging)` unless an earlier run finished it.

    `build` writes into an empty staging directory beside `directory`, which then replaces
    it atomically; `what` names the export in the log."""
    directory = Path(directory)
    if is_built(directory):
        logger.info("Reusing the %s in %s", what, directory)
        return directory
    status.info("Writing the %s to %s (once; later runs reuse it)", what, directory)
    with staged_directory(directory) as staging:
        record = build(staging) or {}
        (staging / COMPLETE).write_text(json.dumps({"what": what, **record}, indent=2) + "\n")
    return directory
