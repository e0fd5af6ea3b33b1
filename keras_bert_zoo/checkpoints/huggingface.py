"""Hugging Face BERT directories (config.json + model.safetensors + vocab.txt) to presets.

`BertModel`, `BertForPreTraining` and `BertForMaskedLM` checkpoints convert; the `cls.*`
heads become our pretrainer's MLM/NSP heads. `BertForSequenceClassification`,
`BertForTokenClassification` and `BertForQuestionAnswering` give a classifier, tagger or
question_answerer preset with its head and label names (`huggingface_tasks`). A
sentence-transformers directory (`modules.json` naming a `Pooling` module, and maybe
`Normalize`) also gives the preset's `embedder` block, so `kbz.from_preset(dir,
task="embedder")` pools as the checkpoint was trained, and its `max_seq_length` the preset's
`sequence_length`, so texts are truncated where sentence-transformers truncates. Weights are read
with safetensors only: pickle (`pytorch_model.bin`) runs code when loaded and is refused unless
`allow_pickle=True`.
"""

import json
import logging
from pathlib import Path

import numpy as np

from keras_bert_zoo.checkpoints.common import (
    NSP_PATHS,
    POOLER_PATHS,
    Converted,
    map_tensors,
    present_groups,
    save_converted,
)
from keras_bert_zoo.checkpoints.huggingface_tasks import read_huggingface_task
from keras_bert_zoo.checkpoints.sentence_transformers import (
    read_sentence_transformers_length,
    read_sentence_transformers_pooling,
)
from keras_bert_zoo.saving.vocabulary import is_uncased
from keras_bert_zoo.saving.weights import read_weights

logger = logging.getLogger(__name__)

# Hugging Face `hidden_act` -> our `gelu_approximate`.
HF_ACTIVATIONS = {"gelu": False, "gelu_new": True, "gelu_pytorch_tanh": True, "gelu_fast": True}
# Buffers and tied copies, not weights of their own.
_HF_IGNORED = (
    "embeddings.position_ids",
    "cls.predictions.decoder.weight",
    "cls.predictions.decoder.bias",
)


def huggingface_name_table(num_layers: int) -> list:
    """`(our_variable_path, [hf_names], rule)` rows of the encoder (rules: `apply_rule`).

    HF Linear weights are `[out, in]` (transposed to Keras' `[in, out]`); query, key and
    value are joined into our fused `attention_qkv` kernel `[in, 3 * out]`.

    >>> huggingface_name_table(12)[0]
    ('token_embedding/embeddings', ['embeddings.word_embeddings.weight'], None)
    """
    rows = [
        ("token_embedding/embeddings", ["embeddings.word_embeddings.weight"], None),
        ("position_embedding/embeddings", ["embeddings.position_embeddings.weight"], None),
        ("segment_embedding/embeddings", ["embeddings.token_type_embeddings.weight"], None),
        ("embeddings_layer_norm/gamma", ["embeddings.LayerNorm.weight"], None),
        ("embeddings_layer_norm/beta", ["embeddings.LayerNorm.bias"], None),
    ]
    for i in range(num_layers):
        ours, hf = f"transformer_layer_{i}", f"encoder.layer.{i}"
        qkv = [f"{hf}.attention.self.{part}" for part in ("query", "key", "value")]
        rows += [
            (f"{ours}/attention_qkv/kernel", [f"{q}.weight" for q in qkv], "qkv"),
            (f"{ours}/attention_qkv/bias", [f"{q}.bias" for q in qkv], "qkv"),
            (
                f"{ours}/attention_output/kernel",
                [f"{hf}.attention.output.dense.weight"],
                "transpose",
            ),
            (f"{ours}/attention_output/bias", [f"{hf}.attention.output.dense.bias"], None),
            (
                f"{ours}/attention_layer_norm/gamma",
                [f"{hf}.attention.output.LayerNorm.weight"],
                None,
            ),
            (f"{ours}/attention_layer_norm/beta", [f"{hf}.attention.output.LayerNorm.bias"], None),
            (f"{ours}/intermediate/kernel", [f"{hf}.intermediate.dense.weight"], "transpose"),
            (f"{ours}/intermediate/bias", [f"{hf}.intermediate.dense.bias"], None),
            (f"{ours}/output_dense/kernel", [f"{hf}.output.dense.weight"], "transpose"),
            (f"{ours}/output_dense/bias", [f"{hf}.output.dense.bias"], None),
            (f"{ours}/output_layer_norm/gamma", [f"{hf}.output.LayerNorm.weight"], None),
            (f"{ours}/output_layer_norm/beta", [f"{hf}.output.LayerNorm.bias"], None),
        ]
    return rows


