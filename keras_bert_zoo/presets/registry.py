"""Named presets: the bundled JSON files, and the cache of their converted weights.

A named preset is `bundled/<name>.json` inside this package, read when asked (no
import-time registry): the architecture, the vocabulary (`bundled/vocab/`, with its sha256),
and where the pretrained weights come from. Once downloaded and converted, its weights live
in `cache_dir()/<name>`, an ordinary preset directory.
"""

import dataclasses
import difflib
import json
import os
from pathlib import Path

from keras_bert_zoo.saving.preset import (
    PRESET_FILE,
    PresetConfig,
    parse_preset,
    read_preset_directory,
)

CACHE_ENV = "KBZ_CACHE_DIR"
DOWNLOADS_FOLDER = "downloads"


def builtin_presets_dir() -> Path:
    """The folder of bundled preset files (`keras_bert_zoo/presets/bundled`)."""
    return Path(__file__).resolve().parent / "bundled"


def list_presets() -> list[str]:
    """Sorted names of the bundled presets.

    >>> kbz.list_presets()[:2]
    ['all_minilm_l6_v2', 'bert_base_en']
    """
    return sorted(p.stem for p in builtin_presets_dir().glob("*.json"))


def cache_dir() -> Path:
    """Where converted pretrained weights of named presets live (`$KBZ_CACHE_DIR`)."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "keras_bert_zoo"
    return Path(os.environ.get(CACHE_ENV, default))


def downloads_dir() -> Path:
    """`cache_dir()/downloads`: hand-placed archives and the sha256 recorded on first use."""
    return cache_dir() / DOWNLOADS_FOLDER


def _unknown_name_error(name: str) -> ValueError:
    names = list_presets()
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return ValueError(
        f"Unknown preset '{name}'.{hint} Known presets: {', '.join(names)}. "
        "A preset directory path works too."
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
        return read_preset_directory(path)
    if os.sep in text or text.startswith("."):
        raise ValueError(
            f"No preset directory at '{text}' (it does not exist or is not a "
            "directory). Pass a bundled preset name or a directory path."
        )
    if text not in list_presets():
        raise _unknown_name_error(text)
    builtin = builtin_presets_dir()
    data = json.loads((builtin / f"{text}.json").read_text())
    config = parse_preset(data, builtin, f"preset '{text}'", text)
    cached = cache_dir() / text
    if (cached / PRESET_FILE).is_file():  # weights converted earlier (kbz convert / download)
        cached_config = read_preset_directory(cached)
        config = dataclasses.replace(
            config,
            weights_path=cached_config.weights_path,
            weights_sha256=cached_config.weights_sha256,
            task=cached_config.task,
            task_config=cached_config.task_config,
            sequence_length=config.sequence_length or cached_config.sequence_length,
        )
    return config
