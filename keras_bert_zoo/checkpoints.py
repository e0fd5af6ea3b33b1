"""Checkpoint converters: declarative name tables from other formats to our variable paths.

Hugging Face BERT directories (config.json + model.safetensors + vocab.txt) are read with
safetensors only: pickle (`pytorch_model.bin`) is refused, since loading it runs code.
"""

import json
import logging
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

# Hugging Face `hidden_act` -> our `gelu_approximate`.
_HF_ACTIVATIONS = {"gelu": False, "gelu_new": True, "gelu_pytorch_tanh": True, "gelu_fast": True}
# Buffers, not weights: safe to leave unused.
_HF_IGNORED = ("embeddings.position_ids",)


def huggingface_name_table(num_layers: int) -> list:
    """`(our_variable_path, [hf_names], rule)` rows; rule in {None, "transpose", "qkv"}.

    HF Linear weights are `[out, in]` (transposed to Keras' `[in, out]`); query, key and
    value are joined into our fused `attention_qkv` kernel `[in, 3 * out]`.
    """
    rows = [
        ("token_embedding/embeddings", ["embeddings.word_embeddings.weight"], None),
        ("position_embedding/embeddings", ["embeddings.position_embeddings.weight"], None),
        ("segment_embedding/embeddings", ["embeddings.token_type_embeddings.weight"], None),
        ("embeddings_layer_norm/gamma", ["embeddings.LayerNorm.weight"], None),
        ("embeddings_layer_norm/beta", ["embeddings.LayerNorm.bias"], None),
        ("pooled_dense/kernel", ["pooler.dense.weight"], "transpose"),
        ("pooled_dense/bias", ["pooler.dense.bias"], None),
    ]
    for i in range(num_layers):
        ours, hf = f"transformer_layer_{i}", f"encoder.layer.{i}"
        qkv = [f"{hf}.attention.self.{part}" for part in ("query", "key", "value")]
        rows += [
            (f"{ours}/attention_qkv/kernel", [f"{q}.weight" for q in qkv], "qkv"),
            (f"{ours}/attention_qkv/bias", [f"{q}.bias" for q in qkv], "qkv"),
            (f"{ours}/attention_output/kernel", [f"{hf}.attention.output.dense.weight"],
             "transpose"),
            (f"{ours}/attention_output/bias", [f"{hf}.attention.output.dense.bias"], None),
            (f"{ours}/attention_layer_norm/gamma", [f"{hf}.attention.output.LayerNorm.weight"],
             None),
            (f"{ours}/attention_layer_norm/beta", [f"{hf}.attention.output.LayerNorm.bias"], None),
            (f"{ours}/intermediate/kernel", [f"{hf}.intermediate.dense.weight"], "transpose"),
            (f"{ours}/intermediate/bias", [f"{hf}.intermediate.dense.bias"], None),
            (f"{ours}/output_dense/kernel", [f"{hf}.output.dense.weight"], "transpose"),
            (f"{ours}/output_dense/bias", [f"{hf}.output.dense.bias"], None),
            (f"{ours}/output_layer_norm/gamma", [f"{hf}.output.LayerNorm.weight"], None),
            (f"{ours}/output_layer_norm/beta", [f"{hf}.output.LayerNorm.bias"], None),
        ]
    return rows


def _apply_rule(rule, arrays):
    if rule is None:
        return arrays[0]
    if rule == "transpose":
        return arrays[0].T
    if arrays[0].ndim == 2:  # "qkv" kernel: three [out, in] -> [in, 3 * out]
        return np.concatenate([a.T for a in arrays], axis=1)
    return np.concatenate(arrays, axis=0)  # "qkv" bias


def _normalize_hf_names(tensors: dict) -> dict:
    """Strips the `bert.` prefix of task checkpoints and maps old `gamma`/`beta` LayerNorm names."""
    out = {}
    for name, value in tensors.items():
        if name.startswith("bert."):
            name = name[len("bert."):]
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
            "LayerNorm.beta", "LayerNorm.bias")
        out[name] = value
    return out


