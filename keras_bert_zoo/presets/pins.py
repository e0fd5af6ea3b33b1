"""Which downloaded weights are trusted: sha256 pins, and hashes recorded on first use.

A named preset's `weights.source` pins its release in one of two ways, both checked by
`fetch_preset_weights` (in `downloads`):

- `sha256`: the hash of the archive itself, checked before it is unpacked.
- `files_sha256`: `{file name: sha256}` of the files inside the release folder (Google
  publishes no hash of its zips; NVIDIA DeepLearningExamples publishes these, see the
  preset's `weights.source.pins`), or of each file of a Hugging Face file set (format
  "huggingface", fetched file by file by `hub`; names may be one folder deep, such as
  `1_Pooling/config.json`). After the safe unpacking and before anything is parsed
  or converted, every listed file must exist and match. `bert_model.ckpt.meta` alone may be
  missing: the converter never reads it (the TF1 checkpoint reader needs only `.index` and
  the `.data-*` shard it names); when present it is checked too. Files the list does not
  name are ignored, since the converter reads only the four required ones.

A preset with neither (Google's 2020 small models: no hash of them was ever published) is
unpinned: its archive is used with a warning, checked as far as it can be (vocabulary equal
to the bundled one, `bert_config.json` equal to the preset's architecture, the parameter
count when the model is built), and its sha256 is recorded in
`cache_dir()/downloads/recorded_sha256.json` on first use. Every later archive for that
preset (a new download after the cache was deleted, or one put in `downloads/` by hand) must
have the recorded hash: trust on first use.

Environment:
    KBZ_REQUIRE_PINNED=1: refuse unpinned presets (neither downloaded nor read by hand);
        weights converted into the cache earlier are still used.
"""

import json
import logging
import os
import re
from pathlib import Path

from keras_bert_zoo.presets.registry import downloads_dir
from keras_bert_zoo.saving.atomic import write_json
from keras_bert_zoo.saving.checksums import sha256_file

logger = logging.getLogger(__name__)

REQUIRE_PINNED_ENV = "KBZ_REQUIRE_PINNED"
RECORDED_FILE = "recorded_sha256.json"
REQUIRED_FILES = (
    "bert_config.json",
    "bert_model.ckpt.data-00000-of-00001",
    "bert_model.ckpt.index",
    "vocab.txt",
)
HUGGINGFACE_REQUIRED_FILES = ("config.json", "model.safetensors", "vocab.txt")
OPTIONAL_FILES = ("bert_model.ckpt.meta",)  # the TF1 graph; the converter never reads it
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_PART = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_PLAIN_NAME = re.compile(rf"^{_PART}(/{_PART})?$")  # no "..", no absolute path
_YES, _NO = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def require_pinned() -> bool:
    """Whether `KBZ_REQUIRE_PINNED` is set to refuse unpinned presets (1/true/yes/on)."""
    value = os.environ.get(REQUIRE_PINNED_ENV, "").strip().lower()
    if value in _YES or value in _NO:
        return value in _YES
    raise ValueError(
        f"{REQUIRE_PINNED_ENV}={os.environ[REQUIRE_PINNED_ENV]!r} is not understood. Set it "
        "to 1 to refuse presets whose weights are not pinned, or to 0 (or unset it)."
    )


def _is_sha256(value) -> bool:
    return isinstance(value, str) and bool(_SHA256.match(value.lower()))


def archive_pin(config) -> str | None:
    """`weights.source.sha256` (lower case), or None when the preset pins no archive hash."""
    value = (config.weights_source or {}).get("sha256")
    if value is None:
        return None
    if not _is_sha256(value):
        raise ValueError(
            f"Preset '{config.name}': weights.source.sha256 must be 64 hex digits or null; "
            f"got {value!r}. Fix the preset file."
        )
    return value.lower()


def pinned_files(config) -> dict:
    """`weights.source.files_sha256` checked for form (`{}` when the preset has none).

    >>> sorted(pinned_files(kbz.presets.load_preset_config("bert_base_en_uncased")))[-1]
    'vocab.txt'
    """
    source = config.weights_source or {}
    files = source.get("files_sha256") or {}
    required = REQUIRED_FILES
    if source.get("format") == "huggingface":
        required = HUGGINGFACE_REQUIRED_FILES
    where = f"Preset '{config.name}': weights.source.files_sha256"
    if not isinstance(files, dict) or not all(
        isinstance(name, str) and _PLAIN_NAME.match(name) and _is_sha256(digest)
        for name, digest in files.items()
    ):
        raise ValueError(
            f"{where} must map plain file names (e.g. 'vocab.txt', at most one folder deep) "
            f"to 64-hex-digit sha256 values; got {files!r}. Fix the preset file."
        )
    missing = [name for name in required if name not in files]
    if files and missing:
        raise ValueError(
            f"{where} lacks {missing}: every file the converter reads must be pinned "
            f"({', '.join(required)}). Fix the preset file."
        )
    return {name: digest.lower() for name, digest in files.items()}


