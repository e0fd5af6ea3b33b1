"""Pretrained weights of named presets: download once, verify, convert, cache.

`fetch_preset_weights(config)` (called by `from_preset` when a named preset has no cached
weights) fetches a Hugging Face file set with `hub` (format "huggingface"), or downloads the
preset's archive (`weights.source.url`, Google's zip) with a progress
bar into a temporary file, checks its sha256 *before* unpacking (against the preset's pin,
or for an unpinned preset the hash recorded on its first use), unpacks it safely (no
absolute paths, `..` or links), checks the files pinned by `weights.source.files_sha256`
*before* anything reads them, checks the vocabulary and `bert_config.json` against the
preset, converts it with the Google converter, and moves the preset directory into
`cache_dir()/<name>` in one rename. Later calls read the cache, offline. What is trusted,
and why, is `pins`'s docstring.

Environment:
    KBZ_CACHE_DIR: the cache (see `registry.cache_dir`).
    KBZ_WEIGHTS_MIRROR: a URL or folder holding the archives by file name, instead of
        their original URLs (air-gapped machines, tests).
    KBZ_REQUIRE_PINNED=1: refuse presets that pin no sha256 (see `pins`).

An archive put by hand at `cache_dir()/downloads/<file>` is used instead of downloading,
and checked the same way.
"""

import logging
import os
import re
import shutil
import tempfile
import urllib.parse
from pathlib import Path, PurePosixPath

from keras_bert_zoo.architecture import normalized
from keras_bert_zoo.checkpoints.google import convert_google, read_google_config
from keras_bert_zoo.presets.hub import fetch_huggingface_files
from keras_bert_zoo.presets.pins import (
    check_allowed,
    record_archive,
    verify_archive,
    verify_files,
)
from keras_bert_zoo.presets.registry import cache_dir, downloads_dir
from keras_bert_zoo.presets.transfer import MIRROR_ENV, download
from keras_bert_zoo.saving.archives import safe_extract
from keras_bert_zoo.saving.atomic import fsync_path
from keras_bert_zoo.saving.checksums import sha256_file
from keras_bert_zoo.saving.preset import PRESET_FILE, WEIGHTS_FILE, read_preset_directory

logger = logging.getLogger(__name__)

_ARCHIVE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.zip$")


def archive_url(url: str) -> str:
    """`url`, or the same file name under `$KBZ_WEIGHTS_MIRROR` (a URL or a folder)."""
    mirror = os.environ.get(MIRROR_ENV)
    if not mirror:
        return url
    name = archive_name(url)
    if "://" not in mirror:
        return Path(mirror).resolve().joinpath(name).as_uri()
    return mirror.rstrip("/") + "/" + urllib.parse.quote(name)


def archive_name(url: str) -> str:
    name = PurePosixPath(urllib.parse.urlparse(url).path).name
    if not _ARCHIVE_NAME.match(name):
        raise ValueError(f"Weights URL {url!r} does not end in a plain .zip file name.")
    return name


def find_checkpoint_folder(root: Path) -> Path:
    """The folder of an unpacked release that holds `bert_config.json`."""
    found = sorted(
        p.parent for p in root.rglob("bert_config.json") if len(p.relative_to(root).parts) <= 3
    )
    if len(found) != 1:
        raise ValueError(
            f"Expected one bert_config.json in the unpacked archive, found "
            f"{len(found)}: {[str(p.relative_to(root)) for p in found]}."
        )
    return found[0]


def unavailable_error(config, reason: str) -> ValueError:
    """The error for missing weights: which file to fetch, and where to put it."""
    url = (config.weights_source or {}).get("url", "the original release")
    name = archive_name(url)
    local = downloads_dir() / name
    return ValueError(
        f"Pretrained weights for preset '{config.name}' are not available on this machine "
        f"(looked in {cache_dir() / config.name}) and {reason}. Fetch {url} and put it, "
        f"still zipped, at {local}: the next kbz.from_preset('{config.name}') verifies and "
        f"converts it offline. Or set {MIRROR_ENV} to a URL or folder that holds {name}, "
        "use load_weights=False for fresh random weights, or convert it yourself: "
        f"`kbz convert {local} DST_DIR` (the .zip as fetched, or the folder it unzips to), "
        "then load kbz.from_preset(DST_DIR)."
    )


