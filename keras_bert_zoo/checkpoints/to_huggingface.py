"""Back out to Hugging Face: a preset directory to a transformers BERT directory.

Writes `config.json` (`BertForPreTraining` when the preset holds the MLM/NSP heads;
`BertForSequenceClassification`, `BertForTokenClassification`, `BertForQuestionAnswering` for
a fine-tuned classifier, tagger, question_answerer, with `id2label` from its label names (see
`huggingface_tasks`); else `BertModel`; `hidden_act` "gelu_new" for the tanh GELU, "gelu" for
the exact one), `model.safetensors` (torch names, `[out, in]` Linear weights; the decoder is
tied to the word embeddings, so it is not written), `vocab.txt`, `tokenizer_config.json` and
`special_tokens_map.json`; an embedder (or a preset with an `embedder` block) also gets
sentence-transformers' `modules.json`, `1_Pooling/config.json` and `sentence_bert_config.json`.
Variables with no counterpart in the written architecture are an error, not dropped. The
inverse of `convert_huggingface`: ours -> HF -> ours is bit-identical, heads included.
"""

import json
import logging
import shutil
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from keras_bert_zoo.architecture import attention_dropout_rate
from keras_bert_zoo.checkpoints.huggingface import huggingface_head_tables, huggingface_name_table
from keras_bert_zoo.checkpoints.huggingface_tasks import (
    TASK_HEADS,
    check_exportable_task,
    huggingface_task_fields,
)
from keras_bert_zoo.checkpoints.sentence_transformers import write_sentence_transformers_files
from keras_bert_zoo.saving.atomic import staged_directory
from keras_bert_zoo.saving.preset import (
    check_new_directory,
    read_preset_directory,
    read_preset_weights,
)
from keras_bert_zoo.tasks import registry

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


def huggingface_config(architecture: dict, model_class: str, task_fields=None) -> dict:
    """transformers' `BertConfig` fields for our architecture, as `model_class`."""
    return {
        "architectures": [model_class],
        "model_type": "bert",
        "vocab_size": architecture["vocabulary_size"],
        "hidden_size": architecture["hidden_dim"],
        "num_hidden_layers": architecture["num_layers"],
        "num_attention_heads": architecture["num_heads"],
        "intermediate_size": architecture["intermediate_dim"],
        "hidden_act": "gelu_new" if architecture["gelu_approximate"] else "gelu",
        "hidden_dropout_prob": architecture["dropout"],
        "attention_probs_dropout_prob": attention_dropout_rate(architecture),
        "max_position_embeddings": architecture["max_sequence_length"],
        "type_vocab_size": architecture["num_segments"],
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        **(task_fields or {}),
    }


def export_layout(config, tensors: dict) -> tuple[str, list, bool]:
    """`(transformers class, head rows, pooler written)` for a preset's task and weights."""
    tables = huggingface_head_tables()
    if config.task in TASK_HEADS:
        check_exportable_task(config.task, config.task_config, str(config.directory))
        model_class, rows, pooler = TASK_HEADS[config.task]
        return model_class, rows, pooler
    if config.task == "pretrainer" and "mlm_head/dense/kernel" in tensors:
        return "BertForPreTraining", tables["mlm"] + tables["nsp"], True
    return "BertModel", [], "pooled_dense/kernel" in tensors  # an embedder has no pooler


def huggingface_tensors(
    tensors: dict, num_layers: int, model_class: str, head_rows: list, pooler: bool = True
) -> dict:
    """Our `{variable path: array}` to transformers' `{name: array}` for `model_class`."""
    table = huggingface_name_table(num_layers)
    table += huggingface_head_tables()["pooler"] if pooler else []
    prefix = "" if model_class == "BertModel" else "bert."
    rows = [(ours, [prefix + n for n in names], rule) for ours, names, rule in table]
    rows += head_rows
    out = {}
    for ours, names, rule in rows:
        if ours not in tensors:
            raise ValueError(f"The preset's weights lack {ours}; re-create the preset.")
        for name, part in zip(names, split_rule(rule, tensors[ours]), strict=True):
            out[name] = np.ascontiguousarray(part, dtype=np.float32)
    used = {ours for ours, _, _ in rows}
    left = sorted(set(tensors) - used)
    if left:
        raise ValueError(
            f"The preset's variables {left[:6]} have no counterpart in transformers' "
            f"{model_class}; nothing was written (a head of another structure?)."
        )
    return out


def _write(staging: Path, config, tensors: dict, model_class: str) -> None:
    architecture = config.architecture
    fields = None
    if config.task in TASK_HEADS:
        fields = huggingface_task_fields(config.task, config.task_config)
    (staging / "config.json").write_text(
        json.dumps(huggingface_config(architecture, model_class, fields), indent=2) + "\n"
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
    vectors = getattr(registry.find(config.task), "vectors", False)
    pooling = config.task_config if vectors else config.embedder
    if pooling:
        write_sentence_transformers_files(staging, architecture, pooling, config.sequence_length)


def export_huggingface(preset, destination, overwrite: bool = False) -> Path:
    """Writes a preset directory as a transformers BERT directory.

    >>> kbz.checkpoints.export_huggingface("runs/sst2/preset", "hf_dir")
    >>> transformers.AutoModelForSequenceClassification.from_pretrained("hf_dir")  # elsewhere
    """
    destination = check_new_directory(destination, overwrite)  # before any reading
    config = read_preset_directory(preset)
    if config.weights_path is None or not config.weights_path.is_file():
        raise ValueError(
            f"Preset '{config.name}' has no weights on this machine; load it once "
            "with kbz.from_preset (downloads) or convert a checkpoint first."
        )
    tensors = read_preset_weights(config)
    model_class, head_rows, pooler = export_layout(config, tensors)
    hf_tensors = huggingface_tensors(
        tensors, config.architecture["num_layers"], model_class, head_rows, pooler
    )
    with staged_directory(destination) as staging:
        _write(staging, config, hf_tensors, model_class)
    logger.info("Wrote %s (%s).", destination, model_class)
    return destination
