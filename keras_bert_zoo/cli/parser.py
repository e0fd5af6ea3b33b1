"""Every flag of the `kbz` command line (argparse only; no heavy import). The flags of
`kbz finetune` and `kbz pretrain` are their run configs' fields (`jobs.config`).

`create-pretraining-data` keeps google-research/bert's snake_case flags and also accepts the
kebab-case spelling of the other commands.
"""

import argparse

from keras_bert_zoo import __version__
from keras_bert_zoo.choices import LORA_LEARNING_RATE
from keras_bert_zoo.cli import commands
from keras_bert_zoo.cli.compile_flags import add_compile_arguments, add_compile_cache_argument
from keras_bert_zoo.cli.config_flags import add_config_flags
from keras_bert_zoo.cli.create_data_flags import add_create_pretraining_data_arguments
from keras_bert_zoo.cli.embed_parser import add_embed
from keras_bert_zoo.cli.export_flags import add_export_flags
from keras_bert_zoo.cli.task_flags import (
    PREDICT_TASKS,
    add_finetune_task_flags,
    add_predict_task_flags,
    add_task,
)
from keras_bert_zoo.jobs.config import (
    CHECKPOINTS,
    LORA,
    SCHEDULE,
    FinetuneConfig,
    PretrainConfig,
)
from keras_bert_zoo.task_specs import SPECS


def _add_convert(subcommands) -> None:
    convert = subcommands.add_parser("convert", help="convert a checkpoint to a preset directory")
    convert.add_argument(
        "src",
        help="checkpoint: Google's release folder or .zip, a Hugging "
        "Face BERT directory, a keras-hub preset, or (with --to "
        "huggingface) a preset directory or downloaded preset name",
    )
    convert.add_argument("dst", help="directory to write")
    convert.add_argument(
        "--from",
        dest="source_format",
        choices=["auto", "huggingface", "google", "keras_hub"],
        default="auto",
        help="checkpoint format (default: auto, told by its files)",
    )
    convert.add_argument(
        "--to",
        dest="target_format",
        choices=["keras_bert_zoo", "huggingface"],
        default="keras_bert_zoo",
        help="write a preset directory (default) or a transformers directory",
    )
    convert.add_argument(
        "--allow-pickle",
        action="store_true",
        help="UNSAFE: read pytorch_model.bin (pickle runs code); trusted files only, needs torch",
    )
    convert.add_argument(
        "--vocab-file", help="vocab.txt for a keras-hub preset without a tokenizer asset"
    )
    convert.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    convert.set_defaults(run=commands.run_convert)


# `kbz finetune TASK`'s flags, in `--help`'s order: `FinetuneConfig`'s fields (`jobs.config`).
FINETUNE_FLAGS = (
    ("preset", "train", "validation", "output", *SCHEDULE, "weight_decay"),
    ("strategy", "tpu", "jit_compile"),
    ("mixed_precision", "seed", *CHECKPOINTS, "overwrite", "export", "bucketing", "keep"),
)
PRETRAIN_FLAGS = (
    ("preset", "from_scratch", "input_file", "text_file", "num_train_steps", "max_seq_length"),
    ("max_predictions_per_seq", "optimizer", "gradient_accumulation_steps", "output"),
    ("batch_size", "learning_rate", "warmup_fraction", "strategy", "tpu", "jit_compile"),
    ("mixed_precision", "seed", *CHECKPOINTS, "overwrite"),
)
# Flags the command line resolves itself: the task's schedule, the backend's XLA default.
_RESOLVED = {"jit_compile": None}


