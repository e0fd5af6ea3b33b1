"""Atomic writes: a directory or file appears complete under its final name, or not at all.

Everything this package writes for later use (presets, exports, converted checkpoints,
training checkpoints, records, metrics, downloads) goes through here. The new content is
written beside the destination, flushed to disk (`fsync`), and only then renamed into
place, and the directory holding it is flushed too, so neither a crash of the process nor
one of the machine leaves a half-written result under the final name. An existing
directory is replaced by an atomic exchange (Linux `renameat2(RENAME_EXCHANGE)`); where the
file system has none, the old directory is first renamed aside to `.<name>.old` and put
back by the next write if a crash came between the two renames.
"""

import contextlib
import ctypes
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from keras_bert_zoo.saving.ownership import Layout, describe, foreign_files, write_manifest

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def fsync_path(path) -> None:
    """Flushes a file's or a directory's contents and metadata to disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):  # files before their directories
        if not path.is_symlink():
            fsync_path(path)
    fsync_path(root)


def _exchange(first: Path, second: Path) -> bool:
    """Swaps two existing paths in one atomic step; False where the system cannot."""
    # Python has no binding for renameat2; glibc has had it since 2.28. ctypes, not a
    # dependency, because this is the only call needed.
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    result = renameat2(
        _AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE
    )
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EPERM):
        return False  # this file system or kernel cannot exchange
    raise OSError(code, os.strerror(code), str(first), None, str(second))


def _backup(destination: Path) -> Path:
    return destination.with_name(f".{destination.name}.old")


def recover(destination) -> None:
    """Puts back a directory left renamed aside by a crash inside `replace_directory`."""
    destination = Path(destination)
    backup = _backup(destination)
    if backup.exists() and not destination.exists():
        os.rename(backup, destination)
    elif backup.exists():
        shutil.rmtree(backup)


def replace_directory(source: Path, destination: Path) -> None:
    """Moves the complete directory `source` to `destination`, replacing it atomically."""
    recover(destination)
    if not destination.exists():
        os.rename(source, destination)
    elif _exchange(source, destination):
        shutil.rmtree(source)  # now holds the old content
    else:
        os.rename(destination, _backup(destination))
        os.rename(source, destination)
        shutil.rmtree(_backup(destination))
    fsync_path(destination.parent)


def check_replaceable(
    destination,
    layout: Layout,
    overwrite: bool,
    holds: str,
    fix: str = "Choose another directory, or pass overwrite=True to replace it.",
) -> Path:
    """`destination` as a Path if writing it loses nothing its writer did not write.

    A missing or empty directory may be written; one holding only files kbz wrote there (its
    `MANIFEST_FILE` lists them, or, written before the manifest, they match `layout`:
    `saving.ownership`) needs `overwrite`; one holding any other file, at any depth, is
    refused with those files named, `overwrite` or not, since replacing the directory would
    delete them. `holds` says what an earlier result is ("a version"), `fix` what to do.
    """
    destination = Path(destination)
    if not destination.exists():
        return destination
    if not destination.is_dir():
        raise ValueError(f"{destination} is a file; expected a directory to write {holds} in.")
    foreign = foreign_files(destination, layout=layout)
    if foreign:
        raise ValueError(
            f"{destination} holds files kbz did not write ({describe(foreign)}); writing "
            f"{holds} there would delete them, so nothing was written. Move them elsewhere, "
            "or choose another directory."
        )
    if any(destination.iterdir()) and not overwrite:
        raise ValueError(f"{destination} already holds {holds}. {fix}")
    return destination


@contextlib.contextmanager
def staged_directory(destination) -> Iterator[Path]:
    """Yields an empty directory beside `destination`; on success it replaces `destination`,
    with a `MANIFEST_FILE` listing what was written (`saving.ownership`).

    On an exception the staging directory is removed and `destination` is left untouched.

    >>> with staged_directory("exports/model/1") as staging:
    ...     write_everything_into(staging)
    """
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    try:
        yield staging
        write_manifest(staging)  # what `overwrite` may later replace (`saving.ownership`)
        for path in (staging, *staging.rglob("*")):  # mkdtemp and some writers make them private
            path.chmod(0o755 if path.is_dir() else 0o644)
        _fsync_tree(staging)
        replace_directory(staging, destination)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


@contextlib.contextmanager
def staged_file(destination) -> Iterator[Path]:
    """Yields a temporary path beside `destination`; on success it replaces `destination`.

    >>> with staged_file("out/ckpt-3.weights.h5") as temporary:
    ...     model.save_weights(temporary)
    """
    destination = Path(destination)
    if destination.is_dir():  # named here, not by the rename of a temporary name onto it
        raise IsADirectoryError(
            errno.EISDIR, "Is a directory; expected the name of a file to write", str(destination)
        )
    destination.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(  # same suffixes: Keras checks ".weights.h5"
        prefix=f".{destination.name}.",
        suffix="".join(destination.suffixes),
        dir=destination.parent,
    )
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, 0o644)
        fsync_path(temporary)
        os.replace(temporary, destination)
        fsync_path(destination.parent)
    finally:
        if temporary.exists():
            temporary.unlink()


def write_text(path, text: str) -> None:
    """Writes `text` (UTF-8) to `path` atomically."""
    with staged_file(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def write_json(path, value) -> None:
    """Writes `value` as indented, key-sorted JSON to `path` atomically."""
    write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")
