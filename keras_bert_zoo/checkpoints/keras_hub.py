"""keras-hub BERT presets (a local directory written by `BertBackbone.save_to_preset`).

Read as data only: `config.json` is parsed as JSON and checked to name keras-hub's
`BertBackbone` (no class is looked up or built, keras-hub need not be installed), and
`model.weights.h5` is read with h5py. Keras stores a functional model's layers under
`layers/<snake_case class name>[_<n>]`, variables as `vars/<i>` in creation order:
`reversible_embedding` (token), `position_embedding`, `embedding` (segment),
`layer_normalization` (embeddings), `transformer_encoder[_i]`, `dense` (pooler).
keras-hub's BERT uses the tanh GELU and LayerNorm epsilon 1e-12, as converted here.
"""

import json
import logging
from pathlib import Path

import h5py

from keras_bert_zoo.checkpoints.common import (
    Converted,
    map_tensors,
    save_converted,
)
from keras_bert_zoo.saving.vocabulary import is_uncased

logger = logging.getLogger(__name__)

_BACKBONE_NAMES = ("keras_hub>BertBackbone", "keras_nlp>BertBackbone")
_BACKBONE_KEYS = {
    "name",
    "trainable",
    "dtype",
    "vocabulary_size",
    "num_layers",
    "num_heads",
    "hidden_dim",
    "intermediate_dim",
    "dropout",
    "max_sequence_length",
    "num_segments",
}
_WEIGHTS_FILE = "model.weights.h5"
_VOCABULARY_FILE = Path("assets") / "tokenizer" / "vocabulary.txt"


def keras_hub_name_table(num_layers: int) -> list:
    """`(our_variable_path, [h5 dataset paths], rule)` rows for `BertBackbone` weights.

    >>> keras_hub_name_table(2)[0]
    ('token_embedding/embeddings', ['layers/reversible_embedding/vars/0'], None)
    """
    rows = [
        ("token_embedding/embeddings", ["layers/reversible_embedding/vars/0"], None),
        ("position_embedding/embeddings", ["layers/position_embedding/vars/0"], None),
        ("segment_embedding/embeddings", ["layers/embedding/vars/0"], None),
        ("embeddings_layer_norm/gamma", ["layers/layer_normalization/vars/0"], None),
        ("embeddings_layer_norm/beta", ["layers/layer_normalization/vars/1"], None),
        ("pooled_dense/kernel", ["layers/dense/vars/0"], None),
        ("pooled_dense/bias", ["layers/dense/vars/1"], None),
    ]
    pairs = [
        ("attention_layer_norm", "_self_attention_layer_norm"),
        ("intermediate", "_feedforward_intermediate_dense"),
        ("output_dense", "_feedforward_output_dense"),
        ("output_layer_norm", "_feedforward_layer_norm"),
    ]
    for i in range(num_layers):
        ours = f"transformer_layer_{i}"
        hub = "layers/transformer_encoder" + (f"_{i}" if i else "")
        attention = f"{hub}/_self_attention_layer"
        qkv = [f"{attention}/{part}_dense" for part in ("query", "key", "value")]
        rows += [
            (f"{ours}/attention_qkv/kernel", [f"{q}/vars/0" for q in qkv], "merge_qkv"),
            (f"{ours}/attention_qkv/bias", [f"{q}/vars/1" for q in qkv], "merge_qkv"),
            (
                f"{ours}/attention_output/kernel",
                [f"{attention}/output_dense/vars/0"],
                "merge_output",
            ),
            (f"{ours}/attention_output/bias", [f"{attention}/output_dense/vars/1"], None),
        ]
        for a, b in pairs:
            rows += [
                (f"{ours}/{a}/{kind}", [f"{hub}/{b}/vars/{j}"], None)
                for j, kind in enumerate(("gamma", "beta") if "norm" in a else ("kernel", "bias"))
            ]
    return rows


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"Cannot read {path}: {error}.") from error