def _add_finetune(subcommands) -> None:
    finetune = subcommands.add_parser(
        "finetune",
        help="fine-tune a classifier, tagger, QA model or sentence embedder",
        description="`kbz finetune TASK --help` lists the task's flags and its defaults.",
    )
    tasks = finetune.add_subparsers(dest="task", required=True, metavar="TASK")
    for task in sorted(spec.cli_name for spec in SPECS.values()):
        parser, spec = add_task(tasks, task)
        shown = {name: f"{value:g}" for name, value in spec.defaults.items()}
        shown["learning_rate"] += f"; with --lora-rank {LORA_LEARNING_RATE:g}"
        first, devices, rest = FINETUNE_FLAGS
        add_config_flags(
            parser, FinetuneConfig, first, shown=shown, helps={"train": spec.train_file}
        )
        add_config_flags(parser, FinetuneConfig, devices, defaults=_RESOLVED)
        add_compile_cache_argument(parser)
        add_config_flags(parser, FinetuneConfig, rest)
        add_finetune_task_flags(parser, task)
        add_config_flags(parser, FinetuneConfig, LORA)
        parser.set_defaults(run=commands.run_finetune)


def _add_pretrain(subcommands) -> None:
    pretrain = subcommands.add_parser("pretrain", help="MLM + NSP pretraining")
    *first, last = PRETRAIN_FLAGS
    for names in first:
        add_config_flags(pretrain, PretrainConfig, names, defaults=_RESOLVED)
    add_compile_cache_argument(pretrain)
    add_config_flags(pretrain, PretrainConfig, last)
    pretrain.set_defaults(run=commands.run_pretrain)


def _add_predict(subcommands) -> None:
    predict = subcommands.add_parser(
        "predict",
        help="predictions of a fine-tuned model on a file (and its metrics)",
        description="`kbz predict TASK --help` lists the task's flags.",
    )
    tasks = predict.add_subparsers(dest="task", required=True, metavar="TASK")
    for task in sorted(PREDICT_TASKS):
        parser, spec = add_task(tasks, task)
        parser.add_argument(
            "--model", required=True, help="a kbz finetune output directory, or a fine-tuned preset"
        )
        parser.add_argument(
            "--input",
            required=True,
            help=f"{spec.train_file}; labels optional: metrics only where they are given",
        )
        parser.add_argument(
            "--output",
            required=True,
            help=f"the file to write, as `kbz finetune {task}` writes {spec.prediction_file}"
            " (QA also writes nbest_predictions.json beside it)",
        )
        parser.add_argument("--batch-size", type=int, default=64, help="(default: 64)")
        parser.add_argument(
            "--sequence-length",
            type=int,
            default=None,
            help="default: the run's own (the length its preset records; else 128)",
        )
        add_compile_arguments(
            parser,
            "run the model with XLA on GPU and TPU (default: on; on CPU one TensorFlow graph "
            "serves every length bucket)",
        )
        parser.add_argument(
            "--bucketing",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="batches of similar length trimmed to 16, 32, 64, ... tokens (default: on; "
            "--no-bucketing pads every batch to --sequence-length)",
        )
        add_predict_task_flags(parser, task)
        parser.set_defaults(run=commands.run_predict)


def _add_export(subcommands) -> None:
    export = subcommands.add_parser("export", help="SavedModel (TF Serving) or ONNX")
    export.add_argument(
        "source", help="preset directory (task and vocabulary from it) or a .keras model"
    )
    export.add_argument("destination", help="SavedModel version dir (exports/m/1) or ONNX dir")
    export.add_argument(
        "--preset",
        default=None,
        help="preset whose vocabulary the string signature uses (needed for a .keras model)",
    )
    export.add_argument(
        "--ids-only", action="store_true", help="only the serve_token_ids signature"
    )
    export.add_argument("--overwrite", action="store_true")
    add_export_flags(export)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbz", description="BERT for Keras 3.")
    parser.add_argument("--version", action="version", version=f"kbz {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log at INFO level and show TensorFlow's own log lines",
    )
    subcommands = parser.add_subparsers(dest="command", required=True)
    presets = subcommands.add_parser("presets", help="list the bundled presets")
    presets.set_defaults(run=commands.run_presets)
    _add_convert(subcommands)
    _add_finetune(subcommands)
    create = subcommands.add_parser(
        "create-pretraining-data", help="text to MLM+NSP TFRecords (google-research/bert flags)"
    )
    add_create_pretraining_data_arguments(create)
    create.set_defaults(run=commands.run_create_pretraining_data)
    _add_pretrain(subcommands)
    _add_predict(subcommands)
    _add_export(subcommands)
    add_embed(subcommands)
    return parser
