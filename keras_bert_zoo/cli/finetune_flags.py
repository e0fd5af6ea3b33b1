"""`kbz finetune`'s schedule flags, whose defaults depend on the task (argparse only).

Each flag defaults to None on the command line (`FinetuneConfig` fills in the task's value
from its spec, `keras_bert_zoo.tasks`); `resolve` fills them in on the parsed flags too,
so that the commands see the values the run records, and `--help` lists them.
"""

from keras_bert_zoo.choices import finetune_settings
from keras_bert_zoo.cli.task_flags import FINETUNE_TASKS
from keras_bert_zoo.jobs.config import SCHEDULE

FLAGS = SCHEDULE  # epochs, batch_size, sequence_length, learning_rate, warmup_fraction


def resolve(args):
    """Fills the flags left out with the defaults of `args.task`; returns `args`."""
    given = {name: getattr(args, name) for name in FLAGS}
    lora = bool(getattr(args, "lora_rank", None))
    vars(args).update(finetune_settings(FINETUNE_TASKS[args.task], lora=lora, **given))
    return args