def read_keras_hub_config(source: Path) -> dict:
    """Our architecture from a keras-hub `BertBackbone` preset's config.json (never built)."""
    path = source / "config.json"
    if not path.is_file():
        raise ValueError(f"{source} has no config.json; expected a keras-hub preset directory.")
    data = _read_json(path)
    registered = data.get("registered_name") or f"keras_hub>{data.get('class_name')}"
    if registered not in _BACKBONE_NAMES:
        raise ValueError(
            f"{path}: the backbone is {registered!r}, not keras-hub's "
            "BertBackbone; only BERT backbones convert (another architecture)."
        )
    config = data.get("config") or {}
    unknown = sorted(set(config) - _BACKBONE_KEYS)
    if unknown:
        raise ValueError(
            f"{path}: unknown BertBackbone settings {unknown}; this keras-hub "
            "version's BERT may differ from the one this converter matches."
        )
    return {
        "vocabulary_size": config["vocabulary_size"],
        "num_layers": config["num_layers"],
        "num_heads": config["num_heads"],
        "hidden_dim": config["hidden_dim"],
        "intermediate_dim": config["intermediate_dim"],
        "max_sequence_length": config.get("max_sequence_length", 512),
        "num_segments": config.get("num_segments", 2),
        "dropout": config.get("dropout", 0.1),
        "gelu_approximate": True,  # keras-hub's BertBackbone: gelu(approximate=True)
    }


def read_h5_weights(path: Path) -> dict:
    """`{dataset path: array}` of a Keras `.weights.h5` file (data only)."""
    if not path.is_file():
        raise ValueError(
            f"{path.parent} has no {path.name}; sharded keras-hub weights are not "
            "supported: re-save the preset with one weights file."
        )
    tensors = {}
    try:
        with h5py.File(path, "r") as handle:

            def visit(name, item):
                if isinstance(item, h5py.Dataset):
                    tensors[name] = item[()]

            handle.visititems(visit)
    except (OSError, KeyError, ValueError) as error:
        raise ValueError(
            f"Cannot read weights file {path}: {error}. The file is truncated or "
            "not a Keras weights file; save the preset again."
        ) from error
    return tensors


def _tokenizer(source: Path, vocab_file) -> tuple[Path, bool | None]:
    if vocab_file is not None:
        return Path(vocab_file), None
    vocabulary = source / _VOCABULARY_FILE
    if not vocabulary.is_file():
        raise ValueError(
            f"{source} has no tokenizer vocabulary ({_VOCABULARY_FILE}); pass the "
            "BERT vocab.txt with --vocab-file (vocab_file=...)."
        )
    lowercase = None
    tokenizer = source / "tokenizer.json"
    if tokenizer.is_file():
        data = _read_json(tokenizer)
        if data.get("registered_name") not in (
            "keras_hub>BertTokenizer",
            "keras_nlp>BertTokenizer",
        ):
            raise ValueError(
                f"{tokenizer}: {data.get('registered_name')!r} is not keras-hub's BertTokenizer."
            )
        lowercase = (data.get("config") or {}).get("lowercase")
    return vocabulary, lowercase


def read_keras_hub(source, vocab_file=None) -> Converted:
    """Reads a keras-hub BERT preset directory onto our variable paths."""
    source = Path(source)
    architecture = read_keras_hub_config(source)
    vocabulary, lowercase = _tokenizer(source, vocab_file)
    weights = source / _WEIGHTS_FILE
    tensors = read_h5_weights(weights)
    table = keras_hub_name_table(architecture["num_layers"])
    converted, origins, used = map_tensors(table, tensors, weights)
    unused = sorted(set(tensors) - used)
    if unused:
        raise ValueError(
            f"{weights}: variables {unused[:5]} are not BertBackbone variables "
            "(another architecture or keras-hub layout); nothing was written."
        )
    if lowercase is None:
        lowercase = is_uncased(vocabulary)
    return Converted(
        architecture,
        converted,
        origins,
        vocabulary,
        bool(lowercase),
        weights,
        source / "config.json",
        heads=False,
        provenance=f"Converted from the keras-hub preset {source.resolve()}.",
    )


def convert_keras_hub(source, destination, overwrite: bool = False, vocab_file=None) -> Path:
    """Converts a keras-hub `BertBackbone` preset directory to an "encoder" preset directory.

    The vocabulary is the preset's tokenizer asset, else `vocab_file`.

    >>> kbz.checkpoints.convert_keras_hub("keras_hub_bert_dir", "my_preset")
    """
    return save_converted(read_keras_hub(source, vocab_file), destination, overwrite)
