"""bert_tiny pretrained from scratch (MLM + NSP) on the bundled text, evaluated on held-out text.

    python benchmarks/pretrain_heldout.py --steps 3000 --heldout \
        ../shared/data/gutenberg/pg{345,174,2701}.txt   # books not in the training bundle

Trains with `kbz pretrain` (dynamic masking from examples/data/pretraining/*.txt, where the
documents are chapters and articles), then builds held-out TFRecords with
`kbz create-pretraining-data` (dupe factor 1, seed 1) from the first chapters of the
`--heldout` books, one document per chapter as in training, and evaluates the untrained and
the trained model on them: MLM loss (starts near ln(vocabulary) = 10.33), MLM accuracy and
NSP accuracy (chance 0.5; a random B segment comes from another chapter, of the same book or
another one).
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.cli import main as kbz_main  # noqa: E402
from keras_bert_zoo.data.pretraining import pretraining_dataset  # noqa: E402
from keras_bert_zoo.pretraining import compile_pretrainer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples/data/pretraining"))
from prepare import gutenberg_documents  # noqa: E402  (the bundle's chapter splitter)


def book_documents(book: Path, chapters=None, block=120) -> list:
    """Chapters (CHAPTER/roman headings); books without such headings: 120-sentence blocks."""
    found = gutenberg_documents(book, chapters)
    if len(found) < 2:
        sentences = [s for document in found for s in document]
        found = [sentences[i : i + block] for i in range(0, len(sentences), block)][:chapters]
    return [document for document in found if len(document) > 1]


def write_documents(documents: list, target: Path) -> Path:
    """Sentence per line, a blank line between documents (google-research/bert's format)."""
    target.write_text("\n\n".join("\n".join(d) for d in documents) + "\n")
    return target


def evaluate(model, records, batch):
    data = pretraining_dataset(str(records), batch, 128, 20, shuffle=False, repeat=False)
    return model.evaluate(data, verbose=0, return_dict=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument(
        "--heldout", nargs="+", required=True, help="Gutenberg books (plain text) not in the bundle"
    )
    parser.add_argument("--chapters", type=int, default=6, help="chapters taken per book")
    parser.add_argument(
        "--extra-train-books",
        nargs="*",
        default=[],
        help="more Gutenberg books for training (chapters as documents)",
    )
    parser.add_argument("--output", default="benchmark_output/pretrain_heldout")
    parser.add_argument("--optimizer", choices=["adamw", "lamb"], default="adamw")
    parser.add_argument("--learning-rate", default="1e-3")
    args = parser.parse_args()
    output = Path(args.output)
    work = Path(tempfile.mkdtemp())
    text = write_documents(
        [d for book in args.heldout for d in book_documents(Path(book), args.chapters)],
        work / "heldout.txt",
    )
    training = [str(ROOT / "examples/data/pretraining/*.txt")]
    if args.extra_train_books:
        overlap = {Path(b).resolve() for b in args.extra_train_books} & {
            Path(b).resolve() for b in args.heldout
        }
        if overlap:
            raise SystemExit(f"--extra-train-books and --heldout share {sorted(map(str, overlap))}")
        training.append(
            str(
                write_documents(
                    [d for book in args.extra_train_books for d in book_documents(Path(book))],
                    work / "extra_train.txt",
                )
            )
        )
    records = work / "heldout.tfrecord"
    kbz_main(
        [
            "create-pretraining-data",
            f"--input_file={text}",
            f"--output_file={records}",
            "--preset=bert_tiny_en_uncased",
            "--max_seq_length=128",
            "--max_predictions_per_seq=20",
            "--dupe_factor=1",
            "--random_seed=1",
        ]
    )
    keras.utils.set_random_seed(0)
    untrained = kbz.from_preset(
        "bert_tiny_en_uncased", task="pretrainer", load_weights=False, max_predictions=20
    )
    compile_pretrainer(untrained, "adam")
    before = evaluate(untrained, records, 32)
    kbz_main(
        [
            "pretrain",
            "--preset",
            "bert_tiny_en_uncased",
            "--from-scratch",
            "--text-file",
            ",".join(training),
            "--output",
            str(output),
            "--num-train-steps",
            str(args.steps),
            "--checkpoint-every",
            str(args.steps // 4),
            "--batch-size",
            "32",
            "--max-seq-length",
            "128",
            "--max-predictions-per-seq",
            "20",
            "--learning-rate",
            args.learning_rate,
            "--optimizer",
            args.optimizer,
        ]
    )
    trained = kbz.from_preset(str(output / "preset"), task="pretrainer")
    compile_pretrainer(trained, "adam")
    after = evaluate(trained, records, 32)
    result = {
        "steps": args.steps,
        "optimizer": args.optimizer,
        "learning_rate": args.learning_rate,
        "heldout": args.heldout,
        "chapters_per_book": args.chapters,
        "extra_train_books": args.extra_train_books,
        "heldout_instances": sum(1 for _ in tf.data.TFRecordDataset(str(records))),
        "before": before,
        "after": after,
    }
    (output / "heldout_metrics.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
