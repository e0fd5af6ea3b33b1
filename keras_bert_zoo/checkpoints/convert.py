"""`convert`: any supported BERT checkpoint to a preset directory, or back to Hugging Face.

Sources (`convert(..., source_format=...)`, `kbz convert SRC DST --from ...`):

- "google": Google's original TF1 release (bert_config.json + bert_model.ckpt.* + vocab.txt,
  a folder or its .zip), encoder, pooler, MLM and NSP heads, tanh GELU.
- "huggingface": transformers `BertModel` / `BertForPreTraining` / `BertForMaskedLM`
  directories (safetensors; pickle only with `allow_pickle=True`).
- "keras_hub": a keras-hub `BertBackbone` preset directory (`save_to_preset`).
- "auto": told apart by their files.

Targets: "keras_bert_zoo" (a preset directory; task "pretrainer" when heads were converted,
so `kbz.from_preset(dir)` gives the encoder and `task="pretrainer"` the heads) or
"huggingface" (`export_huggingface`). Each converter is a name table from the source's
variable names to our Keras variable paths, applied strictly: a missing, unused or misshapen
variable is an error naming the file and the variable.
"""

import contextlib
import json
import logging
import tempfile
import zipfile
from pathlib import Path

from keras_bert_zoo.checkpoints.common import Converted, save_converted
from keras_bert_zoo.checkpoints.google import read_google
from keras_bert_zoo.checkpoints.huggingface import read_huggingface
from keras_bert_zoo.checkpoints.keras_hub import read_keras_hub
from keras_bert_zoo.checkpoints.to_huggingface import export_huggingface
from keras_bert_zoo.saving.archives import safe_extract
from keras_bert_zoo.saving.ownership import check_apart

logger = logging.getLogger(__name__)

SOURCE_FORMATS = ("auto", "huggingface", "google", "keras_hub")
TARGET_FORMATS = ("keras_bert_zoo", "huggingface")


def _json_object(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def detect_format(source) -> str:
    """ "keras_bert_zoo", "keras_hub", "huggingface" or "google", from the folder's files.

    >>> kbz.checkpoints.detect_format("uncased_L-12_H-768_A-12")
    'google'
    """
    source = Path(source)
    if not source.is_dir():
        raise ValueError(f"{source} is not a directory (or a .zip of Google's release).")
    if (source / "preset.json").is_file() and (source / "SHA256SUMS").is_file():
        return "keras_bert_zoo"
    config = _json_object(source / "config.json")
    registered = str(config.get("registered_name") or config.get("module") or "")
    if registered.startswith(("keras_hub", "keras_nlp")):
        return "keras_hub"
    if config.get("model_type") or config.get("architectures"):
        return "huggingface"
    if (source / "bert_config.json").is_file() or any(source.glob("*.ckpt*.index")):
        return "google"
    what = (
        "has a config.json of no known format"
        if (source / "config.json").is_file()
        else "has no config.json"
    )
    raise ValueError(
        f"Cannot tell the checkpoint format of {source}: it {what} (expected: Hugging Face's "
        "config.json with model_type, or keras-hub's naming keras_hub>BertBackbone), no "
        "bert_config.json + bert_model.ckpt.* (Google's release) and no preset.json (a preset "
        "directory). Pass the format with --from."
    )


@contextlib.contextmanager
def _unpacked(source: Path):
    """`source`, or for a .zip archive the folder it unpacks to (safely, in a temp dir)."""
    if not (source.is_file() and zipfile.is_zipfile(source)):
        yield source
        return
    with tempfile.TemporaryDirectory(prefix="kbz-unzip-") as work:
        root = Path(work)
        safe_extract(source, root)
        entries = [p for p in root.iterdir() if not p.name.startswith(("__MACOSX", "."))]
        yield entries[0] if len(entries) == 1 and entries[0].is_dir() else root


def _read(source: Path, source_format: str, allow_pickle: bool, vocab_file) -> Converted:
    if vocab_file is not None and source_format != "keras_hub":
        raise ValueError(
            "--vocab-file applies to keras-hub presets only; the other formats "
            "carry their vocabulary."
        )
    if source_format == "google":
        return read_google(source)
    if source_format == "huggingface":
        return read_huggingface(source, allow_pickle)
    return read_keras_hub(source, vocab_file)


def convert(
    source,
    destination,
    source_format: str = "auto",
    target_format: str = "keras_bert_zoo",
    overwrite: bool = False,
    allow_pickle: bool = False,
    vocab_file=None,
) -> Path:
    """Converts `source` to a preset directory (or a Hugging Face directory) at `destination`.

    Args:
        source: a checkpoint folder, a .zip of Google's release, or (to export) a preset.
        destination: the directory to write; it must not exist unless `overwrite`.
        source_format: one of `SOURCE_FORMATS`; "auto" tells them apart by their files.
        target_format: "keras_bert_zoo" (a preset) or "huggingface" (transformers).
        allow_pickle: read `pytorch_model.bin` (pickle runs code: only trusted files).
        vocab_file: the vocabulary of a keras-hub preset that has no tokenizer asset.

    >>> kbz.checkpoints.convert("uncased_L-12_H-768_A-12.zip", "bert_base_uncased")
    >>> kbz.checkpoints.convert("bert_base_uncased", "hf_dir", target_format="huggingface")
    """
    for value, allowed in ((source_format, SOURCE_FORMATS), (target_format, TARGET_FORMATS)):
        if value not in allowed:
            raise ValueError(f"Unknown format {value!r}; expected one of {allowed}.")
    source = Path(source)
    if not source.exists():
        raise ValueError(f"{source} does not exist.")
    check_apart({"destination": destination}, {"source": source, "vocab_file": vocab_file})
    with _unpacked(source) as folder:
        found = detect_format(folder) if source_format == "auto" else source_format
        if found == "keras_bert_zoo":
            if target_format != "huggingface":
                raise ValueError(
                    f"{source} is already a preset directory; use --to huggingface "
                    "to export it, or copy it."
                )
            return export_huggingface(folder, destination, overwrite)
        converted = _read(folder, found, allow_pickle, vocab_file)
        converted.provenance = f"Converted ({found} format) from {source.resolve()}."
        if target_format == "keras_bert_zoo":
            return save_converted(converted, destination, overwrite)
        with tempfile.TemporaryDirectory(prefix="kbz-convert-") as work:
            preset = save_converted(converted, Path(work) / Path(destination).name)
            return export_huggingface(preset, destination, overwrite)
