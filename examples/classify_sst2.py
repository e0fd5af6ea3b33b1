"""Sentiment classification on SST-2 in a Keras script: raw strings in, labels out, export.

python examples/classify_sst2.py            # 3,000 training sentences, 800 held out
python examples/classify_sst2.py --fast     # a smoke run

`kbz.BertClassifier` carries its preprocessing and `kbz finetune`'s defaults (AdamW on
warmup and linear decay, length-bucketed batches, XLA), so the script is what a keras-hub
user writes, on TensorFlow, JAX or PyTorch (`KERAS_BACKEND`); export needs TensorFlow.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
from _common import DATA, parse_args, real_preset  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402


def read(path, count=None):
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:]]
    rows = rows[:count]
    return [r[0] for r in rows], [int(r[1]) for r in rows]


def main():
    args = parse_args(__doc__)
    preset = real_preset(args.preset, args.output)
    texts, labels = read(DATA / "sst2_sample.tsv", 64 if args.fast else None)
    heldout, heldout_labels = read(DATA / "sst2_heldout.tsv", 32 if args.fast else None)

    classifier = kbz.BertClassifier.from_preset(
        preset, label_names=["negative", "positive"], sequence_length=64
    )
    classifier.fit(x=texts, y=labels, batch_size=32, epochs=1, seed=args.seed)
    metrics = classifier.evaluate(heldout, heldout_labels)
    print(f"held-out accuracy: {metrics['accuracy']:.3f}")
    print(classifier.classify(["a gorgeous, witty film", "a tedious mess"]))

    if keras.backend.backend() == "tensorflow":
        path = kbz.export_saved_model(classifier, f"{args.output}/exports/sst2/1", overwrite=True)
        print(f"SavedModel for TF Serving (raw strings in): {path}")


if __name__ == "__main__":
    main()
