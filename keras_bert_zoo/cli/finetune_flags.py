"""`kbz finetune`'s hyperparameter flags, whose defaults depend on the task (argparse only).

Each flag defaults to None on the command line; `resolve` fills in the task's value from
`choices.FINETUNE_DEFAULTS` (the table `run_finetune` uses too), and `--help` lists them.
"""

from keras_bert_zoo.choices import FINETUNE_DEFAULTS, finetune_settings

# Command-line task names -> the package's task names (`keras_bert_zoo.tasks.TASKS`).
TASK_NAMES = {
    "classify": "classifier",
    "tag": "tagger",
    "qa": "question_answerer",
    "embed": "embedder",
}
FLAGS = {
    "epochs": (int, "passes over the training data"),
    "batch_size": (int, "training examples per step"),
    "learning_rate": (float, "peak learning rate of the warmup + linear-decay schedule"),
    "warmup_fraction": (float, "share of the steps that warm the learning rate up"),
    "sequence_length": (int, "tokens per sequence (QA: per window)"),
}


def _per_task(name: str) -> str:
    return ", ".join(f"{cli} {FINETUNE_DEFAULTS[task][name]:g}" for cli, task in TASK_NAMES.items())


def add_finetune_hyperparameters(parser) -> None:
    """`--epochs`, `--batch-size`, `--learning-rate`, `--warmup-fraction`, `--sequence-length`."""
    for name, (kind, meaning) in FLAGS.items():
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            type=kind,
            default=None,
            help=f"{meaning} (default per task: {_per_task(name)})",
        )


def resolve(args):
    """Fills the flags left out with the defaults of `args.task`; returns `args`."""
    given = {name: getattr(args, name) for name in FLAGS}
    lora = bool(getattr(args, "lora_rank", None))
    vars(args).update(finetune_settings(TASK_NAMES[args.task], lora=lora, **given))
    return args
