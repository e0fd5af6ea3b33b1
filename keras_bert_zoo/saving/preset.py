"""The preset directory format: `preset.json`, `vocab.txt`, weights and `SHA256SUMS`.

A preset directory (written by `save_preset` or `kbz convert`) is data only: no class
names, no code. `preset.json` holds the architecture (exactly `build_encoder`'s keyword
arguments), the tokenizer's vocabulary file and casing, the task with its settings, the
sequence length the model was fine-tuned or trained at (optional: the default of its
preprocessor, `kbz export`, `kbz embed` and `kbz predict`), the parameter count and
provenance. Reading a directory checks `preset.json` and the vocabulary against `SHA256SUMS`
and confines every path it names to the directory; the weights file, the large one, is
hashed once, when `read_preset_weights` reads it. No Keras here:
`kbz.save_preset` (in `saving.models`) turns a model into what `write_preset_directory`
writes.
"""

import dataclasses
import json
import os
import shutil
from pathlib import Path

from keras_bert_zoo.architecture import check_architecture, parameter_count
from keras_bert_zoo.choices import POOLING_MODES
from keras_bert_zoo.saving import ownership
from keras_bert_zoo.saving.atomic import check_replaceable, staged_directory
from keras_bert_zoo.saving.checksums import (
    read_checksums,
    resolve_inside,
    sha256_file,
    verify_file,
    write_checksums,
)
from keras_bert_zoo.saving.vocabulary import load_vocabulary
from keras_bert_zoo.saving.weights import read_weights, save_weights

PRESET_FILE = "preset.json"
VOCABULARY_FILE = "vocab.txt"
WEIGHTS_FILE = "model.weights.safetensors"


@dataclasses.dataclass(frozen=True)
class PresetConfig:
    """What a preset says: architecture, vocabulary, weights and task (parsed, checked)."""

    name: str
    directory: Path
    architecture: dict
    vocabulary_path: Path
    lowercase: bool
    task: str = "encoder"
    task_config: dict = dataclasses.field(default_factory=dict)
    num_parameters: int | None = None
    weights_path: Path | None = None
    weights_sha256: str | None = None
    weights_source: dict | None = None
    metadata: dict = dataclasses.field(default_factory=dict)
    embedder: dict = dataclasses.field(default_factory=dict)
    sequence_length: int | None = None


def check_sequence_length(value, architecture: dict, source: str) -> int | None:
    """A preset's recorded `sequence_length`: None, or an integer in [2, max_sequence_length]."""
    maximum = architecture["max_sequence_length"]
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= maximum
    ):
        raise ValueError(
            f"{source}: `sequence_length` must be an integer from 2 to the architecture's "
            f"max_sequence_length {maximum}. Received: {value!r}"
        )
    return value


def check_embedder_defaults(block, source: str) -> dict:
    """The `embedder` block of a preset: `{"pooling": one of POOLING_MODES, "normalize": bool}`."""
    if block is None:
        return {}
    if not isinstance(block, dict) or set(block) - {"pooling", "normalize"}:
        raise ValueError(
            f"{source}: `embedder` must be an object with keys `pooling` and `normalize`. "
            f"Received: {block!r}"
        )
    if "pooling" in block and block["pooling"] not in POOLING_MODES:
        raise ValueError(
            f"{source}: `embedder.pooling` must be one of {list(POOLING_MODES)}. "
            f"Received: {block['pooling']!r}"
        )
    if "normalize" in block and not isinstance(block["normalize"], bool):
        raise ValueError(
            f"{source}: `embedder.normalize` must be true or false. "
            f"Received: {block['normalize']!r}"
        )
    return dict(block)


def parse_preset(data: dict, directory: Path, source: str, name: str) -> PresetConfig:
    """Checks a parsed `preset.json` (or bundled preset file) and returns its config."""
    if not isinstance(data, dict):
        raise ValueError(f"{source} must hold a JSON object.")
    tokenizer = data.get("tokenizer") or {}
    if not isinstance(tokenizer.get("lowercase"), bool):
        raise ValueError(f"{source}: `tokenizer.lowercase` must be true or false.")
    vocabulary = resolve_inside(
        directory, tokenizer.get("vocabulary"), "vocabulary of " + source, "preset directory"
    )
    if not vocabulary.is_file():
        raise ValueError(f"{source}: vocabulary file {vocabulary} is missing.")
    expected = tokenizer.get("vocabulary_sha256")
    if expected and sha256_file(vocabulary) != expected:
        raise ValueError(f"{source}: checksum mismatch for {vocabulary}; reinstall or re-create.")
    weights = data.get("weights") or {}
    weights_path = None
    if weights.get("file"):
        weights_path = resolve_inside(
            directory, weights["file"], "weights file of " + source, "preset directory"
        )
    architecture = check_architecture(data.get("architecture"), source)
    return PresetConfig(
        name=data.get("name") or name,
        directory=directory,
        architecture=architecture,
        vocabulary_path=vocabulary,
        lowercase=tokenizer["lowercase"],
        task=data.get("task", "encoder"),
        task_config=dict(data.get("task_config") or {}),
        num_parameters=data.get("num_parameters"),
        weights_path=weights_path,
        weights_source=weights.get("source"),
        metadata={k: data[k] for k in ("description", "license", "provenance") if k in data},
        embedder=check_embedder_defaults(data.get("embedder"), source),
        sequence_length=check_sequence_length(data.get("sequence_length"), architecture, source),
    )


