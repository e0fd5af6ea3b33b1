"""Atomic writes: a directory or file appears complete under its final name, or not at all.

Everything this package writes for later use (presets, exports, converted checkpoints,
metrics, checkpoint state) goes through here, so a crash or a full disk mid-write never
leaves a half-written result looking complete.
"""

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def staged_directory(destination) -> Iterator[Path]:
    """Yields an empty directory beside `destination`; on success it replaces `destination`.

    On an exception the staging directory is removed and `destination` is left untouched.

    >>> with staged_directory("exports/model/1") as staging:
    ...     write_everything_into(staging)
    """
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    try:
        yield staging
        for path in (staging, *staging.rglob("*")):  # mkdtemp and some writers make them private
            path.chmod(0o755 if path.is_dir() else 0o644)
        if destination.exists():
            shutil.rmtree(destination)
        staging.rename(destination)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def write_json(path, value) -> None:
    """Writes `value` as JSON to a temporary file beside `path`, then renames it into place."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as stream:
            json.dump(value, stream, indent=2, sort_keys=True)
            stream.write("\n")
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