def is_pinned(config) -> bool:
    """Whether the preset pins its archive (`sha256`) or the files in it (`files_sha256`)."""
    return bool(archive_pin(config) or pinned_files(config))


def check_allowed(config) -> None:
    """Refuses an unpinned preset when `KBZ_REQUIRE_PINNED=1`, before anything is fetched."""
    if require_pinned() and not is_pinned(config):
        raise ValueError(
            f"Preset '{config.name}' pins no sha256 for its weights (neither "
            "weights.source.sha256 nor weights.source.files_sha256 in its preset file; none "
            f"was published for this release), and {REQUIRE_PINNED_ENV}=1 refuses unpinned "
            f"presets, so nothing was downloaded. Unset {REQUIRE_PINNED_ENV} to download it "
            "(its sha256 is then recorded on first use and checked on every later use), pin "
            "the release in the preset file, or pass load_weights=False for random weights."
        )


def recorded_path() -> Path:
    """`cache_dir()/downloads/recorded_sha256.json`: archive hashes of unpinned presets."""
    return downloads_dir() / RECORDED_FILE


def read_recorded() -> dict:
    """`{preset: {"archive": name, "sha256": hex, "url": url}}` recorded so far."""
    path = recorded_path()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict) or not all(
        isinstance(entry, dict) and _is_sha256(entry.get("sha256")) for entry in data.values()
    ):
        raise ValueError(
            f"{path} is not a JSON object of {{preset: {{'archive': name, 'sha256': hex}}}}. "
            "Delete it: the hashes of unpinned presets are then recorded again on their next "
            "download."
        )
    return data


def verify_archive(config, archive: Path, digest: str, fix: str) -> None:
    """Checks an archive's sha256 before it is unpacked: its pin, else the recorded hash.

    `fix` says how to get a good copy (delete a hand-placed file, or download again).
    """
    expected = archive_pin(config)
    if expected and digest != expected:
        raise ValueError(
            f"Checksum mismatch for {archive.name} of preset '{config.name}': expected sha256 "
            f"{expected}, got {digest}. The file is corrupted or not the release the preset "
            f"names; nothing was unpacked or cached. {fix}"
        )
    if expected or pinned_files(config):
        return
    record = read_recorded().get(config.name)
    if record and digest != record["sha256"].lower():
        raise ValueError(
            f"Checksum mismatch for {archive.name} of unpinned preset '{config.name}': its "
            f"sha256 is {digest}, but sha256 {record['sha256']} was recorded in "
            f"{recorded_path()} when the preset was first downloaded. The file is corrupted "
            f"or not the release used before; nothing was unpacked or cached. {fix} If the "
            f"release really changed, delete the '{config.name}' entry of {recorded_path()} "
            "to trust the new file."
        )
    logger.warning(
        "Preset '%s' pins no sha256 (none was published for this release): using %s with "
        "sha256 %s, %s. Checked instead: its vocab.txt and bert_config.json against the "
        "preset, and the parameter count when the model is built. Set %s=1 to refuse "
        "unpinned presets.",
        config.name,
        archive.name,
        digest,
        "the one recorded on first use" if record else f"recorded in {recorded_path()}",
        REQUIRE_PINNED_ENV,
    )


def verify_files(config, folder: Path, archive_name: str, fix: str) -> None:
    """Checks every pinned file of an unpacked release, before anything reads them."""
    for name, expected in sorted(pinned_files(config).items()):
        path = folder / name
        if not path.is_file():
            if name in OPTIONAL_FILES:
                logger.info("%s holds no %s (never read; not needed).", archive_name, name)
                continue
            raise ValueError(
                f"{archive_name} of preset '{config.name}' has no {name} beside "
                f"bert_config.json, but the preset pins it (weights.source.files_sha256): "
                f"the archive is incomplete or not the release; nothing was cached. {fix}"
            )
        found = sha256_file(path)
        if found != expected:
            raise ValueError(
                f"Checksum mismatch for {name} inside {archive_name} of preset "
                f"'{config.name}': expected sha256 {expected} (weights.source.files_sha256), "
                f"found {found}. The archive is corrupted or not the release the preset "
                f"names; nothing was converted or cached. {fix}"
            )


def record_archive(config, archive_name: str, digest: str, url: str) -> None:
    """Records an unpinned preset's archive sha256 the first time it is used."""
    if is_pinned(config):
        return
    recorded = read_recorded()
    if config.name in recorded:
        return
    recorded[config.name] = {"archive": archive_name, "sha256": digest, "url": url}
    write_json(recorded_path(), recorded)
    logger.info("Recorded sha256 %s of %s in %s.", digest, archive_name, recorded_path())
