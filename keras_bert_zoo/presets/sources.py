"""Where a model comes from: a preset name, a preset directory, or a run's output directory.

`kbz predict`, `kbz embed` and the reranker's `--negatives-from` all take any of them; a
`kbz finetune` / `kbz pretrain` output directory holds its model in `preset/` and the
settings it ran with in `run.json` (written by `jobs.rundir`), which are the defaults of what
uses the model (its sequence length, `run_sequence_length`; its task options).
"""

import json
from pathlib import Path

from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.saving.preset import PRESET_FILE

RUN_MANIFEST = "run.json"  # a run directory's record of its settings and inputs
# For a model that records no length: BERT's usual fine-tuning length (the model's own
# `max_sequence_length` where that is shorter).
DEFAULT_SEQUENCE_LENGTH = 128


def is_run_directory(path) -> bool:
    """Whether `path` is a run's output directory (its model in `preset/`), not a preset."""
    path = Path(path)
    return path.is_dir() and (path / "preset").is_dir() and not (path / PRESET_FILE).is_file()


def model_source(model) -> tuple[Path | str, dict]:
    """`(preset, settings)`: for a run directory its `preset/` and the settings its
    `run.json` records, else `model` itself (a directory as a `Path`, a name as a string) and
    no settings.

    >>> preset, settings = model_source("runs/sst2")  # runs/sst2/preset, {"sequence_length": ...}
    """
    path = Path(model)
    if is_run_directory(path):
        manifest = path / RUN_MANIFEST
        settings = json.loads(manifest.read_text())["settings"] if manifest.is_file() else {}
        return path / "preset", settings
    return (path if path.is_dir() else str(model)), {}


def run_sequence_length(
    preset,
    given: int | None = None,
    settings: dict | None = None,
    default: int = DEFAULT_SEQUENCE_LENGTH,
) -> int:
    """The sequence length a run on the model `preset` uses, by one rule for every command:
    `given` (a flag), else the run's (`settings`, from `model_source`), else the length the
    preset records (a fine-tuned model's, a sentence-transformers model's `max_seq_length`),
    else `default` (a task's own, e.g. 384 for question answering), or the model's
    `max_sequence_length` if that is shorter.

    >>> run_sequence_length("bert_tiny_en_uncased")
    128
    >>> run_sequence_length("bert_tiny_en_uncased", given=64, settings={"sequence_length": 256})
    64
    >>> run_sequence_length("bert_tiny_en_uncased", settings={"sequence_length": 256})
    256
    """
    if given:
        return given
    if settings and settings.get("sequence_length"):
        return settings["sequence_length"]
    config = load_preset_config(preset)
    if config.sequence_length:
        return config.sequence_length
    return min(default, config.architecture["max_sequence_length"])
