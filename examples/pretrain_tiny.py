"""Pretrain bert_tiny from scratch with masked LM + next sentence prediction, plain Keras.

Text from the bundled Gutenberg and WikiText files is tokenized once and masked on the fly
(new masks and sentence pairs every epoch); the loss is weighted so padded prediction slots
count for nothing.

    python examples/pretrain_tiny.py
    python examples/pretrain_tiny.py --fast
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from _common import DATA, parse_args  # noqa: E402

import keras_bert_zoo as kbz  # noqa: E402
from keras_bert_zoo.data.pretraining import dynamic_masking_dataset  # noqa: E402
from keras_bert_zoo.pretraining import compile_pretrainer  # noqa: E402


def main():
    args = parse_args(__doc__)
    preset = args.preset or "bert_tiny_en_uncased"
    steps = 10 if args.fast else 300
    dataset = dynamic_masking_dataset(
        str(DATA / "pretraining" / "*.txt"),
        kbz.BertTokenizer.from_preset(preset),
        kbz.presets.load_preset_config(preset).vocabulary_path,
        batch_size=32,
        max_seq_length=128,
        max_predictions_per_seq=20,
        seed=0,
    )
    model = kbz.from_preset(preset, task="pretrainer", load_weights=False, max_predictions=20)
    compile_pretrainer(
        model, kbz.training.create_optimizer(1e-3, total_steps=steps), jit_compile=True
    )
    history = model.fit(dataset, steps_per_epoch=steps, epochs=1)
    print({key: round(values[-1], 4) for key, values in history.history.items()})
    kbz.save_preset(model, f"{args.output}/pretrained_tiny", overwrite=True)


if __name__ == "__main__":
    main()
