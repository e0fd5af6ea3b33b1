"""`kbz pretrain`: MLM + NSP pretraining (`jobs.pretrain`); its flags are `PretrainConfig`'s
fields (`jobs.config`)."""

import json
from pathlib import Path

from keras_bert_zoo.cli.common import list_outputs
from keras_bert_zoo.cli.compile_flags import RESOLVED, add_compile_cache_argument
from keras_bert_zoo.cli.config_flags import add_config_flags, config_from_args
from keras_bert_zoo.jobs.config import CHECKPOINTS, PretrainConfig

# The flags in `--help`'s order.
FLAGS = (
    ("preset", "from_scratch", "input_file", "text_file", "num_train_steps", "max_seq_length"),
    ("max_predictions_per_seq", "optimizer", "gradient_accumulation_steps", "output"),
    ("batch_size", "learning_rate", "warmup_fraction", "strategy", "tpu", "jit_compile"),
    ("mixed_precision", "seed", *CHECKPOINTS, "overwrite"),
)


def add_parser(subcommands) -> None:
    pretrain = subcommands.add_parser("pretrain", help="MLM + NSP pretraining")
    *first, last = FLAGS
    for names in first:
        add_config_flags(pretrain, PretrainConfig, names, defaults=RESOLVED)
    add_compile_cache_argument(pretrain)
    add_config_flags(pretrain, PretrainConfig, last)
    pretrain.set_defaults(run=run, check=run_config)


def run_config(args) -> PretrainConfig:
    """The run's config from the flags (it checks them: no library imported yet)."""
    return config_from_args(PretrainConfig, args)


def run(args) -> int:
    from keras_bert_zoo.jobs import pretrain  # when run: --help stays instant

    metrics = pretrain.pretrain(run_config(args))
    print(json.dumps(metrics, indent=2, sort_keys=True))
    list_outputs(
        args.output,
        ("preset", "the pretrained preset (kbz finetune --preset, kbz.from_preset)"),
        ("metrics.json", "the last interval's training metrics"),
        ("logs", "TensorBoard: tensorboard --logdir " + str(Path(args.output) / "logs")),
    )
    return 0