def huggingface_head_tables() -> dict:
    """Rows of the optional parts: `pooler`, `mlm` (`cls.predictions.*`), `nsp` (NSP head)."""
    return {
        "pooler": [
            ("pooled_dense/kernel", ["pooler.dense.weight"], "transpose"),
            ("pooled_dense/bias", ["pooler.dense.bias"], None),
        ],
        "mlm": [
            ("mlm_head/dense/kernel", ["cls.predictions.transform.dense.weight"], "transpose"),
            ("mlm_head/dense/bias", ["cls.predictions.transform.dense.bias"], None),
            ("mlm_head/layer_norm/gamma", ["cls.predictions.transform.LayerNorm.weight"], None),
            ("mlm_head/layer_norm/beta", ["cls.predictions.transform.LayerNorm.bias"], None),
            ("mlm_output_bias/bias", ["cls.predictions.bias"], None),
        ],
        "nsp": [
            ("nsp_head/kernel", ["cls.seq_relationship.weight"], "transpose"),
            ("nsp_head/bias", ["cls.seq_relationship.bias"], None),
        ],
    }


def _normalize_hf_names(tensors: dict) -> dict:
    """Strips the `bert.` prefix of task checkpoints and maps old `gamma`/`beta` LayerNorm names."""
    out = {}
    for name, value in tensors.items():
        if name.startswith("bert."):
            name = name[len("bert.") :]
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
            "LayerNorm.beta", "LayerNorm.bias"
        )
        out[name] = value
    return out


