"""Full-corpus parity of `keras_bert_zoo.BertTokenizer` with Hugging Face `tokenizers`.

A developer tool, not a test: it reads the full corpora in ../shared/data (or --data), which
users' clones do not have. For every corpus line and vocabulary it compares the ids of
`BertWordPieceTokenizer(vocabulary, lowercase=L)` with ours, and our character offsets with its
offsets; for comparison it also counts the lines where keras-hub's `WordPieceTokenizer`
(lowercase=L, strip_accents=L, special tokens matched in the text like `tokenizers`, run as
in tf.data) gives the reference ids.

    python tools/check_tokenizer_parity.py                    # all corpora, all vocabularies
    python tools/check_tokenizer_parity.py --random 5000      # plus seeded random Unicode
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras_hub  # noqa: E402
import tensorflow as tf  # noqa: E402
from tokenizers import BertWordPieceTokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools"), str(ROOT / "tests")]
from record_tokenizer_reference import FULL_CORPORA, VOCABULARIES, load_corpora  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.tokenization import SPECIAL_TOKENS, BertTokenizer  # noqa: E402


def _batches(lines, size):
    for start in range(0, len(lines), size):
        yield lines[start : start + size]


def compare(lines, vocab, lowercase, batch_size, keras_hub_too):
    path = str(kbz.presets.builtin_presets_dir() / "vocab" / f"{vocab}.txt")
    ours = BertTokenizer(path, lowercase=lowercase)
    reference = BertWordPieceTokenizer(path, lowercase=lowercase)
    ours_fn = tf.function(lambda x: ours.tokenize_with_offsets(x, unit="char"))
    if keras_hub_too:
        theirs = keras_hub.tokenizers.WordPieceTokenizer(
            vocabulary=path,
            lowercase=lowercase,
            strip_accents=lowercase,
            special_tokens=list(SPECIAL_TOKENS),
            special_tokens_in_strings=True,
        )
        theirs_fn = tf.function(theirs.tokenize)  # the TensorFlow path, as in tf.data
    counts = {"lines": 0, "ids": 0, "offsets": 0, "keras_hub": 0}
    first_difference = None
    for batch in _batches(lines, batch_size):
        ids, starts, ends = (t.to_list() for t in ours_fn(tf.constant(batch)))
        hub = theirs_fn(tf.constant(batch)).to_list() if keras_hub_too else None
        for i, encoding in enumerate(reference.encode_batch(batch, add_special_tokens=False)):
            counts["lines"] += 1
            same_ids = ids[i] == encoding.ids
            counts["ids"] += same_ids
            counts["offsets"] += list(zip(starts[i], ends[i], strict=True)) == encoding.offsets
            counts["keras_hub"] += bool(keras_hub_too and hub[i] == encoding.ids)
            if not same_ids and first_difference is None:
                first_difference = batch[i]
    return counts, first_difference


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        default=str(ROOT.parent / "shared" / "data"),
        help="folder with the corpora (default: ../shared/data)",
    )
    parser.add_argument(
        "--vocab", nargs="*", default=list(VOCABULARIES), choices=list(VOCABULARIES)
    )
    parser.add_argument(
        "--random",
        type=int,
        default=0,
        metavar="N",
        help="also N lines of seeded random Unicode (tests' generator)",
    )
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--no-keras-hub", action="store_true")
    args = parser.parse_args(argv)
    corpora = load_corpora(args.data, FULL_CORPORA)
    header = (
        f"{'corpus':<16}{'vocabulary':<13}{'lines':>8}{'ids identical':>17}"
        f"{'offsets identical':>20}{'keras-hub identical':>24}"
    )
    print(header)
    print("-" * len(header))
    exit_code = 0
    for vocab in args.vocab:
        lowercase = VOCABULARIES[vocab]
        named = dict(corpora)
        if args.random:
            from test_tokenization import random_lines  # tests/test_tokenization.py

            named["random-unicode"] = random_lines(args.random, vocab, seed=2024)
        for name, lines in named.items():
            started = time.time()
            counts, difference = compare(
                lines, vocab, lowercase, args.batch_size, not args.no_keras_hub
            )
            n = counts["lines"]

            def cell(key, width, n=n, counts=counts):
                return f"{counts[key]:>{width - 10}} ({100 * counts[key] / max(n, 1):6.2f}%)"

            hub = cell("keras_hub", 24) if not args.no_keras_hub else f"{'-':>24}"
            print(
                f"{name:<16}{vocab:<13}{n:>8}{cell('ids', 17)}{cell('offsets', 20)}{hub}"
                f"   [{time.time() - started:.0f} s]",
                flush=True,
            )
            if counts["ids"] != n or counts["offsets"] != n:
                exit_code = 1
                if difference is not None:
                    print(f"    first line with different ids: {difference[:200]!r}")
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
