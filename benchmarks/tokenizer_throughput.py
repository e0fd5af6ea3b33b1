"""Tokenizer throughput: keras_bert_zoo.BertTokenizer vs Hugging Face `tokenizers`, same run.

Tokenizes every non-blank line of a real corpus (default: the .txt/.raw files in tests/data; pass
a file or folder, e.g. ../shared/data/gutenberg) with both and prints tokens per second and
the ratio. Ours runs as in training input pipelines: batches in a tf.data map, and batches
through one tf.function. The reference runs `BertWordPieceTokenizer.encode_batch` (Rust, all
cores). Both give the same ids (see tools/check_tokenizer_parity.py); the token counts are checked.

    python benchmarks/tokenizer_throughput.py [PATH] [--vocab uncased] [--batch-size 256]
"""

import argparse
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tokenizers  # noqa: E402
from tokenizers import BertWordPieceTokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.tokenization import BertTokenizer  # noqa: E402

LOWERCASE = {"uncased": True, "cased": False, "multi_cased": False, "chinese": True}
TEXT_SUFFIXES = (".txt", ".raw")


def read_lines(path):
    path = Path(path)
    files = (
        sorted(p for p in path.glob("*") if p.suffix in TEXT_SUFFIXES) if path.is_dir() else [path]
    )
    lines = [
        line.rstrip("\r")
        for file in files
        for line in file.read_text(encoding="utf-8").split("\n")
        if line.strip()
    ]
    return files, lines


def best_of(repeats, function):
    """(best seconds, result) over `repeats` runs."""
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", default=str(ROOT / "tests" / "data"))
    parser.add_argument("--vocab", default="uncased", choices=list(LOWERCASE))
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    files, lines = read_lines(args.path)
    vocabulary = str(kbz.presets.builtin_presets_dir() / "vocab" / f"{args.vocab}.txt")
    lowercase = LOWERCASE[args.vocab]
    ours = BertTokenizer(vocabulary, lowercase=lowercase)
    reference = BertWordPieceTokenizer(vocabulary, lowercase=lowercase)
    print(
        f"corpus: {args.path} ({len(files)} files, {len(lines):,} lines, "
        f"{sum(map(len, lines)):,} characters); vocabulary {args.vocab}"
    )
    print(
        f"tensorflow {tf.__version__}, tokenizers {tokenizers.__version__}, "
        f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}"
    )

    def run_reference():
        encodings = reference.encode_batch(lines, add_special_tokens=False)
        return sum(len(e.ids) for e in encodings)

    dataset = (
        tf.data.Dataset.from_tensor_slices(lines)
        .batch(args.batch_size)
        .map(lambda batch: tf.size(ours(batch).values), num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
    function = tf.function(lambda batch: tf.size(ours(batch).values))
    batches = [
        tf.constant(lines[i : i + args.batch_size]) for i in range(0, len(lines), args.batch_size)
    ]
    function(batches[0])  # trace once

    def run_dataset():
        return int(sum(dataset.as_numpy_iterator()))

    def run_function():
        return int(sum(function(batch) for batch in batches))

    results = {}
    for name, run in (
        ("tokenizers (Rust, encode_batch)", run_reference),
        ("ours: tf.data map", run_dataset),
        ("ours: tf.function", run_function),
    ):
        seconds, count = best_of(args.repeats, run)
        results[name] = (count, count / seconds)
        print(f"{name:<34}{count:>11,} tokens {seconds:8.2f} s {count / seconds:>12,.0f} tokens/s")
    counts = {count for count, _ in results.values()}
    assert len(counts) == 1, f"token counts differ: {results}"
    reference_speed = results["tokenizers (Rust, encode_batch)"][1]
    for name in ("ours: tf.data map", "ours: tf.function"):
        print(f"ratio {name} / tokenizers: {results[name][1] / reference_speed:.2f}")


if __name__ == "__main__":
    main()
