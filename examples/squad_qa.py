"""Extractive question answering on SQuAD v1.1 with plain Keras: doc-stride windows,
n-best post-processing back to answer text, the official exact-match / F1.

    python examples/squad_qa.py              # 6 training articles, 2 held-out articles
    python examples/squad_qa.py --fast
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from _common import DATA, parse_args, real_preset  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.finetuning import QuestionAnsweringTask  # noqa: E402


def main():
    args = parse_args(__doc__)
    preset = real_preset(args.preset, args.output)
    length = 128 if args.fast else 256
    preprocessor = kbz.BertPreprocessor.from_preset(preset, sequence_length=length)
    task = QuestionAnsweringTask(preprocessor, doc_stride=64)
    train = kbz.data.read_squad(DATA / "squad_train_sample.json")
    heldout = kbz.data.read_squad(DATA / "squad_heldout_sample.json")
    if args.fast:
        train, heldout = train[:48], heldout[:16]
    x, y, _ = task.arrays(train)
    x_held, _, features = task.arrays(heldout)
    train_ds = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(len(x["token_ids"]), seed=0)
        .batch(16, drop_remainder=True)
    )
    model = kbz.from_preset(preset, task="question_answerer")
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(
        optimizer=kbz.training.create_optimizer(1e-4, total_steps=2 * len(train_ds)),
        loss={"start_logits": loss, "end_logits": loss},
        jit_compile=True,
    )
    model.fit(train_ds, epochs=1 if args.fast else 2)
    scores = task.evaluate(heldout, model.predict(x_held, batch_size=32), features)
    print("held-out exact match {exact_match:.1f}, F1 {f1:.1f}".format(**scores))


if __name__ == "__main__":
    main()