def _obtain_archive(config, work: Path) -> tuple[Path, str]:
    """`(archive path, sha256)`: the hand-placed archive, else a fresh download into `work`."""
    url = (config.weights_source or {})["url"]
    local = downloads_dir() / archive_name(url)
    if local.is_file():
        return local, sha256_file(local)
    location = archive_url(url)
    archive = work / archive_name(url)
    try:
        return archive, download(location, archive)
    except (OSError, ValueError) as error:  # URLError, HTTPError, timeouts are OSErrors
        raise unavailable_error(config, f"downloading {location} failed ({error})") from error


def _how_to_fix(config, archive: Path) -> str:
    """The fix for an archive that fails its checks: which file to delete or fetch again."""
    url = config.weights_source["url"]
    if archive.parent == downloads_dir():
        return f"Delete {archive} (put there by hand) and fetch {url} again."
    return (
        f"The file served at {archive_url(url)} is not the release: try again later, or "
        f"fetch {url} yourself and put it at {downloads_dir() / archive.name}."
    )


def _check_release(config, folder: Path) -> None:
    architecture = read_google_config(folder / "bert_config.json")
    if normalized(architecture) != normalized(config.architecture):
        raise ValueError(
            f"{folder / 'bert_config.json'} describes {architecture}, not preset "
            f"'{config.name}' ({config.architecture}); wrong archive."
        )
    vocabulary = folder / "vocab.txt"
    if not vocabulary.is_file() or sha256_file(vocabulary) != sha256_file(config.vocabulary_path):
        raise ValueError(
            f"{vocabulary} differs from preset '{config.name}''s vocabulary "
            f"{config.vocabulary_path}; wrong archive."
        )


def fetch_preset_weights(config) -> Path:
    """Downloads, verifies, converts and caches a named preset's weights; returns the file.

    >>> fetch_preset_weights(kbz.presets.load_preset_config("bert_tiny_en_uncased"))
    PosixPath('~/.cache/keras_bert_zoo/bert_tiny_en_uncased/model.weights.safetensors')
    """
    cached = cache_dir() / config.name
    if (cached / PRESET_FILE).is_file():
        return read_preset_directory(cached).weights_path
    if cached.exists():
        raise ValueError(
            f"{cached} exists but holds no preset (an interrupted copy?); delete "
            f"it and load preset '{config.name}' again."
        )
    source = config.weights_source or {}
    if source.get("format") == "huggingface":  # a Hugging Face file set (all_minilm_l6_v2)
        return fetch_huggingface_files(config, cached)
    if source.get("format") != "google_tf1":
        raise unavailable_error(
            config,
            f"its format {source.get('format')!r} is neither "
            "'google_tf1' nor 'huggingface', the ones fetched automatically",
        )
    check_allowed(config)  # KBZ_REQUIRE_PINNED=1 and an unpinned preset: refused here
    cached.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{config.name}.", dir=cached.parent))
    try:
        archive, digest = _obtain_archive(config, work)
        verify_archive(config, archive, digest, _how_to_fix(config, archive))
        safe_extract(archive, work / "unpacked")
        folder = find_checkpoint_folder(work / "unpacked")
        verify_files(config, folder, archive.name, _how_to_fix(config, archive))
        _check_release(config, folder)  # parses bert_config.json: only after verify_files
        provenance = {"provenance": f"Converted from {source['url']} (sha256 {digest})."}
        converted = convert_google(
            folder,
            work / "preset" / config.name,
            heads=None,  # keep the release's MLM/NSP heads
            metadata={**config.metadata, **provenance},
        )
        if not cached.exists():  # another process may have finished first: keep its copy
            os.rename(converted, cached)  # converted and flushed by staged_directory
            fsync_path(cached.parent)
        record_archive(config, archive.name, digest, source["url"])  # unpinned: first use
    finally:
        shutil.rmtree(work, ignore_errors=True)
    logger.info("Cached the weights of preset '%s' in %s.", config.name, cached)
    return cached / WEIGHTS_FILE
