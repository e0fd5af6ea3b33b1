"""Which files below a directory kbz wrote: the one rule behind `overwrite` and `--overwrite`.

A directory kbz writes is owned through a record of every file it wrote there (relative
paths; an empty directory it made counts as a file):
- a directory written whole (a preset, a SavedModel version, an ONNX export, a converted or
  Hugging Face checkpoint) holds `MANIFEST_FILE` (`.kbz-files.json`), written inside it by
  `saving.atomic.staged_directory`; TF Serving, transformers, sentence-transformers and
  `kbz.from_preset` read only the files they know, so a hidden extra file is ignored;
- a training run's directory is recorded by its `run.json` (`files`, written when the run
  completes); a manifest below it (`preset/`, `export/1/`) records that folder.

`overwrite` removes exactly the owned files, and is refused, naming the others, when any
other file is anywhere below, at any depth: nothing a user put there is ever deleted.

Where there is no record, a file is owned only if its relative path matches the writer's
known structure exactly (`Layout.patterns`, one shell pattern per path segment, so
`logs/train/events.out.tfevents.*` never matches `logs/my_analysis.txt`):
- directories written by versions before the record (no manifest, or a `run.json` without
  `files`);
- a run that has not completed (killed, or still running): its files are written over time
  (checkpoints, TensorBoard events) and recorded only at completion, so until then the run's
  structure decides.
Outputs never touch inputs: `check_apart` refuses an output path equal to, inside or
containing an input path before any work (every writing command calls it), since writing
the output, or replacing it with `overwrite`, would change the input.

Staging leftovers of a killed atomic write (`.<name>.<random>` beside an owned name) are
owned with everything below them: kbz made those names and nothing else uses them.
"""

import dataclasses
import fnmatch
import json
import os
import shutil
from pathlib import Path

MANIFEST_FILE = ".kbz-files.json"
_LISTED = 5  # foreign files named in an error; the rest are counted


@dataclasses.dataclass(frozen=True)
class Layout:
    """What a writer writes: shell patterns of relative paths, one pattern per segment.

    `**` as the last segment matches everything below. A pattern ending in `/` names an
    (empty) directory.
    """

    patterns: tuple

    def matches(self, relative: str) -> bool:
        parts = relative.rstrip("/").split("/")
        return any(_match(pattern.rstrip("/").split("/"), parts) for pattern in self.patterns)

    def below(self, prefix: str) -> "Layout":
        """This layout's patterns under the folder `prefix` (e.g. a run's `preset/`)."""
        return Layout(tuple(f"{prefix}/{pattern}" for pattern in self.patterns))

    def __add__(self, other: "Layout") -> "Layout":
        return Layout(self.patterns + other.patterns)


def _match(pattern: list, parts: list) -> bool:
    if pattern and pattern[-1] == "**":
        head = pattern[:-1]
        return len(parts) > len(head) and _match(head, parts[: len(head)])
    return len(pattern) == len(parts) and all(
        fnmatch.fnmatchcase(part, segment) for segment, part in zip(pattern, parts, strict=True)
    )


def staging_leftovers(names) -> Layout:
    """`.<name>.<random>` (atomic staging and `.old` backups) of each owned top-level name,
    with everything below them."""
    return Layout(tuple(p for n in names for p in (f".{n}.*", f".{n}.*/**")))


def leaves(root) -> list:
    """Every file, symbolic link and empty directory below `root`, as sorted relative paths
    (`/`-separated; an empty directory ends in `/`). Symbolic links are not followed."""
    root = Path(root)
    found = []
    for folder, directories, files in os.walk(root):
        here = Path(folder).relative_to(root)
        for name in files:
            found.append((here / name).as_posix())
        for name in list(directories):
            if (Path(folder) / name).is_symlink():
                found.append((here / name).as_posix())
                directories.remove(name)
        if not directories and not files and here != Path("."):
            found.append(here.as_posix() + "/")
    return sorted(found)