def read_huggingface_config(source: Path) -> tuple[dict, bool]:
    """`(architecture, lowercase)` from a Hugging Face BERT directory's JSON files."""
    config_path = source / "config.json"
    if not config_path.is_file():
        raise ValueError(
            f"{source} has no config.json; expected a Hugging Face BERT directory "
            "(config.json + model.safetensors + vocab.txt)."
        )
    config = json.loads(config_path.read_text())
    if config.get("model_type", "bert") != "bert":
        raise ValueError(
            f"{config_path}: model_type is '{config.get('model_type')}', not "
            "'bert'. Only BERT checkpoints convert (another architecture)."
        )
    activation = config.get("hidden_act", "gelu")
    if activation not in HF_ACTIVATIONS:
        raise ValueError(
            f"{config_path}: hidden_act '{activation}' is not supported; expected "
            f"one of {sorted(HF_ACTIVATIONS)}."
        )
    if abs(float(config.get("layer_norm_eps", 1e-12)) - 1e-12) > 1e-15:
        raise ValueError(
            f"{config_path}: layer_norm_eps {config['layer_norm_eps']} differs "
            "from BERT's 1e-12, which this package fixes."
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{config_path}: only absolute position embeddings are supported.")
    architecture = {
        "vocabulary_size": config["vocab_size"],
        "num_layers": config["num_hidden_layers"],
        "num_heads": config["num_attention_heads"],
        "hidden_dim": config["hidden_size"],
        "intermediate_dim": config["intermediate_size"],
        "max_sequence_length": config.get("max_position_embeddings", 512),
        "num_segments": config.get("type_vocab_size", 2),
        "dropout": config.get("hidden_dropout_prob", 0.1),
        "attention_dropout": config.get("attention_probs_dropout_prob", 0.1),
        "gelu_approximate": HF_ACTIVATIONS[activation],
    }
    lowercase = None
    tokenizer_config = source / "tokenizer_config.json"
    if tokenizer_config.is_file():
        lowercase = json.loads(tokenizer_config.read_text()).get("do_lower_case")
    if lowercase is None:
        lowercase = is_uncased(source / "vocab.txt")
    return architecture, bool(lowercase)


def _read_pickle(path: Path) -> dict:
    """`torch.load(weights_only=True)`: only when the user opted in to pickle."""
    try:
        import torch  # optional (the `reference` extra); only for opted-in pickle files
    except ImportError as error:
        raise ValueError(
            f"Reading {path} (pickle) needs PyTorch; install torch, or convert it "
            "to safetensors elsewhere."
        ) from error
    logger.warning("Loading pickle file %s because allow_pickle=True.", path)
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {name: value.float().numpy() for name, value in state.items()}


def read_huggingface_weights(source: Path, allow_pickle: bool = False) -> tuple[dict, Path]:
    """`(tensors, file)` of `model.safetensors` (sharded files too), refusing pickle by default."""
    files = sorted(source.glob("model*.safetensors"))
    pickled = sorted(source.glob("pytorch_model*.bin"))
    if not files and pickled and allow_pickle:
        tensors = {}
        for path in pickled:
            tensors.update(_read_pickle(path))
        return _normalize_hf_names(tensors), pickled[0]
    if not files:
        hint = (
            (
                f" It holds {[p.name for p in pickled]}: pickle files run code when loaded and "
                "are refused; convert them to safetensors in a sandbox first, or pass "
                "--allow-pickle (allow_pickle=True) if you trust them."
            )
            if pickled
            else ""
        )
        raise ValueError(f"{source} has no model.safetensors.{hint}")
    tensors = {}
    for path in files:
        tensors.update(read_weights(path))
    return _normalize_hf_names(tensors), files[0]


def _check_tied_decoder(tensors: dict, source_file: Path) -> None:
    decoder = tensors.get("cls.predictions.decoder.weight")
    if decoder is not None and not np.array_equal(
        decoder, tensors.get("embeddings.word_embeddings.weight")
    ):
        raise ValueError(
            f"{source_file}: cls.predictions.decoder.weight differs from "
            "embeddings.word_embeddings.weight; only BERT's tied decoder converts."
        )
    bias = tensors.get("cls.predictions.decoder.bias")
    if bias is not None:
        if "cls.predictions.bias" not in tensors:
            tensors["cls.predictions.bias"] = bias
        elif not np.array_equal(bias, tensors["cls.predictions.bias"]):
            raise ValueError(
                f"{source_file}: cls.predictions.decoder.bias differs from "
                "cls.predictions.bias; only BERT's tied output bias converts."
            )


def read_huggingface(source, allow_pickle: bool = False) -> Converted:
    """Reads a Hugging Face BERT directory onto our variable paths (heads included)."""
    source = Path(source)
    architecture, lowercase = read_huggingface_config(source)
    if not (source / "vocab.txt").is_file():
        raise ValueError(f"{source} has no vocab.txt; a BERT WordPiece vocabulary is required.")
    tensors, source_file = read_huggingface_weights(source, allow_pickle)
    _check_tied_decoder(tensors, source_file)
    table = huggingface_name_table(architecture["num_layers"])
    groups = huggingface_head_tables()
    present = present_groups(groups, tensors)
    task, task_config, task_rows = read_huggingface_task(
        source / "config.json", tensors, source_file
    )
    for group in present:
        table += groups[group]
    converted, origins, used = map_tensors(table + task_rows, tensors, source_file)
    unused = sorted(set(tensors) - used - set(_HF_IGNORED))
    if unused:
        raise ValueError(
            f"{source_file}: variables {unused[:5]} are not BERT encoder variables, "
            "pretraining heads or a BERT task head (another architecture, e.g. RoBERTa or "
            "ALBERT?); nothing was written."
        )
    heads = "mlm" in present or "nsp" in present
    new = set() if "pooler" in present else set(POOLER_PATHS)
    if heads and "nsp" not in present:
        new |= set(NSP_PATHS)  # BertForMaskedLM
    if not heads and not task:  # what most checkpoints are: said for --verbose only
        logger.info(
            "%s holds no pretraining heads (a BertModel): the preset is an encoder; "
            "task='pretrainer' gets new MLM/NSP heads.",
            source_file,
        )
    result = Converted(
        architecture,
        converted,
        origins,
        source / "vocab.txt",
        lowercase,
        source_file,
        source / "config.json",
        heads,
        new,
        f"Converted from the Hugging Face checkpoint {source.resolve()}.",
    )
    result.embedder = read_sentence_transformers_pooling(source)
    result.sequence_length = read_sentence_transformers_length(source, architecture)
    result.task, result.task_config = task, task_config
    return result


def convert_huggingface(
    source, destination, overwrite: bool = False, allow_pickle: bool = False
) -> Path:
    """Converts a Hugging Face BERT directory to a preset directory.

    `BertForPreTraining` / `BertForMaskedLM` give a "pretrainer" preset (MLM and NSP heads;
    a missing NSP head or pooler is new, and logged); `BertForSequenceClassification` /
    `BertForTokenClassification` / `BertForQuestionAnswering` a classifier / tagger /
    question_answerer preset with its head; `BertModel` gives an "encoder" preset.

    >>> kbz.checkpoints.convert_huggingface("hf_model_dir", "my_preset")
    """
    return save_converted(read_huggingface(source, allow_pickle), destination, overwrite)
