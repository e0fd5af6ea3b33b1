"""The pooling of a sentence-transformers directory, for the preset's `embedder` block.

sentence-transformers saves its pipeline in `modules.json` (`Transformer` -> `Pooling` ->
optional `Normalize`), the pooling mode in the `Pooling` module's `config.json`. This reads
them (JSON only, no sentence-transformers import) into `{"pooling", "normalize"}`, the
arguments of `kbz.build_embedder`, and `sentence_bert_config.json`'s `max_seq_length` (where
`SentenceTransformer.encode` truncates) into the preset's `sequence_length`; and writes them
back for `kbz convert --to huggingface`.
"""

import json
import logging
from pathlib import Path

logger = logging.getLogger(__name__)

_ST_MODULES = "sentence_transformers.models."
_ST_POOLING = {  # Pooling config keys -> our `pooling` modes
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
}


def _json_file(path: Path):
    try:
        return json.loads(path.read_text())
    except ValueError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from error


def read_sentence_transformers_pooling(source: Path) -> dict | None:
    """`{"pooling", "normalize"}` of a sentence-transformers directory, or None.

    None (with a warning) when the pipeline has parts we do not model (a `Dense` after
    pooling, mean-sqrt-len or weighted-mean pooling, several modes concatenated).

    >>> read_sentence_transformers_pooling(Path("all-MiniLM-L6-v2"))
    {'pooling': 'mean', 'normalize': True}
    """
    modules_file = source / "modules.json"
    if not modules_file.is_file():
        return None
    modules = _json_file(modules_file)
    types = [str(m.get("type", "")).removeprefix(_ST_MODULES) for m in modules]
    pooling = [m for m in modules if str(m.get("type", "")).endswith(".Pooling")]
    extra = [t for t in types if t not in ("Transformer", "Pooling", "Normalize")]
    config_file = source / (pooling[0].get("path") or "") / "config.json" if pooling else None
    config = _json_file(config_file) if config_file and config_file.is_file() else {}
    modes = [mode for key, mode in _ST_POOLING.items() if config.get(key)]
    if config.get("pooling_mode") in _ST_POOLING.values():  # newer sentence-transformers
        modes = [config["pooling_mode"]]
    others = [k for k, v in config.items() if k.startswith("pooling_mode_") and v]
    if len(pooling) != 1 or extra or len(modes) != 1 or len(others) > 1:
        logger.warning(
            "%s: a sentence-transformers pipeline (%s, pooling %s) that task='embedder' does "
            "not reproduce; the preset records no embedder pooling.",
            modules_file,
            types,
            others or config.get("pooling_mode"),
        )
        return None
    return {"pooling": modes[0], "normalize": "Normalize" in types}


def read_sentence_transformers_length(source: Path, architecture: dict) -> int | None:
    """`max_seq_length` of `sentence_bert_config.json` (None without one), at most the
    encoder's `max_sequence_length` (sentence-transformers could not embed more either).

    >>> read_sentence_transformers_length(Path("all-MiniLM-L6-v2"), architecture)
    256
    """
    config_file = source / "sentence_bert_config.json"
    if not config_file.is_file():
        return None
    length = _json_file(config_file).get("max_seq_length")
    maximum = architecture["max_sequence_length"]
    if isinstance(length, bool) or not isinstance(length, int) or length < 2:
        logger.warning(
            "%s: max_seq_length %r is not a length; the preset records none.", config_file, length
        )
        return None
    if length > maximum:
        logger.warning(
            "%s: max_seq_length %d exceeds the encoder's %d positions; the preset records %d.",
            config_file,
            length,
            maximum,
            maximum,
        )
    return min(length, maximum)


def write_sentence_transformers_files(
    directory: Path, architecture: dict, embedder: dict, sequence_length: int | None = None
) -> None:
    """Writes `modules.json`, `1_Pooling/config.json`, `sentence_bert_config.json` for `embedder`.

    The files sentence-transformers reads beside a transformers BERT directory to pool (and
    normalise) as `kbz.build_embedder(**embedder)` does; `max_seq_length` is the preset's
    `sequence_length` (a converted sentence-transformers model's own), else the encoder's.
    """
    pooling = embedder.get("pooling", "mean")
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": _ST_MODULES + "Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": _ST_MODULES + "Pooling"},
    ]
    if embedder.get("normalize", True):
        modules.append(
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": _ST_MODULES + "Normalize"}
        )
    config = {"word_embedding_dimension": architecture["hidden_dim"]}
    config.update({key: mode == pooling for key, mode in _ST_POOLING.items()})
    config["pooling_mode_mean_sqrt_len_tokens"] = False
    (directory / "1_Pooling").mkdir()
    files = {
        "modules.json": modules,
        "1_Pooling/config.json": config,
        "sentence_bert_config.json": {
            "max_seq_length": sequence_length or architecture["max_sequence_length"],
            "do_lower_case": False,  # the tokenizer (tokenizer_config.json) lowercases
        },
    }
    for name, data in files.items():
        (directory / name).write_text(json.dumps(data, indent=2) + "\n")
