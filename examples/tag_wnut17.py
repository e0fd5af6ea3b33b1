"""Named-entity tagging on WNUT-17 with plain Keras: labels on each word's first sub-word.

python examples/tag_wnut17.py            # 1,000 training sentences, 300 dev sentences
python examples/tag_wnut17.py --fast
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from _common import DATA, parse_args, real_preset  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.finetuning import TaggingTask  # noqa: E402


def main():
    args = parse_args(__doc__)
    preset = real_preset(args.preset, args.output)
    preprocessor = kbz.BertPreprocessor.from_preset(preset, sequence_length=64)
    task = TaggingTask(preprocessor)  # reader -> first-sub-word alignment -> arrays
    train = kbz.data.read_conll(DATA / "wnut17_train_sample.conll")
    dev = kbz.data.read_conll(DATA / "wnut17_dev_sample.conll", tag_names=train.tag_names)
    if args.fast:
        train.sentences, train.tag_ids = train.sentences[:64], train.tag_ids[:64]
        dev.sentences, dev.tag_ids = dev.sentences[:32], dev.tag_ids[:32]
    x, y, _ = task.arrays(train)
    x_dev, _, word_index = task.arrays(dev)
    train_ds = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(len(y), seed=0)
        .batch(16, drop_remainder=True)
    )
    model = kbz.from_preset(preset, task="tagger", num_tags=len(train.tag_names))
    model.compile(
        optimizer=kbz.training.create_optimizer(1e-4, total_steps=3 * len(train_ds)),
        loss=kbz.tasks.tagger_loss(),
        jit_compile=True,
    )
    model.fit(train_ds, epochs=1 if args.fast else 3)
    scores = task.evaluate(dev, model.predict(x_dev, batch_size=64), word_index)
    print("dev entity precision {precision:.3f} recall {recall:.3f} F1 {f1:.3f}".format(**scores))


if __name__ == "__main__":
    main()
