"""The subcommands of `kbz finetune TASK` and `kbz predict TASK`: each task's own flags,
generated from its spec's options (`keras_bert_zoo.tasks.spec.TaskOption`).

`kbz finetune tag --help` lists the tagger's flags with the tagger's defaults, and no other
task's (argparse only; no heavy import).
"""

from keras_bert_zoo.tasks.registry import SPECS
from keras_bert_zoo.tasks.registry import for_cli as spec_for_cli
from keras_bert_zoo.tasks.spec import TaskOption

# `kbz finetune TASK` -> the task it trains with `jobs.finetune`: every task.
FINETUNE_TASKS = {spec.cli_name: name for name, spec in SPECS.items()}
# `kbz predict TASK` -> the task: those that write a prediction file.
PREDICT_TASKS = {spec.cli_name: name for name, spec in SPECS.items() if spec.prediction_file}


def add_task(tasks, cli_name: str):
    """`kbz finetune|predict CLI_NAME` (or an alias of it), described by the task's spec."""
    spec = spec_for_cli(cli_name)
    parser = tasks.add_parser(
        cli_name, aliases=list(spec.aliases), help=spec.summary, description=spec.summary
    )
    parser.set_defaults(task=cli_name)  # the command's name, whichever alias was typed
    return parser, spec


def _add(parser, option: TaskOption, default, shown: str) -> None:
    if option.type is bool:
        parser.add_argument(option.flag, action="store_true", help=f"{option.help} (default: off)")
        return
    parser.add_argument(
        option.flag,
        type=option.type,
        default=default,
        choices=option.choices or None,
        help=f"{option.help} (default: {shown})",
    )


def add_finetune_task_flags(parser, task: str) -> None:
    """The flags only `kbz finetune <task>` has: its spec's run settings."""
    for option in spec_for_cli(task).options:
        if option.run_setting:
            _add(parser, option, option.default, option.shown(option.default))


def add_predict_task_flags(parser, task: str) -> None:
    """The flags only `kbz predict <task>` has; a run setting left out takes the run's own."""
    for option in spec_for_cli(task).options:
        if option.predict and option.run_setting:
            _add(parser, option, None, "the run's")
        elif option.predict:
            _add(parser, option, option.default, option.shown(option.default))


def finetune_options(args) -> dict:
    """The task options `run_finetune` takes from `kbz finetune <task>`'s flags."""
    return {o.name: getattr(args, o.name) for o in spec_for_cli(args.task).options if o.run_setting}


def predict_options(args) -> dict:
    """The task options `run_predict` takes from `kbz predict <task>`'s flags."""
    return {o.name: getattr(args, o.name) for o in spec_for_cli(args.task).options if o.predict}
