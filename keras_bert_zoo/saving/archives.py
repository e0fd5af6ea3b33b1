"""Unpacking zip archives safely: no absolute paths, no `..`, no links, no zip bombs.

Used for Google's checkpoint releases, downloaded or handed to `kbz convert`.
"""

import shutil
import stat
import zipfile
from pathlib import Path, PurePosixPath

MAX_UNPACKED_BYTES = 16 << 30  # larger than any BERT release; stops zip bombs


def _member_problem(info: zipfile.ZipInfo) -> str | None:
    name = info.filename.replace("\\", "/")
    parts = PurePosixPath(name).parts
    if name.startswith("/") or (parts and ":" in parts[0]):
        return "is an absolute path"
    if ".." in parts:
        return "climbs out of the archive ('..')"
    if stat.S_ISLNK(info.external_attr >> 16):
        return "is a symbolic link"
    return None


def safe_extract(archive: Path, destination: Path) -> None:
    """Unpacks a zip into `destination`, refusing absolute paths, `..`, links and bombs.

    >>> safe_extract(Path("uncased_L-2_H-128_A-2.zip"), Path("unpacked"))
    """
    try:
        with zipfile.ZipFile(archive) as bundle:
            members = bundle.infolist()
            for info in members:
                problem = _member_problem(info)
                if problem:
                    raise ValueError(
                        f"{archive}: member {info.filename!r} {problem}; refusing "
                        "to unpack it. The archive is not a genuine release."
                    )
            if sum(info.file_size for info in members) > MAX_UNPACKED_BYTES:
                raise ValueError(f"{archive} unpacks to more than {MAX_UNPACKED_BYTES} bytes.")
            root = destination.resolve()
            for info in members:
                target = (root / info.filename.replace("\\", "/")).resolve()
                if not target.is_relative_to(root):
                    raise ValueError(f"{archive}: member {info.filename!r} escapes {root}.")
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with bundle.open(info) as source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
    except (zipfile.BadZipFile, EOFError) as error:
        raise ValueError(
            f"{archive} is not a readable zip archive ({error}); it is truncated "
            "or corrupted. Fetch it again."
        ) from error
