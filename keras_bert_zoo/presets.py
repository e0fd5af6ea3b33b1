"""Presets: named architectures + vocabularies shipped as JSON, and preset directories.

A named preset is `presets/<name>.json` inside the package, read when asked (no import-time
registry). A preset directory (written by `save_preset` or `kbz convert`) holds
`preset.json`, `vocab.txt`, `model.weights.safetensors` and `SHA256SUMS`; the checksums are
verified before anything in it is parsed, and every path it names must stay inside it.
Preset files are data only: no class names, no code.
"""

import dataclasses
import difflib
import hashlib
import inspect
import json
import logging
import os
from pathlib import Path

from keras_bert_zoo.vocabulary import load_vocabulary

logger = logging.getLogger(__name__)

PRESET_FILE = "preset.json"
CHECKSUM_FILE = "SHA256SUMS"
VOCABULARY_FILE = "vocab.txt"
WEIGHTS_FILE = "model.weights.safetensors"
CACHE_ENV = "KBZ_CACHE_DIR"
_ARCHITECTURE_EXCLUDED = ("dtype", "name")
_TASKS_WITHOUT_POOLER = ("tagger", "question_answerer")


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
    weights_source: dict | None = None
    metadata: dict = dataclasses.field(default_factory=dict)


def builtin_presets_dir() -> Path:
    """The bundled `presets/` folder (inside the wheel, or at the root of a source checkout)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "presets", here.parent / "presets"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"The bundled presets folder is missing next to {here}; reinstall.")


def list_presets() -> list[str]:
    """Sorted names of the bundled presets.

    >>> kbz.list_presets()[:2]
    ['bert_base_en', 'bert_base_en_uncased']
    """
    return sorted(p.stem for p in builtin_presets_dir().glob("*.json"))


def cache_dir() -> Path:
    """Where converted pretrained weights of named presets live (`$KBZ_CACHE_DIR`)."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "keras_bert_zoo"
    return Path(os.environ.get(CACHE_ENV, default))