def read_preset_directory(directory) -> PresetConfig:
    """Reads a preset directory; `preset.json` and the vocabulary are checked against
    `SHA256SUMS` (the weights are checked when read).

    >>> config = kbz.saving.read_preset_directory("runs/sst2/preset")
    """
    directory = Path(directory)
    listed = read_checksums(directory)
    verify_file(directory, PRESET_FILE, listed)
    source = str(directory / PRESET_FILE)
    config = parse_preset(
        json.loads((directory / PRESET_FILE).read_text()), directory, source, directory.name
    )
    vocabulary = config.vocabulary_path.relative_to(directory.resolve()).as_posix()
    verify_file(directory, vocabulary, listed)
    weights_sha256 = None
    if config.weights_path is not None:
        weights_name = config.weights_path.relative_to(directory.resolve()).as_posix()
        if weights_name not in listed:
            raise ValueError(f"{directory / 'SHA256SUMS'} does not list {weights_name}.")
        weights_sha256 = listed[weights_name]
    return dataclasses.replace(config, weights_sha256=weights_sha256)


def read_preset_weights(config: PresetConfig) -> dict:
    """The preset's weights (path -> numpy array), verified against their sha256 first."""
    if config.weights_sha256 and sha256_file(config.weights_path) != config.weights_sha256:
        raise ValueError(
            f"Checksum mismatch for {config.weights_path}: the file changed or was corrupted "
            "after the preset was written. Re-create the preset (kbz convert / "
            "kbz.save_preset), or delete it to download it again."
        )
    return read_weights(config.weights_path)


def check_new_directory(directory, overwrite: bool) -> Path:
    """`directory` as a Path, if it does not exist yet or may be replaced: `overwrite`
    replaces an earlier preset or converted checkpoint, never a folder of other files."""
    return check_replaceable(directory, ownership.PRESET, overwrite, "a preset or checkpoint")


def write_preset_directory(
    directory,
    architecture: dict,
    variables,
    vocabulary,
    lowercase: bool,
    task: str = "encoder",
    task_config: dict | None = None,
    metadata: dict | None = None,
    overwrite: bool = False,
    sequence_length: int | None = None,
) -> Path:
    """Writes a preset directory atomically from an architecture and its variables.

    `variables` are objects with `.path` and `.numpy()` (Keras variables); `vocabulary` is a
    vocab.txt path or a list of tokens; `sequence_length` (optional) the length the model
    was trained at. `kbz.save_preset(model, ...)` is the usual entry.
    """
    directory = check_new_directory(directory, overwrite)
    data = {
        **(metadata or {}),
        "name": directory.name,
        "architecture": check_architecture(architecture, "the model's architecture"),
        "tokenizer": {"vocabulary": VOCABULARY_FILE, "lowercase": bool(lowercase)},
        "task": task,
        "task_config": dict(task_config or {}),
        "num_parameters": parameter_count(architecture),
        "weights": {"file": WEIGHTS_FILE},
    }
    if check_sequence_length(sequence_length, architecture, "save_preset") is not None:
        data["sequence_length"] = sequence_length
    with staged_directory(directory) as staging:
        if isinstance(vocabulary, (str, os.PathLike)):
            shutil.copyfile(vocabulary, staging / VOCABULARY_FILE)
        else:
            (staging / VOCABULARY_FILE).write_text("".join(f"{t}\n" for t in vocabulary))
        tokens = len(load_vocabulary(staging / VOCABULARY_FILE))
        if tokens != architecture["vocabulary_size"]:
            raise ValueError(
                f"The vocabulary has {tokens} tokens but the model's "
                f"vocabulary_size is {architecture['vocabulary_size']}."
            )
        save_weights(variables, staging / WEIGHTS_FILE)
        (staging / PRESET_FILE).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        write_checksums(staging)
    return directory
