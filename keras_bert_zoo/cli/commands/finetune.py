"""`kbz finetune TASK`: one subcommand per task, whose flags are `FinetuneConfig`'s fields
(`jobs.config`) and the task's own options (`tasks.registry`); every task runs `jobs.finetune`."""

import json
from pathlib import Path

from keras_bert_zoo.choices import LORA_LEARNING_RATE, PREDICTION_FILES
from keras_bert_zoo.cli import finetune_flags
from keras_bert_zoo.cli.common import SAVED_MODEL_LOADING, list_outputs
from keras_bert_zoo.cli.compile_flags import RESOLVED, add_compile_cache_argument
from keras_bert_zoo.cli.config_flags import add_config_flags, config_from_args
from keras_bert_zoo.cli.task_flags import (
    FINETUNE_TASKS,
    add_finetune_task_flags,
    add_task,
    finetune_options,
)
from keras_bert_zoo.jobs.config import CHECKPOINTS, LORA, SCHEDULE, FinetuneConfig
from keras_bert_zoo.tasks.registry import SPECS

# The flags in `--help`'s order: the run's files and schedule, its devices, the rest.
FLAGS = (
    ("preset", "train", "validation", "output", *SCHEDULE, "weight_decay"),
    ("strategy", "tpu", "jit_compile"),
    (
        "mixed_precision",
        "seed",
        *CHECKPOINTS,
        "overwrite",
        "export",
        "bucketing",
        "packing",
        "keep",
    ),
)


def add_parser(subcommands) -> None:
    finetune = subcommands.add_parser(
        "finetune",
        help="fine-tune a classifier, tagger, QA model, reranker or sentence embedder",
        description="`kbz finetune TASK --help` lists the task's flags and its defaults.",
    )
    tasks = finetune.add_subparsers(dest="task", required=True, metavar="TASK")
    for task in sorted(spec.cli_name for spec in SPECS.values()):
        parser, spec = add_task(tasks, task)
        shown = {name: f"{value:g}" for name, value in spec.defaults.items()}
        shown["learning_rate"] += f"; with --lora-rank {LORA_LEARNING_RATE:g}"
        first, devices, rest = FLAGS
        add_config_flags(
            parser, FinetuneConfig, first, shown=shown, helps={"train": spec.train_file}
        )
        add_config_flags(parser, FinetuneConfig, devices, defaults=RESOLVED)
        add_compile_cache_argument(parser)
        add_config_flags(parser, FinetuneConfig, rest)
        add_finetune_task_flags(parser, task)
        add_config_flags(parser, FinetuneConfig, LORA)
        parser.set_defaults(run=run, check=run_config)


def run_config(args) -> FinetuneConfig:
    """The run's config from the flags (it checks them: no library imported yet)."""
    finetune_flags.resolve(args)  # the task's defaults for the flags left out
    task, options = FINETUNE_TASKS[args.task], finetune_options(args)
    return config_from_args(FinetuneConfig, args, task=task, task_options=options)


def run(args) -> int:
    """Every task (`jobs.finetune`), then the metrics and one line per output written."""
    from keras_bert_zoo.jobs import finetune  # when run: --help stays instant

    config = run_config(args)
    task = config.task
    metrics = finetune.finetune(config)
    print(json.dumps(metrics, indent=2, sort_keys=True))
    output = Path(args.output)
    if task not in PREDICTION_FILES:  # the embedder: retrieval metrics, no predictions
        preset = ("preset", f"the embedder (kbz embed --model {output}, kbz.from_preset)")
        listed = [("metrics.json", "validation retrieval before and after, per epoch")]
    else:
        preset = ("preset", "preset directory (kbz.from_preset, kbz predict --model)")
        listed = [
            (PREDICTION_FILES[task], "validation predictions"),
            ("metrics.json", "validation metrics, per epoch in `history`"),
        ]
    list_outputs(
        output,
        ("model.keras", "the Keras model (kbz.load_model)"),
        ("adapter.safetensors", "LoRA adapters and head alone (kbz.load_lora_weights)"),
        preset,
        ("export/1", f"SavedModel for TF Serving, raw strings in ({SAVED_MODEL_LOADING})"),
        *listed,
        ("logs", "TensorBoard: tensorboard --logdir " + str(output / "logs")),
    )
    return 0
