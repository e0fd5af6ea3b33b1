"""Token positions computed per real token on SST-2's training split: padding to a fixed
length, length bucketing (`kbz finetune`'s default), and sequence packing.

    KBZ_DATA=/path/to/shared/data python benchmarks/packing.py --sequence-length 128

Each sentence is tokenized with the bundled uncased vocabulary (`[CLS]` and `[SEP]`
included, truncated to `--sequence-length`). Bucketing counts every example at its bucket's
length (`training.bucket_choice.training_buckets`, batch `--batch-size`, one epoch); packing
counts rows x row length (`training.packing.pack_rows`, best fit decreasing).
"""

import argparse
import os
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_bert_zoo.tokenization import BertTokenizer  # noqa: E402
from keras_bert_zoo.training.batching import bucket_ids  # noqa: E402
from keras_bert_zoo.training.bucket_choice import training_buckets  # noqa: E402
from keras_bert_zoo.training.packing import pack_rows  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA_ROOT = Path(os.environ.get("KBZ_DATA", ROOT.parent / "shared" / "data"))
VOCABULARY = ROOT / "keras_bert_zoo" / "presets" / "bundled" / "vocab" / "uncased.txt"


def sst2_lengths(sequence_length: int) -> np.ndarray:
    lines = (DATA_ROOT / "sst2" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]
    texts = [line.rsplit("\t", 1)[0] for line in lines]
    tokenizer = BertTokenizer(str(VOCABULARY))
    lengths = []
    for start in range(0, len(texts), 4096):
        pieces = tokenizer.tokenize(texts[start : start + 4096])
        counts = pieces.row_lengths() if hasattr(pieces, "row_lengths") else map(len, pieces)
        lengths.extend(int(n) + 2 for n in np.asarray(list(counts)))
    return np.minimum(np.array(lengths), sequence_length)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rows", type=int, nargs="+", default=[64, 128])
    args = parser.parse_args()
    lengths = sst2_lengths(args.sequence_length)
    real = int(lengths.sum())
    print(f"{len(lengths)} sentences, {real} real tokens, max {lengths.max()}")
    print(f"fixed {args.sequence_length}: {len(lengths) * args.sequence_length / real:.3f}x")
    buckets = training_buckets(lengths, args.batch_size, args.sequence_length)
    positions = int(np.asarray(buckets)[bucket_ids(lengths, buckets)].sum())
    print(f"bucketing {list(buckets)}: {positions} positions, {positions / real:.3f}x")
    for row_length in args.rows:
        began = time.perf_counter()
        rows = pack_rows(np.minimum(lengths, row_length), row_length)
        took = time.perf_counter() - began
        print(
            f"packing {row_length}: {len(rows)} rows, {len(rows) * row_length / real:.3f}x, "
            f"{len(lengths) / len(rows):.2f} examples a row, packed in {took:.1f} s"
        )


if __name__ == "__main__":
    main()
