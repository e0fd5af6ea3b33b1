"""Every flag of the `kbz` command line (argparse only; no heavy import).

`create-pretraining-data` keeps google-research/bert's snake_case flags and also accepts the
kebab-case spelling of the other commands.
"""

import argparse

from keras_bert_zoo import __version__
from keras_bert_zoo.choices import PRECISIONS, STRATEGIES
from keras_bert_zoo.cli import commands, embed_commands
from keras_bert_zoo.cli.checkpoint_flags import add_checkpoint_arguments
from keras_bert_zoo.cli.compile_flags import add_compile_arguments
from keras_bert_zoo.cli.create_data_flags import add_create_pretraining_data_arguments
from keras_bert_zoo.cli.embed_parser import add_embed
from keras_bert_zoo.cli.export_flags import add_export_flags
from keras_bert_zoo.cli.finetune_flags import add_finetune_hyperparameters
from keras_bert_zoo.cli.lora_flags import add_lora_arguments
from keras_bert_zoo.cli.task_flags import (
    PREDICT_TASKS,
    add_finetune_task_flags,
    add_predict_task_flags,
    add_task,
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


def _add_training_arguments(
    parser, learning_rate: float | None = None, batch_size=32, task: str | None = None
) -> None:
    """Flags shared by `kbz finetune TASK` and `kbz pretrain` (finetune's schedule: `task`'s)."""
    parser.add_argument("--output", required=True, help="output directory")
    if learning_rate is None:
        add_finetune_hyperparameters(parser, task)
    else:
        parser.add_argument(
            "--batch-size",
            type=int,
            default=batch_size,
            help=f"training examples per step (default: {batch_size})",
        )
        parser.add_argument(
            "--learning-rate",
            type=float,
            default=learning_rate,
            help="peak learning rate of the warmup + linear-decay schedule "
            f"(default: {learning_rate:g})",
        )
        parser.add_argument(
            "--warmup-fraction",
            type=float,
            default=0.1,
            help="share of the steps that warm the learning rate up (default: 0.1)",
        )
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="none",
        help="none (one device, default); on TensorFlow, a tf.distribute strategy: mirrored "
        "(every local GPU), multi-worker (TF_CONFIG's workers), tpu (with --tpu); on JAX, "
        "data-parallel: every device of every process, the processes joined as "
        "keras.distribution.initialize reads KERAS_DISTRIBUTION_JOB_ADDRESSES (process 0's "
        "host:port), KERAS_DISTRIBUTION_NUM_PROCESSES and KERAS_DISTRIBUTION_PROCESS_ID; "
        "process 0 writes --output, which every process must see",
    )
    parser.add_argument(
        "--tpu", default=None, help="TPU name or address (--strategy tpu) (default: none, local)"
    )
    add_compile_arguments(
        parser,
        "compile training steps with XLA (default: on, off with KERAS_BACKEND=torch; "
        "--no-jit-compile runs them uncompiled, e.g. to debug)",
    )
    parser.add_argument(
        "--mixed-precision",
        choices=PRECISIONS,
        default="float32",
        help="Keras dtype policy: float32 (default), mixed_bfloat16 (TPU, recent GPUs), "
        "mixed_float16 (GPUs; loss scaling on)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the new head, dropout and the batch order: the same seed and data give "
        "the same run (default: 0)",
    )
    add_checkpoint_arguments(parser)
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh in --output, deleting a previous run there (without it, only the "
        "same command resumes an unfinished run; a finished one returns its metrics) "
        "(default: off)",
    )


def _add_finetune(subcommands) -> None:
    finetune = subcommands.add_parser(
        "finetune",
        help="fine-tune a classifier, tagger, QA model or sentence embedder",
        description="`kbz finetune TASK --help` lists the task's flags and its defaults.",
    )
    tasks = finetune.add_subparsers(dest="task", required=True, metavar="TASK")
    for task in sorted(spec.cli_name for spec in SPECS.values()):
        parser, spec = add_task(tasks, task)
        parser.add_argument("--preset", required=True, help="preset name or directory")
        parser.add_argument("--train", required=True, help=spec.train_file)
        parser.add_argument("--validation", required=True, help="a file of the same format")
        _add_training_arguments(parser, task=task)
        parser.add_argument(
            "--no-export",
            action="store_true",
            help="skip the SavedModel (default: off, export/1 is written)",
        )
        parser.add_argument(
            "--bucketing",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="batches of similar length trimmed to a few lengths chosen from the training "
            "set (multiples of 8; validation: 16, 32, 64, ...) (default: on; --no-bucketing "
            "pads every batch to --sequence-length)",
        )
        parser.add_argument(
            "--keep",
            choices=["best", "last"],
            default="best",
            help="weights written out: the best validation epoch's (default) or the last ones",
        )
        add_finetune_task_flags(parser, task)
        add_lora_arguments(parser)
        parser.set_defaults(run=embed_commands.run_finetune)


def _add_pretrain(subcommands) -> None:
    pretrain = subcommands.add_parser("pretrain", help="MLM + NSP pretraining")
    pretrain.add_argument("--preset", required=True, help="preset name or directory")
    pretrain.add_argument(
        "--from-scratch",
        action="store_true",
        help="the preset's architecture with fresh weights (default: off, the preset's weights)",
    )
    pretrain.add_argument(
        "--input-file",
        help="TFRecord files, comma-separated or globs (default: none; this or --text-file)",
    )
    pretrain.add_argument(
        "--text-file",
        help="text files, masked on the fly each epoch (default: none; this or --input-file)",
    )
    pretrain.add_argument(
        "--num-train-steps",
        type=int,
        default=1000,
        help="batches to train on (optimizer updates x accumulation steps) (default: 1000)",
    )
    pretrain.add_argument(
        "--max-seq-length", type=int, default=128, help="tokens per sequence (default: 128)"
    )
    pretrain.add_argument(
        "--max-predictions-per-seq",
        type=int,
        default=20,
        help="masked positions per sequence, google-research/bert's flag (default: 20)",
    )
    pretrain.add_argument(
        "--optimizer",
        choices=["adamw", "lamb"],
        default="adamw",
        help="adamw (default) or lamb (large batches, as in the LAMB paper)",
    )
    pretrain.add_argument(
        "--gradient-accumulation-steps",
        type=int,
        default=None,
        help="batches whose gradients add up to one optimizer step (default: 1)",
    )
    _add_training_arguments(pretrain, learning_rate=1e-4, batch_size=32)
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
