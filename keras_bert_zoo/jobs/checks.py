"""The checks every job makes of its flags before any work and before `--output` is written.

Each error names the flag, what it expects and the fix; paths are checked for what they must
be (an input file, an output file, an output directory), so a directory passed as `--train`
or a file name passed as `--output` stops here with exit status 2, not midway through a run
with an operating-system error.
"""

import os
from pathlib import Path

from keras_bert_zoo.jobs.config import check_flags, check_rates
from keras_bert_zoo.lora import check_targets
from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.saving.ownership import check_apart

__all__ = [
    "check_apart", "check_flags", "check_rates", "input_file", "output_directory", "output_file"
]  # fmt: skip


def check_length(flag: str, length: int, preset, minimum: int) -> None:
    maximum = load_preset_config(preset).architecture["max_sequence_length"]
    if not minimum <= length <= maximum:
        raise ValueError(
            f"{flag} must be between {minimum} and the preset's max_sequence_length "
            f"{maximum}. Received: {length}. (Below {minimum}, [CLS] and [SEP] leave too few "
            "tokens for text.)"
        )


def check_lora(rank, alpha, targets) -> None:
    """`--lora-rank` (None: off, else a positive integer), `--lora-alpha`, `--lora-targets`."""
    if rank is not None:
        check_flags(lora_rank=rank)
    if alpha is not None and (rank is None or not alpha > 0):
        raise ValueError(
            f"--lora-alpha must be a positive number and needs --lora-rank. Received: "
            f"--lora-alpha {alpha!r}, --lora-rank {rank!r}."
        )
    try:
        check_targets(targets)
    except ValueError as error:
        raise ValueError(f"--lora-targets: {error}") from None


def input_file(flag: str, path, expected: str) -> Path:
    """`path` if it is a readable file, else an error naming `flag` and the `expected` file."""
    path = Path(path)
    if path.is_dir():
        problem = "is a directory"
    elif not path.exists():
        problem = "does not exist"
    elif not os.access(path, os.R_OK):
        problem = "cannot be read (permission denied)"
    else:
        return path
    raise ValueError(f"{flag} {path} {problem}; expected {expected}. Pass the file's path.")


def _existing_ancestor(path: Path) -> Path:
    for parent in (path, *path.parents):
        if parent.exists():
            return parent
    return Path(".")


def _writable_place(flag: str, path: Path, expected: str) -> None:
    ancestor = _existing_ancestor(path.absolute().parent)
    if not ancestor.is_dir():
        raise ValueError(
            f"{flag} {path}: {ancestor} is a file, not a directory; expected {expected}."
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path}: {ancestor} is not writable. Choose another {flag}.")


def output_file(flag: str, path, expected: str, example: str) -> Path:
    """`path` if a file can be written there: not a directory, in a writable place."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(
            f"{flag} {path} is a directory; expected the {expected} to write, e.g. "
            f"{flag} {path / example}."
        )
    _writable_place(flag, path, expected)
    return path


def output_directory(flag: str, path) -> Path:
    """`path` if a run can write there: a directory (or nothing yet), in a writable place."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(
            f"{flag} {path} is a file; expected a directory for the run's outputs. Choose "
            f"another {flag}."
        )
    _writable_place(flag, path / "run.json", "a directory for the run's outputs")
    return path
