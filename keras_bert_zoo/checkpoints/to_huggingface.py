"""Back out to Hugging Face: a preset directory to a transformers BERT directory.

Writes `config.json` (`BertForPreTraining` when the preset holds the MLM/NSP heads, else
`BertModel`; `hidden_act` "gelu_new" for the tanh GELU, "gelu" for the exact one),
`model.safetensors` (torch names, `[out, in]` Linear weights; the decoder is tied to the word
embeddings, so it is not written), `vocab.txt`, `tokenizer_config.json` and
`special_tokens_map.json`. The inverse of `convert_huggingface`: ours -> HF -> ours is
bit-identical.
"""

import json
import logging
import shutil
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from keras_bert_zoo.checkpoints.huggingface import huggingface_head_tables, huggingface_name_table
from keras_bert_zoo.saving.atomic import staged_directory
from keras_bert_zoo.saving.preset import (
    check_new_directory,
    read_preset_directory,
    read_preset_weights,
)

logger = logging.getLogger(__name__)

_SPECIAL_TOKENS = {
    "unk_token": "[UNK]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}


def split_rule(rule: str | None, array: np.ndarray) -> list:
    """The inverse of `apply_rule` for the Hugging Face rules (None, "transpose", "qkv")."""
    if rule is None:
        return [array]
    if rule == "transpose":
        return [array.T]
    parts = np.split(array, 3, axis=-1)  # "qkv": [in, 3 * out] -> three [out, in]
    return [part.T if part.ndim == 2 else part for part in parts]


def huggingface_config(architecture: dict, heads: bool) -> dict:
    """transformers' `BertConfig` fields for our architecture."""
    return {
        "architectures": ["BertForPreTraining" if heads else "BertModel"],
        "model_type": "bert",
        "vocab_size": architecture["vocabulary_size"],
        "hidden_size": architecture["hidden_dim"],
        "num_hidden_layers": architecture["num_layers"],
        "num_attention_heads": architecture["num_heads"],
        "intermediate_size": architecture["intermediate_dim"],
        "hidden_act": "gelu_new" if architecture["gelu_approximate"] else "gelu",
        "hidden_dropout_prob": architecture["dropout"],
        "attention_probs_dropout_prob": architecture["dropout"],
        "max_position_embeddings": architecture["max_sequence_length"],
        "type_vocab_size": architecture["num_segments"],
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }


def huggingface_tensors(tensors: dict, num_layers: int, heads: bool) -> dict:
    """Our `{variable path: array}` to transformers' `{name: array}` (heads if `heads`)."""
    table = huggingface_name_table(num_layers) + huggingface_head_tables()["pooler"]
    prefix = "bert." if heads else ""
    rows = [(ours, [prefix + n for n in names], rule) for ours, names, rule in table]
    if heads:
        rows += huggingface_head_tables()["mlm"] + huggingface_head_tables()["nsp"]
    out = {}
    for ours, names, rule in rows:
        if ours not in tensors:
            raise ValueError(f"The preset's weights lack {ours}; re-create the preset.")
        for name, part in zip(names, split_rule(rule, tensors[ours]), strict=True):
            out[name] = np.ascontiguousarray(part, dtype=np.float32)
    used = {ours for ours, _, _ in rows}
    dropped = sorted(set(tensors) - used)
    if dropped:
        logger.warning(
            "Not exported (no BertModel/BertForPreTraining counterpart): %s", ", ".join(dropped[:6])
        )
    return out


def _write(staging: Path, config, tensors: dict, heads: bool) -> None:
    architecture = config.architecture
    (staging / "config.json").write_text(
        json.dumps(huggingface_config(architecture, heads), indent=2) + "\n"
    )
    save_file(tensors, str(staging / "model.safetensors"), metadata={"format": "pt"})
    shutil.copyfile(config.vocabulary_path, staging / "vocab.txt")
    tokenizer = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": config.lowercase,
        "strip_accents": None,
        "tokenize_chinese_chars": True,
        "model_max_length": architecture["max_sequence_length"],
        **_SPECIAL_TOKENS,
    }
    (staging / "tokenizer_config.json").write_text(json.dumps(tokenizer, indent=2) + "\n")
    (staging / "special_tokens_map.json").write_text(json.dumps(_SPECIAL_TOKENS, indent=2) + "\n")


def export_huggingface(preset, destination, overwrite: bool = False) -> Path:
    """Writes a preset directory as a transformers BERT directory.

    >>> kbz.checkpoints.export_huggingface("my_preset", "hf_dir")
    >>> transformers.BertForPreTraining.from_pretrained("hf_dir")  # elsewhere
    """
    destination = check_new_directory(destination, overwrite)  # before any reading
    config = read_preset_directory(preset)
    if config.weights_path is None or not config.weights_path.is_file():
        raise ValueError(
            f"Preset '{config.name}' has no weights on this machine; load it once "
            "with kbz.from_preset (downloads) or convert a checkpoint first."
        )
    tensors = read_preset_weights(config)
    heads = config.task == "pretrainer" and "mlm_head/dense/kernel" in tensors
    hf_tensors = huggingface_tensors(tensors, config.architecture["num_layers"], heads)
    with staged_directory(destination) as staging:
        _write(staging, config, hf_tensors, heads)
    logger.info("Wrote %s (%s).", destination, "BertForPreTraining" if heads else "BertModel")
    return destination
