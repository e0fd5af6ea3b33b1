"""Google's original TF1 BERT checkpoints (bert_config.json + bert_model.ckpt.* + vocab.txt).

Read with `tf.train.load_checkpoint` under the original variable names
(`bert/encoder/layer_0/attention/self/query/kernel`, `cls/predictions/output_bias`, ...).
Optimizer slots (`.../adam_m`, `.../adam_v`) and `global_step` are skipped; any other
variable the table does not use is an error. Google's code computes "gelu" with the tanh
approximation, so converted models always use `gelu_approximate=True`.
"""

import json
import logging
from pathlib import Path

from keras_bert_zoo.checkpoints.common import (
    MLM_PATHS,
    NSP_PATHS,
    Converted,
    map_tensors,
    present_groups,
    save_converted,
)
from keras_bert_zoo.extras import require_tensorflow
from keras_bert_zoo.saving.vocabulary import is_uncased

logger = logging.getLogger(__name__)

_KNOWN_CONFIG_KEYS = {
    "attention_probs_dropout_prob",
    "directionality",
    "hidden_act",
    "hidden_dropout_prob",
    "hidden_size",
    "initializer_range",
    "intermediate_size",
    "max_position_embeddings",
    "num_attention_heads",
    "num_hidden_layers",
    "pooler_fc_size",
    "pooler_num_attention_heads",
    "pooler_num_fc_layers",
    "pooler_size_per_head",
    "pooler_type",
    "type_vocab_size",
    "vocab_size",
}
_FOREIGN_CONFIG_KEYS = {
    "embedding_size": "ALBERT",
    "num_hidden_groups": "ALBERT",
    "inner_group_num": "ALBERT",
    "model_type": "a non-Google format",
}
_OPTIMIZER_SUFFIXES = ("/adam_m", "/adam_v")


def google_name_table(num_layers: int) -> list:
    """`(our_variable_path, [google_names], rule)` rows of the encoder and pooler.

    Google kernels are already Keras' `[in, out]`; query, key and value kernels are joined
    ("concat") into our fused `attention_qkv` kernel.

    >>> google_name_table(12)[0]
    ('token_embedding/embeddings', ['bert/embeddings/word_embeddings'], None)
    """
    rows = [
        ("token_embedding/embeddings", ["bert/embeddings/word_embeddings"], None),
        ("position_embedding/embeddings", ["bert/embeddings/position_embeddings"], None),
        ("segment_embedding/embeddings", ["bert/embeddings/token_type_embeddings"], None),
        ("embeddings_layer_norm/gamma", ["bert/embeddings/LayerNorm/gamma"], None),
        ("embeddings_layer_norm/beta", ["bert/embeddings/LayerNorm/beta"], None),
        ("pooled_dense/kernel", ["bert/pooler/dense/kernel"], None),
        ("pooled_dense/bias", ["bert/pooler/dense/bias"], None),
    ]
    pairs = [
        ("attention_output", "attention/output/dense"),
        ("intermediate", "intermediate/dense"),
        ("output_dense", "output/dense"),
    ]
    norms = [
        ("attention_layer_norm", "attention/output/LayerNorm"),
        ("output_layer_norm", "output/LayerNorm"),
    ]
    for i in range(num_layers):
        ours, google = f"transformer_layer_{i}", f"bert/encoder/layer_{i}"
        qkv = [f"{google}/attention/self/{part}" for part in ("query", "key", "value")]
        rows += [
            (f"{ours}/attention_qkv/{kind}", [f"{q}/{kind}" for q in qkv], "concat")
            for kind in ("kernel", "bias")
        ]
        rows += [
            (f"{ours}/{a}/{kind}", [f"{google}/{b}/{kind}"], None)
            for a, b in pairs
            for kind in ("kernel", "bias")
        ]
        rows += [
            (f"{ours}/{a}/{kind}", [f"{google}/{b}/{kind}"], None)
            for a, b in norms
            for kind in ("gamma", "beta")
        ]
    return rows


def google_head_tables() -> dict:
    """Rows of the pretraining heads: `mlm` (`cls/predictions`), `nsp` (`cls/seq_relationship`).

    `cls/seq_relationship/output_weights` is `[2, hidden]` (used with `transpose_b`), so it
    is transposed to our `[hidden, 2]` kernel.
    """
    transform = "cls/predictions/transform"
    mlm_sources = [
        f"{transform}/dense/kernel",
        f"{transform}/dense/bias",
        f"{transform}/LayerNorm/gamma",
        f"{transform}/LayerNorm/beta",
        "cls/predictions/output_bias",
    ]
    return {
        "mlm": [(ours, [name], None) for ours, name in zip(MLM_PATHS, mlm_sources, strict=True)],
        "nsp": [
            (NSP_PATHS[0], ["cls/seq_relationship/output_weights"], "transpose"),
            (NSP_PATHS[1], ["cls/seq_relationship/output_bias"], None),
        ],
    }


