"""Sentiment classification on SST-2 with plain Keras: preset -> model.fit -> evaluate -> export.

python examples/classify_sst2.py            # 3,000 training sentences, 800 held out
python examples/classify_sst2.py --fast     # a smoke run
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from _common import DATA, parse_args, real_preset  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402


def dataset(data, preprocessor, batch_size, training):
    texts = [example.text_a for example in data.examples]
    ds = tf.data.Dataset.from_tensor_slices((texts, data.labels))
    if training:
        ds = ds.shuffle(len(texts), seed=0)
    return (
        ds.batch(batch_size, drop_remainder=training)
        .map(lambda text, label: (preprocessor(text), label), tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )


def main():
    args = parse_args(__doc__)
    preset = real_preset(args.preset, args.output)
    train = kbz.data.read_glue_tsv(DATA / "sst2_sample.tsv")
    heldout = kbz.data.read_glue_tsv(DATA / "sst2_heldout.tsv", label_names=train.label_names)
    if args.fast:
        train.examples, train.labels = train.examples[:64], train.labels[:64]
        heldout.examples, heldout.labels = heldout.examples[:32], heldout.labels[:32]
    preprocessor = kbz.BertPreprocessor.from_preset(preset, sequence_length=64)
    train_ds = dataset(train, preprocessor, 32, training=True)
    model = kbz.from_preset(preset, task="classifier", num_classes=len(train.label_names))
    model.compile(
        optimizer=kbz.training.create_optimizer(1e-4, total_steps=len(train_ds)),
        loss=kbz.tasks.classifier_loss(len(train.label_names)),
        metrics=["accuracy"],
        jit_compile=True,
    )
    model.fit(train_ds, epochs=1)
    _, accuracy = model.evaluate(dataset(heldout, preprocessor, 64, training=False))
    print(f"held-out accuracy: {accuracy:.3f}")
    path = kbz.export_saved_model(
        model,
        f"{args.output}/exports/sst2/1",
        preprocessor=preprocessor,
        label_names=train.label_names,
        overwrite=True,
    )
    print(f"SavedModel for TF Serving: {path}")


if __name__ == "__main__":
    main()
