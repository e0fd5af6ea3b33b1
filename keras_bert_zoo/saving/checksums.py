"""SHA256SUMS files (the `sha256sum` format) and paths confined to a directory.

Pure Python: a preset directory, a download and a training checkpoint are all checked with
the same three functions.
"""

import hashlib
from pathlib import Path

CHECKSUM_FILE = "SHA256SUMS"


def sha256_file(path, limit: int | None = None) -> str:
    """The hex sha256 of a file (of its first `limit` bytes if given), read in 1 MiB blocks."""
    digest, remaining = hashlib.sha256(), float("inf") if limit is None else limit
    with open(path, "rb") as handle:
        while remaining > 0 and (block := handle.read(int(min(1 << 20, remaining)))):
            digest.update(block)
            remaining -= len(block)
    return digest.hexdigest()


def resolve_inside(directory: Path, relative, what: str, container: str = "directory") -> Path:
    """`directory / relative`, refusing absolute paths and anything that escapes `directory`."""
    if not isinstance(relative, str) or not relative or Path(relative).is_absolute():
        raise ValueError(
            f"The {what} must be a relative path inside {directory}. Received: {relative!r}"
        )
    root = Path(directory).resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise ValueError(
            f"The {what} '{relative}' points outside the {container} {root}. Only files "
            f"inside the {container} may be named."
        )
    return path


def read_checksums(directory: Path) -> dict:
    """`{file name: sha256}` from `directory/SHA256SUMS`, checked for form."""
    listing = Path(directory) / CHECKSUM_FILE
    if not listing.is_file():
        raise ValueError(
            f"{directory} has no {CHECKSUM_FILE}. Re-create it (kbz convert / kbz.save_preset), "
            f"or if you trust its files write it with `cd {directory} && sha256sum * > "
            f"{CHECKSUM_FILE}`."
        )
    listed = {}
    for number, line in enumerate(listing.read_text().splitlines(), 1):
        if not line.strip():
            continue
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise ValueError(f"{listing}:{number}: expected '<sha256>  <file>', got {line!r}")
        listed[name.strip()] = digest
    return listed


def verify_file(directory: Path, name: str, listed: dict) -> Path:
    """Checks one listed file of `directory` against its sha256; returns its path."""
    if name not in listed:
        raise ValueError(f"{Path(directory) / CHECKSUM_FILE} does not list {name}.")
    path = resolve_inside(directory, name, "checksum entry", "preset directory")
    if not path.is_file():
        raise ValueError(f"{Path(directory) / CHECKSUM_FILE} lists {name}, which is missing.")
    if sha256_file(path) != listed[name]:
        raise ValueError(
            f"Checksum mismatch for {path}: the file changed or was corrupted after it was "
            "written. Re-create it (kbz convert / kbz.save_preset) or restore a good copy."
        )
    return path


def write_checksums(directory: Path) -> None:
    """Writes `SHA256SUMS` for every file directly inside `directory`."""
    directory = Path(directory)
    names = sorted(p.name for p in directory.iterdir() if p.is_file() and p.name != CHECKSUM_FILE)
    lines = [f"{sha256_file(directory / name)}  {name}" for name in names]
    (directory / CHECKSUM_FILE).write_text("\n".join(lines) + "\n")