def read_huggingface_config(source: Path) -> tuple[dict, bool]:
    """`(architecture, lowercase)` from a Hugging Face BERT directory's JSON files."""
    config_path = source / "config.json"
    if not config_path.is_file():
        raise ValueError(f"{source} has no config.json; expected a Hugging Face BERT directory "
                         "(config.json + model.safetensors + vocab.txt).")
    config = json.loads(config_path.read_text())
    if config.get("model_type", "bert") != "bert":
        raise ValueError(f"{config_path}: model_type is '{config.get('model_type')}', not "
                         "'bert'. Only BERT checkpoints convert.")
    activation = config.get("hidden_act", "gelu")
    if activation not in _HF_ACTIVATIONS:
        raise ValueError(f"{config_path}: hidden_act '{activation}' is not supported; expected "
                         f"one of {sorted(_HF_ACTIVATIONS)}.")
    if abs(float(config.get("layer_norm_eps", 1e-12)) - 1e-12) > 1e-15:
        raise ValueError(f"{config_path}: layer_norm_eps {config['layer_norm_eps']} differs "
                         "from BERT's 1e-12, which this package fixes.")
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
        "gelu_approximate": _HF_ACTIVATIONS[activation],
    }
    lowercase = None
    tokenizer_config = source / "tokenizer_config.json"
    if tokenizer_config.is_file():
        lowercase = json.loads(tokenizer_config.read_text()).get("do_lower_case")
    if lowercase is None:  # No flag: uncased vocabularies hold no capitalised word pieces.
        words = (source / "vocab.txt").read_text(encoding="utf-8").split()
        lowercase = not any(w[:1].isupper() for w in words if not w.startswith("["))
    return architecture, bool(lowercase)


def read_huggingface_weights(source: Path) -> dict:
    """Tensors of `model.safetensors` (sharded files too), refusing pickle checkpoints."""
    from keras_bert_zoo.weights import read_weights

    files = sorted(source.glob("model*.safetensors"))
    if not files:
        pickled = [p.name for p in source.glob("*.bin")]
        hint = (f" It holds {pickled}: pickle files run code when loaded and are refused; "
                "convert them to safetensors in a sandbox first.") if pickled else ""
        raise ValueError(f"{source} has no model.safetensors.{hint}")
    tensors = {}
    for path in files:
        tensors.update(read_weights(path))
    return _normalize_hf_names(tensors)


def convert_huggingface(source, destination, overwrite: bool = False) -> Path:
    """Converts a Hugging Face BERT directory to a preset directory (encoder + pooler).

    >>> kbz.checkpoints.convert_huggingface("hf_model_dir", "my_preset")
    """
    from keras_bert_zoo.encoder import build_encoder
    from keras_bert_zoo.presets import save_preset
    from keras_bert_zoo.weights import assign_weights

    source = Path(source)
    architecture, lowercase = read_huggingface_config(source)
    if not (source / "vocab.txt").is_file():
        raise ValueError(f"{source} has no vocab.txt; a BERT WordPiece vocabulary is required.")
    tensors = read_huggingface_weights(source)
    table = huggingface_name_table(architecture["num_layers"])
    converted, used = {}, set(_HF_IGNORED)
    for ours, names, rule in table:
        missing = [n for n in names if n not in tensors]
        if missing:
            raise ValueError(f"{source}: variable {missing[0]} is missing from the checkpoint "
                             f"(needed for {ours}). Is it a complete BERT checkpoint?")
        converted[ours] = _apply_rule(rule, [tensors[n] for n in names])
        used.update(names)
    heads = sorted(n for n in tensors if n.startswith("cls."))
    if heads:
        logger.warning("%s: pretraining heads (%s ...) are not converted; the encoder is.",
                       source, heads[0])
    unused = sorted(set(tensors) - used - set(heads))
    if unused:
        raise ValueError(f"{source}: variables {unused[:5]} are not BERT encoder variables "
                         "(another architecture, e.g. RoBERTa or ALBERT?); nothing was written.")
    encoder = build_encoder(**architecture)
    assign_weights(encoder.weights, converted, source / "model.safetensors")
    metadata = {"provenance": f"Converted from the Hugging Face checkpoint {source.resolve()}."}
    return save_preset(encoder, destination, vocabulary=source / "vocab.txt",
                       lowercase=lowercase, metadata=metadata, overwrite=overwrite)