def read_manifest(directory) -> set | None:
    """The files a `MANIFEST_FILE` in `directory` lists (itself included), else None."""
    path = Path(directory) / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        listed = json.loads(path.read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        return None  # unreadable: as if there were no record (the structure decides)
    if not isinstance(listed, list):
        return None
    return {str(name) for name in listed} | {MANIFEST_FILE}


def write_manifest(directory) -> None:
    """Records every file now below `directory` in its `MANIFEST_FILE` (the writer calls
    this on its staging directory, once everything is written)."""
    directory = Path(directory)
    files = [name for name in leaves(directory) if name != MANIFEST_FILE]
    (directory / MANIFEST_FILE).write_text(
        json.dumps({"written_by": "keras-bert-zoo", "files": files}, indent=2) + "\n",
        encoding="utf-8",
    )


def _nearest_manifest(root: Path, relative: str, cache: dict):
    """(folder relative to root, its listed files) of the deepest manifest above `relative`."""
    parts = relative.rstrip("/").split("/")
    for depth in range(len(parts) - 1, -1, -1):
        folder = "/".join(parts[:depth])
        if folder not in cache:
            cache[folder] = read_manifest(root / folder)
        if cache[folder] is not None:
            return folder, cache[folder]
    return None, None


def foreign_files(root, recorded=None, layout: Layout | None = None) -> list:
    """The leaves below `root` that kbz did not write (sorted relative paths).

    A leaf is kbz's if the nearest `MANIFEST_FILE` above it lists it; else, outside any
    manifest, if `recorded` (the root's own record) lists it; else, where the root has no
    record (`recorded` None), if `layout` matches it.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    manifests, foreign = {}, []
    for leaf in leaves(root):
        folder, listed = _nearest_manifest(root, leaf, manifests)
        if listed is not None:
            inner = leaf[len(folder) + 1 :] if folder else leaf
            owned = inner in listed
        elif recorded is not None:
            owned = leaf in recorded
        else:
            owned = layout is not None and layout.matches(leaf)
        if not owned:
            foreign.append(leaf)
    return foreign


def describe(paths) -> str:
    """At most `_LISTED` paths, then how many more."""
    paths = list(paths)
    shown = ", ".join(paths[:_LISTED])
    return shown + (f" and {len(paths) - _LISTED} more" if len(paths) > _LISTED else "")


def remove_owned(root, recorded=None, layout: Layout | None = None, keep=(), below="") -> None:
    """Deletes the leaves below `root` that kbz wrote (`foreign_files`' rule), except `keep`
    and those outside the folder `below` (e.g. "checkpoints/"; default: all), then the
    folders left empty by it; every other file stays where it is.
    """
    root = Path(root)
    if not root.is_dir():
        return
    others = set(foreign_files(root, recorded, layout)) | set(keep)
    for leaf in leaves(root):
        if leaf in others or not leaf.startswith(below):
            continue
        path = root / leaf.rstrip("/")
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)  # an empty directory, or a staging leftover's folder
        else:
            path.unlink(missing_ok=True)
    for folder, _, _ in sorted(os.walk(root), key=lambda entry: -len(entry[0])):
        relative = Path(folder).relative_to(root).as_posix() + "/"
        if relative == "./" or not relative.startswith(below) or relative in others:
            continue
        if not any(Path(folder).iterdir()):
            Path(folder).rmdir()


def _relation(output: Path, given: Path) -> str | None:
    """How `output` stands to the input `given`: "is", "is inside", "contains", or None."""
    out, source = output.resolve(), given.resolve()
    if out == source or (out.exists() and os.path.samefile(out, source)):
        return "is"
    if source in out.parents:
        return "is inside"
    if out in source.parents:
        return "contains"
    return None


def check_apart(outputs: dict, inputs: dict) -> None:
    """Refuses, naming both flags, an output that is, is inside or contains an input.

    `outputs` and `inputs` map a flag (or argument name) to a path, a list of paths, or
    None; only inputs that exist are compared (a preset name is not a path).

    >>> check_apart({"--output": "p.tsv"}, {"--input": "test.tsv", "--model": "runs/sst2"})
    """
    for out_flag, out_paths in outputs.items():
        for output in _paths(out_paths):
            for in_flag, in_paths in inputs.items():
                for given in _paths(in_paths):
                    if not given.exists():
                        continue
                    relation = _relation(output, given)
                    if relation:
                        raise ValueError(
                            f"{out_flag} {output} {relation} {in_flag} {given}: writing "
                            "there would overwrite the input. Choose another "
                            f"{out_flag}, outside the inputs."
                        )


def _paths(value) -> list:
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [Path(value)]
    return [Path(v) for v in value if v is not None]


# The known structure of each writer, for directories without a record (see above).
PRESET = Layout((
    "preset.json", "vocab.txt", "model.weights.safetensors", "SHA256SUMS",
    # `kbz convert --to huggingface`: transformers' and sentence-transformers' files
    "config.json", "model.safetensors", "tokenizer_config.json", "special_tokens_map.json",
    "modules.json", "sentence_bert_config.json", "1_Pooling/config.json", "2_Normalize/",
))  # fmt: skip
SAVED_MODEL = Layout((
    "saved_model.pb", "fingerprint.pb", "variables/variables.index",
    "variables/variables.data-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]",
    "assets/", "assets.extra/tf_serving_warmup_requests",
))  # fmt: skip
ONNX = Layout(("model.onnx", "export.json", "vocab.txt"))
