"""The registry of fine-tuning tasks: each task's spec (`keras_bert_zoo.tasks.spec`), by name.

Plain data, no Keras: `kbz --help`, export, presets, runtimes and the converters look a task
up here (`get(name)`, `for_cli(cli_name)`, `specs()`) and read what differs between tasks
from its spec's fields, so none of them writes a task name. Each task declares its spec in
its own folder (`tasks/<task>/spec.py`); the built-in ones are the imports below, the list
of tasks no other module repeats (`tasks.models` lists their Keras model classes).

>>> kbz.tasks.registry.get("tagger").cli_name
'tag'
"""

from keras_bert_zoo.tasks.classifier import spec as classifier
from keras_bert_zoo.tasks.embedder import spec as embedder
from keras_bert_zoo.tasks.question_answerer import spec as question_answerer
from keras_bert_zoo.tasks.reranker import spec as reranker
from keras_bert_zoo.tasks.spec import TaskSpec
from keras_bert_zoo.tasks.tagger import spec as tagger

SPECS: dict[str, TaskSpec] = {}  # name -> spec, in registration order (read it with `get`)


def register(spec: TaskSpec) -> TaskSpec:
    """Adds a task; its name and command-line names must be new. Returns `spec`."""
    if not isinstance(spec, TaskSpec):
        raise TypeError(f"`spec` must be a TaskSpec. Received: {type(spec).__name__}.")
    taken = {n for s in SPECS.values() for n in (s.cli_name, *s.aliases)}
    clashes = sorted(taken & {spec.cli_name, *spec.aliases})
    if spec.name in SPECS or clashes:
        raise ValueError(
            f"Task {spec.name!r} is registered already, or its command-line names {clashes} "
            "are another task's. Give the task names of its own."
        )
    SPECS[spec.name] = spec
    return spec


def get(name: str) -> TaskSpec:
    """The task called `name` (`BertModel.task`, presets' `task`)."""
    if name not in SPECS:
        raise ValueError(f"Unknown task {name!r}. Expected one of {names()}.")
    return SPECS[name]


def names() -> list[str]:
    """The registered tasks' names, sorted."""
    return sorted(SPECS)


def specs() -> list[TaskSpec]:
    """The registered tasks' specs, in registration order."""
    return list(SPECS.values())


def find(name) -> TaskSpec | None:
    """The spec of `name`, or None where `name` is no fine-tuning task ("encoder", ...)."""
    return SPECS.get(name)


def for_cli(name: str) -> TaskSpec:
    """The task whose `kbz` subcommand (or alias) is `name`."""
    for spec in SPECS.values():
        if name == spec.cli_name or name in spec.aliases:
            return spec
    known = sorted(spec.cli_name for spec in SPECS.values())
    raise ValueError(f"Unknown task {name!r}. Expected one of {known}.")


def predictable() -> list[TaskSpec]:
    """The tasks `kbz predict` runs (those that write a prediction file)."""
    return [spec for spec in SPECS.values() if spec.prediction_file]


def vectors_task() -> str:
    """The name of the task whose model outputs vectors (what `kbz embed` builds)."""
    return next(spec.name for spec in SPECS.values() if spec.vectors)


for _spec in (
    classifier.CLASSIFIER,
    tagger.TAGGER,
    question_answerer.QUESTION_ANSWERER,
    embedder.EMBEDDER,
    reranker.RERANKER,
):
    register(_spec)