def sha256_file(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def resolve_inside(directory: Path, relative: str, what: str) -> Path:
    """`directory / relative`, refusing absolute paths and anything that escapes `directory`."""
    if not isinstance(relative, str) or not relative or Path(relative).is_absolute():
        raise ValueError(f"Preset {what} must be a relative path inside {directory}. "
                         f"Received: {relative!r}")
    root = directory.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise ValueError(
            f"Preset {what} '{relative}' points outside the preset directory {root}. "
            "Presets may only name files inside their own directory."
        )
    return path


def verify_checksums(directory: Path) -> None:
    """Checks every file listed in `SHA256SUMS` (and that the listing covers the preset file)."""
    listing = directory / CHECKSUM_FILE
    if not listing.is_file():
        raise ValueError(
            f"Preset directory {directory} has no {CHECKSUM_FILE}. Write it with "
            f"`cd {directory} && sha256sum {PRESET_FILE} {VOCABULARY_FILE} {WEIGHTS_FILE} "
            f"> {CHECKSUM_FILE}` if you trust these files, or re-create the preset."
        )
    listed = {}
    for number, line in enumerate(listing.read_text().splitlines(), 1):
        if not line.strip():
            continue
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise ValueError(f"{listing}:{number}: expected '<sha256>  <file>', got {line!r}")
        listed[name.strip()] = digest
    if PRESET_FILE not in listed:
        raise ValueError(f"{listing} does not list {PRESET_FILE}.")
    for name, digest in listed.items():
        path = resolve_inside(directory, name, "checksum entry")
        if not path.is_file():
            raise ValueError(f"{listing} lists {name}, which is missing from {directory}.")
        if sha256_file(path) != digest:
            raise ValueError(
                f"Checksum mismatch for {path}: the file changed or was corrupted after the "
                "preset was written. Re-create the preset (kbz convert / kbz.save_preset)."
            )


def write_checksums(directory: Path) -> None:
    names = sorted(p.name for p in directory.iterdir() if p.is_file() and p.name != CHECKSUM_FILE)
    lines = [f"{sha256_file(directory / name)}  {name}" for name in names]
    (directory / CHECKSUM_FILE).write_text("\n".join(lines) + "\n")


def check_architecture(architecture, source) -> dict:
    """Validates an `architecture` block against `build_encoder`'s keyword arguments."""
    from keras_bert_zoo.encoder import build_encoder

    parameters = inspect.signature(build_encoder).parameters
    allowed = [p for p in parameters if p not in _ARCHITECTURE_EXCLUDED]
    required = [p for p in allowed if parameters[p].default is inspect.Parameter.empty]
    if not isinstance(architecture, dict):
        raise ValueError(f"{source}: `architecture` must be an object. Received: {architecture!r}")
    unknown = sorted(set(architecture) - set(allowed))
    missing = sorted(set(required) - set(architecture))
    if unknown or missing:
        raise ValueError(
            f"{source}: `architecture` must hold exactly build_encoder's arguments {allowed}. "
            f"Unknown: {unknown}; missing: {missing}."
        )
    return dict(architecture)


def _unknown_name_error(name: str) -> ValueError:
    names = list_presets()
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return ValueError(
        f"Unknown preset '{name}'.{hint} Known presets: {', '.join(names)}. "
        "A preset directory path works too."
    )


def _parse(data: dict, directory: Path, source: str, name: str) -> PresetConfig:
    if not isinstance(data, dict):
        raise ValueError(f"{source} must hold a JSON object.")
    tokenizer = data.get("tokenizer") or {}
    if not isinstance(tokenizer.get("lowercase"), bool):
        raise ValueError(f"{source}: `tokenizer.lowercase` must be true or false.")
    vocabulary = resolve_inside(directory, tokenizer.get("vocabulary"), "vocabulary")
    if not vocabulary.is_file():
        raise ValueError(f"{source}: vocabulary file {vocabulary} is missing.")
    expected = tokenizer.get("vocabulary_sha256")
    if expected and sha256_file(vocabulary) != expected:
        raise ValueError(f"{source}: checksum mismatch for {vocabulary}; reinstall or re-create.")
    weights = data.get("weights") or {}
    weights_path = None
    if weights.get("file"):
        weights_path = resolve_inside(directory, weights["file"], "weights file")
    return PresetConfig(
        name=data.get("name") or name,
        directory=directory,
        architecture=check_architecture(data.get("architecture"), source),
        vocabulary_path=vocabulary,
        lowercase=tokenizer["lowercase"],
        task=data.get("task", "encoder"),
        task_config=dict(data.get("task_config") or {}),
        num_parameters=data.get("num_parameters"),
        weights_path=weights_path,
        weights_source=weights.get("source"),
        metadata={k: data[k] for k in ("description", "license", "provenance", "labels")
                  if k in data},
    )


def load_preset_config(name_or_dir) -> PresetConfig:
    """Reads and checks a named preset or a preset directory.

    >>> cfg = kbz.presets.load_preset_config("bert_tiny_en_uncased")
    >>> cfg.architecture["num_layers"], cfg.lowercase
    (2, True)
    """
    text = os.fspath(name_or_dir)
    path = Path(text).expanduser()
    if path.is_dir():
        verify_checksums(path)
        source = str(path / PRESET_FILE)
        return _parse(json.loads((path / PRESET_FILE).read_text()), path, source, path.name)
    if os.sep in text or text.startswith("."):
        raise ValueError(f"No preset directory at '{text}' (it does not exist or is not a "
                         "directory). Pass a bundled preset name or a directory path.")
    if text not in list_presets():
        raise _unknown_name_error(text)
    builtin = builtin_presets_dir()
    data = json.loads((builtin / f"{text}.json").read_text())
    config = _parse(data, builtin, f"preset '{text}'", text)
    cached = cache_dir() / text
    if (cached / PRESET_FILE).is_file():  # weights converted earlier (kbz convert / download)
        cached_config = load_preset_config(cached)
        config = dataclasses.replace(config, weights_path=cached_config.weights_path,
                                     task=cached_config.task,
                                     task_config=cached_config.task_config)
    return config


def _no_weights_error(config: PresetConfig) -> ValueError:
    source = (config.weights_source or {}).get("url", "the original release")
    return ValueError(
        f"Pretrained weights for preset '{config.name}' are not available on this machine "
        f"(looked in {cache_dir() / config.name}). Use load_weights=False for the architecture "
        f"with fresh random weights, or convert a local checkpoint (from {source}) with "
        f"`kbz convert SRC_DIR {cache_dir() / config.name}` (or any DST_DIR, then "
        "kbz.from_preset(DST_DIR))."
    )


def from_preset(name_or_dir, task: str = "encoder", load_weights: bool = True, dtype=None,
                **task_kwargs):
    """Builds a model from a named preset or a preset directory.

    Args:
        name_or_dir: a name from `list_presets()` or a directory written by `save_preset` /
            `kbz convert`.
        task: "encoder", or a task model (see `keras_bert_zoo.tasks.TASKS`); its head is new
            unless the preset was saved from the same task.
        load_weights: False builds the architecture with fresh random weights.
        dtype: a dtype policy name such as "mixed_bfloat16".
        **task_kwargs: arguments of the task builder (e.g. `num_classes`).

    >>> enc = kbz.from_preset("bert_tiny_en_uncased", load_weights=False)
    """
    from keras_bert_zoo.encoder import build_encoder
    from keras_bert_zoo.tasks import build_task

    config = load_preset_config(name_or_dir)
    if load_weights and (config.weights_path is None or not config.weights_path.is_file()):
        if not config.weights_source:
            raise _no_weights_error(config)
        from keras_bert_zoo.downloads import fetch_preset_weights

        fetch_preset_weights(config)  # converts into the cache, with the release's heads
        config = load_preset_config(name_or_dir)  # now names the cached weights and task
    vocabulary_lines = len(load_vocabulary(config.vocabulary_path))
    if vocabulary_lines != config.architecture["vocabulary_size"]:
        raise ValueError(
            f"Preset '{config.name}': its vocabulary {config.vocabulary_path} has "
            f"{vocabulary_lines} tokens but the architecture's vocabulary_size is "
            f"{config.architecture['vocabulary_size']}. They must be equal; re-create the preset."
        )
    encoder = build_encoder(**config.architecture, dtype=dtype)
    if config.num_parameters is not None and encoder.count_params() != config.num_parameters:
        raise ValueError(
            f"Preset '{config.name}' expects {config.num_parameters:,} parameters; its "
            f"architecture builds {encoder.count_params():,}. The preset file is inconsistent."
        )
    same_task = task == config.task
    if same_task:
        task_kwargs = {**config.task_config, **task_kwargs}
    model = build_task(task, encoder, **task_kwargs)
    if load_weights:
        from keras_bert_zoo.weights import assign_weights, read_weights

        tensors = read_weights(config.weights_path)
        encoder_paths = {v.path for v in encoder.weights}
        model_paths = {v.path for v in model.weights}
        new_ok = set() if same_task else model_paths - encoder_paths
        if config.task in _TASKS_WITHOUT_POOLER:  # their graphs never held the pooler
            new_ok |= {p for p in encoder_paths if p.startswith("pooled_dense/")}
        # another task's head, and encoder parts this task's graph leaves out (the pooler)
        unused_ok = (set() if same_task else set(tensors) - encoder_paths) | (
            encoder_paths - model_paths)
        assign_weights(model.weights, tensors, config.weights_path, new_ok=new_ok,
                       unused_ok=unused_ok)
    model.preset_config = config
    return model


def save_preset(model, directory, vocabulary=None, lowercase: bool | None = None,
                task: str | None = None, task_config: dict | None = None,
                metadata: dict | None = None, overwrite: bool = False) -> Path:
    """Writes a preset directory (preset.json, vocab.txt, weights, SHA256SUMS) atomically.

    Args:
        model: an encoder or a task model built on one.
        directory: where to write; must not exist unless `overwrite`.
        vocabulary: vocab.txt path or list of tokens; default: the model's preset vocabulary.
        lowercase: the tokenizer's lowercasing; default: the model's preset setting.
        task / task_config: default: what the task builder recorded on the model.
        metadata: optional `description`, `license`, `provenance`.

    >>> kbz.save_preset(model, "my_preset")
    """
    import shutil

    from keras_bert_zoo.atomic import staged_directory
    from keras_bert_zoo.encoder import architecture_of, find_encoder, parameter_count
    from keras_bert_zoo.weights import save_weights

    directory = Path(directory)
    if directory.exists() and not overwrite:
        raise ValueError(f"{directory} already exists. Choose a new directory or pass "
                         "overwrite=True.")
    origin = getattr(model, "preset_config", None)
    vocabulary = vocabulary if vocabulary is not None else getattr(origin, "vocabulary_path", None)
    lowercase = lowercase if lowercase is not None else getattr(origin, "lowercase", None)
    if vocabulary is None or lowercase is None:
        raise ValueError("save_preset needs `vocabulary` (vocab.txt path or token list) and "
                         "`lowercase` for a model that was not loaded from a preset.")
    recorded_task, recorded_config = getattr(model, "kbz_task", ("encoder", {}))
    architecture = architecture_of(find_encoder(model))
    data = {
        **(metadata or {}),
        "name": directory.name,
        "architecture": architecture,
        "tokenizer": {"vocabulary": VOCABULARY_FILE, "lowercase": bool(lowercase)},
        "task": task or recorded_task,
        "task_config": task_config if task_config is not None else recorded_config,
        "num_parameters": parameter_count(architecture),
        "weights": {"file": WEIGHTS_FILE},
    }
    with staged_directory(directory) as staging:
        if isinstance(vocabulary, (str, os.PathLike)):
            shutil.copyfile(vocabulary, staging / VOCABULARY_FILE)
        else:
            (staging / VOCABULARY_FILE).write_text("".join(f"{t}\n" for t in vocabulary))
        tokens = len(load_vocabulary(staging / VOCABULARY_FILE))
        if tokens != architecture["vocabulary_size"]:
            raise ValueError(
                f"The vocabulary has {tokens} tokens but the "
                f"model's vocabulary_size is {architecture['vocabulary_size']}."
            )
        save_weights(model.weights, staging / WEIGHTS_FILE)
        (staging / PRESET_FILE).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        write_checksums(staging)
    return directory