def read_google_config(path: Path) -> dict:
    """Our architecture from `bert_config.json` (always the tanh GELU of Google's code)."""
    if not path.is_file():
        raise ValueError(
            f"{path.parent} has no bert_config.json; expected Google's BERT "
            "release layout (bert_config.json, bert_model.ckpt.*, vocab.txt)."
        )
    config = json.loads(path.read_text())
    foreign = sorted(k for k in config if k in _FOREIGN_CONFIG_KEYS)
    if foreign:
        kind = _FOREIGN_CONFIG_KEYS[foreign[0]]
        raise ValueError(
            f"{path}: keys {foreign} belong to another architecture ({kind}), "
            "not Google's BERT; only BERT checkpoints convert."
        )
    unknown = sorted(set(config) - _KNOWN_CONFIG_KEYS)
    if unknown:
        logger.warning("%s: ignoring unknown keys %s.", path, unknown)
    if config.get("hidden_act", "gelu") != "gelu":
        raise ValueError(
            f"{path}: hidden_act '{config['hidden_act']}' is not supported; "
            "Google's BERT uses 'gelu' (computed with the tanh approximation)."
        )
    return {
        "vocabulary_size": config["vocab_size"],
        "num_layers": config["num_hidden_layers"],
        "num_heads": config["num_attention_heads"],
        "hidden_dim": config["hidden_size"],
        "intermediate_dim": config["intermediate_size"],
        "max_sequence_length": config.get("max_position_embeddings", 512),
        "num_segments": config.get("type_vocab_size", 2),
        "dropout": config.get("hidden_dropout_prob", 0.1),
        "attention_dropout": config.get("attention_probs_dropout_prob", 0.1),
        "gelu_approximate": True,  # google-research/bert's gelu is 0.5x(1+tanh(...))
    }


def checkpoint_prefix(source: Path) -> Path:
    """`bert_model.ckpt`, the latest checkpoint of a training folder, or the only `*.index`."""
    tf = require_tensorflow("TF1 checkpoint reading")  # only TF1 checkpoints need it

    if (source / "bert_model.ckpt.index").is_file():
        return source / "bert_model.ckpt"
    if (source / "checkpoint").is_file() and tf.train.latest_checkpoint(str(source)):
        return Path(tf.train.latest_checkpoint(str(source)))
    indexes = sorted(source.glob("*.index"))
    if len(indexes) != 1:
        raise ValueError(
            f"{source}: expected one TF1 checkpoint (bert_model.ckpt.index and "
            f".data-*), found {[p.name for p in indexes] or 'none'}."
        )
    return indexes[0].with_suffix("")


def read_checkpoint(prefix: Path) -> dict:
    """`{name: array}` of a TF1 checkpoint, without optimizer slots or `global_step`."""
    tf = require_tensorflow("TF1 checkpoint reading")  # only TF1 checkpoints need it

    try:
        reader = tf.train.load_checkpoint(str(prefix))
        names = sorted(reader.get_variable_to_shape_map())
    except (tf.errors.OpError, ValueError, IndexError) as error:
        raise ValueError(
            f"Cannot read the TF1 checkpoint {prefix}.index: {error}. The file is "
            "truncated or not a TensorFlow checkpoint; fetch it again."
        ) from error
    tensors = {}
    for name in names:
        if name == "global_step" or name.endswith(_OPTIMIZER_SUFFIXES):
            continue
        try:
            tensors[name] = reader.get_tensor(name)
        except (tf.errors.OpError, ValueError, IndexError) as error:  # short reads: IndexError
            data = sorted(p.name for p in prefix.parent.glob(prefix.name + ".data-*"))
            raise ValueError(
                f"Cannot read variable {name} from {prefix.parent / data[0]} "
                f"(checkpoint {prefix}): {error}. The file is truncated or "
                "corrupted; fetch the checkpoint again."
            ) from error
    return tensors


def _foreign_error(unused: list, source_file: Path) -> ValueError:
    hint = (
        " (a TF2 object-based checkpoint, not Google's TF1 format)"
        if any(".ATTRIBUTES" in name for name in unused)
        else ""
    )
    return ValueError(
        f"{source_file}: variables {unused[:5]} are not BERT variables{hint}; "
        "the checkpoint is another architecture (e.g. ALBERT or RoBERTa) or has "
        "extra task heads. Nothing was written."
    )


def read_google(source) -> Converted:
    """Reads Google's TF1 BERT checkpoint folder onto our variable paths (heads included)."""
    source = Path(source)
    architecture = read_google_config(source / "bert_config.json")
    vocabulary = source / "vocab.txt"
    if not vocabulary.is_file():
        raise ValueError(
            f"{source} has no vocab.txt; use the vocabulary released with this checkpoint."
        )
    prefix = checkpoint_prefix(source)
    tensors = read_checkpoint(prefix)
    source_file = Path(f"{prefix}.index")
    table = google_name_table(architecture["num_layers"])
    groups = google_head_tables()
    present = present_groups(groups, tensors)
    for group in present:
        table += groups[group]
    unused = sorted(set(tensors) - {n for _, names, _ in table for n in names})
    if unused:
        raise _foreign_error(unused, source_file)
    converted, origins, _ = map_tensors(table, tensors, source_file)
    heads = bool(present)
    new = (
        {
            p
            for group, paths in (("mlm", MLM_PATHS), ("nsp", NSP_PATHS))
            if group not in present
            for p in paths
        }
        if heads
        else set()
    )
    if not heads:
        logger.warning(
            "%s holds no pretraining heads (cls/*): the preset is an encoder.", source_file
        )
    return Converted(
        architecture,
        converted,
        origins,
        vocabulary,
        is_uncased(vocabulary),
        source_file,
        source / "bert_config.json",
        heads,
        new,
        f"Converted from Google's TF1 BERT checkpoint {prefix.resolve()}.",
    )


def convert_google(
    source,
    destination,
    overwrite: bool = False,
    heads: bool | None = None,
    metadata: dict | None = None,
) -> Path:
    """Converts Google's TF1 BERT checkpoint folder to a preset directory.

    With the `cls/*` heads it is a "pretrainer" preset (`kbz.from_preset(dir)` still gives
    the encoder); `heads=False` keeps the encoder only. Lowercasing is inferred from the
    vocabulary (the uncased releases hold no capitalised word pieces).

    >>> kbz.checkpoints.convert_google("uncased_L-12_H-768_A-12", "bert_base_uncased")
    """
    return save_converted(read_google(source), destination, overwrite, heads, metadata)
