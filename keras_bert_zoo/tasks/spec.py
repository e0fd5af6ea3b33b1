"""What a fine-tuning task is, as data importable without Keras: `TaskSpec`, its flags
(`TaskOption`) and its Hugging Face head (`HuggingFaceHead`).

Each task declares its spec in its own folder (`keras_bert_zoo/tasks/<task>/spec.py`) and
`keras_bert_zoo.tasks.registry` holds them. The CLI's `--help`, the jobs' checks, export,
presets, runtimes and the Hugging Face converters read a task's spec through the registry and
never write a task name: what differs between tasks is a field here (`vectors`: the model
outputs vectors, not labels; `sequence_outputs`; `label_count`; `serving`; ...).

Why the spec is apart from the task's behaviour and model (`tasks/<task>/task.py`, Keras):
the spec is read by layers below the task models (`export`, `checkpoints`, `presets`) and by
`kbz --help`, which must not load Keras or TensorFlow. Model Garden's `official/nlp/tasks`
holds config and behaviour in one class because it has no light command line to serve;
transformers' `pipelines.SUPPORTED_TASKS` is the data half.
"""

import dataclasses


def columns(text: str) -> tuple:
    """`--text-columns question,sentence` -> ("question", "sentence")."""
    return tuple(text.split(","))


@dataclasses.dataclass(frozen=True)
class TaskOption:
    """One setting of a task's behaviour (`keras_bert_zoo.finetuning`), and its flag.

    `run_setting`: a `kbz finetune TASK` flag, recorded with the run (`run.json`), which
    `kbz predict TASK` reuses unless given again (`predict`). Otherwise a `kbz predict` flag
    only, with its own default. `type` is argparse's (`bool`: a switch, off by default);
    `choices`, if any, the values the flag takes.
    """

    name: str
    type: object
    default: object
    help: str
    run_setting: bool = True
    predict: bool = True
    choices: tuple = ()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def shown(self, value) -> str:
        """The default as typed on the command line."""
        if isinstance(value, tuple):
            return ",".join(value)
        return f"{value:g}" if isinstance(value, float) else str(value)


@dataclasses.dataclass(frozen=True)
class HuggingFaceHead:
    """A task head in transformers' form: the model class, its weights as a name table
    `(our path, [transformers names], rule)`, whether it uses the BERT pooler and the
    settings that define its structure (the task's `label_count` counts its `num_labels`).

    Heads that share an architecture are told apart by `markers`: config.json keys of which
    any, with `num_labels` outputs, marks a checkpoint of this head (sentence-transformers'
    CrossEncoder is a `BertForSequenceClassification` with one label and its own keys); the
    head without markers is the architecture's default. `fields` are written to config.json.
    """

    architecture: str
    rows: tuple
    pooler: bool
    settings: frozenset
    problem_type: bool = False  # transformers' `problem_type` (classification vs regression)
    num_labels: int = 2  # the outputs of a head whose settings do not count them
    markers: tuple = ()
    fields: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """Everything about a fine-tuning task that needs no Keras (see the module docstring)."""

    name: str  # the model's task (`kbz.tasks.TASKS`, `BertModel.task`, presets' `task`)
    cli_name: str  # `kbz finetune CLI_NAME`, `kbz predict CLI_NAME`
    summary: str
    train_file: str  # what `--train` holds, in `--help`
    file_kind: str  # the format's short name, in errors ("a CoNLL file")
    defaults: dict  # the schedule flags' defaults, measured (benchmarks/RESULTS.md)
    options: tuple = ()  # `TaskOption`s
    prediction_file: str | None = None  # None: no `kbz predict TASK` (the embedder)
    serving_outputs: tuple = ()  # `serving_default`'s output names (export)
    pair_input: bool = False  # `serving_default` takes two strings, named `pair_names`
    pair_names: tuple = ("text", "text_pair")
    pooler: bool = True  # the model uses the encoder's pooled output
    huggingface: HuggingFaceHead | None = None
    aliases: tuple = ()
    # What the task's model outputs, for the code that runs any task:
    vectors: bool = False  # one vector per text, not labels (retrieval, pooling from presets)
    sequence_outputs: bool = False  # outputs per token (tags, span logits), not per input
    label_count: str | None = None  # the `task_config` key counting its named labels
    serving: str = "classes"  # the kind of `serving_default` (`export.serving.SERVING`)
    streams: bool = False  # `kbz predict` streams its files a window at a time (`--window`)
    packs_predictions: bool = False  # `kbz predict` takes --packing (`training.packed_prediction`)

    def option(self, name: str) -> TaskOption:
        return next(option for option in self.options if option.name == name)

    def default(self, name: str):
        """A `TaskOption`'s default: the behaviour class's field default too."""
        return self.option(name).default

    @property
    def run_settings(self) -> tuple:
        """Names of the options a fine-tuning run records and `kbz predict` reuses."""
        return tuple(option.name for option in self.options if option.run_setting)


# Schedule defaults: measured to learn on the bundled samples from the MiniLM-L6 preset
# (benchmarks/RESULTS.md, "Per-task defaults"); small models on small data need more than
# google-research/bert's BERT-base GLUE rate (2e-5..5e-5).
def schedule(learning_rate, batch_size, epochs, sequence_length, warmup_fraction=0.1) -> dict:
    """A spec's `defaults`: the schedule flags' values for the task."""
    return dict(
        learning_rate=learning_rate,
        batch_size=batch_size,
        epochs=epochs,
        warmup_fraction=warmup_fraction,
        sequence_length=sequence_length,
    )


def classifier_rows(prefix: str, names: str) -> tuple:
    """A dense head's name table rows: our `prefix` layer and transformers' `names`."""
    return (
        (f"{prefix}/kernel", [f"{names}.weight"], "transpose"),
        (f"{prefix}/bias", [f"{names}.bias"], None),
    )
