"""`kbz finetune`'s hyperparameter flags, whose defaults depend on the task (argparse only).

Each flag defaults to None on the command line; `resolve` fills in the task's value from
the task's spec (`keras_bert_zoo.task_specs`, the table `run_finetune` uses too), and
`--help` lists them.
"""

from keras_bert_zoo.choices import FINETUNE_DEFAULTS, LORA_LEARNING_RATE, finetune_settings
from keras_bert_zoo.task_specs import SPECS

# Command-line task names -> the package's task names (`keras_bert_zoo.tasks.TASKS`).
TASK_NAMES = {spec.cli_name: name for name, spec in SPECS.items()}
FLAGS = {
    "epochs": (int, "passes over the training data"),
    "batch_size": (int, "training examples per step"),
    "learning_rate": (float, "peak learning rate of the warmup + linear-decay schedule"),
    "warmup_fraction": (float, "share of the steps that warm the learning rate up"),
    "sequence_length": (int, "tokens per sequence (QA: per window)"),
}


def add_finetune_hyperparameters(parser, task: str) -> None:
    """`--epochs`, `--batch-size`, `--learning-rate`, `--warmup-fraction`, `--sequence-length`
    of `kbz finetune <task>`, its defaults in the help (`resolve` fills them in)."""
    defaults = FINETUNE_DEFAULTS[TASK_NAMES[task]]
    for name, (kind, meaning) in FLAGS.items():
        lora = f"; with --lora-rank {LORA_LEARNING_RATE:g}" if name == "learning_rate" else ""
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            type=kind,
            default=None,
            help=f"{meaning} (default: {defaults[name]:g}{lora})",
        )


def resolve(args):
    """Fills the flags left out with the defaults of `args.task`; returns `args`."""
    given = {name: getattr(args, name) for name in FLAGS}
    lora = bool(getattr(args, "lora_rank", None))
    vars(args).update(finetune_settings(TASK_NAMES[args.task], lora=lora, **given))
    return args
