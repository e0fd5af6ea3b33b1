"""Run settings as frozen dataclasses: `FinetuneConfig` (every task) and `PretrainConfig`.

Each field carries its help and says whether it defines the run or only how this attempt
executes (`setting(..., identity=False)`: a resume may change it), as transformers'
`TrainingArguments` does with `HfArgumentParser`. The command line's flags are generated from
the fields (`keras_bert_zoo.cli.config_flags`), so a flag's name, type, default and help are
written once; each job takes one config. `settings()` is what a run records in `run.json`
(and `kbz predict` reads back), `identity()` the part of it that must match for a re-run to
resume. No Keras here: `kbz --help` imports this module.
"""

import dataclasses

from keras_bert_zoo.choices import PRECISIONS, STRATEGIES, finetune_settings
from keras_bert_zoo.tasks import registry

# Groups of fields that several configs (and commands' flags) share.
SCHEDULE = ("epochs", "batch_size", "sequence_length", "learning_rate", "warmup_fraction")
CHECKPOINTS = ("checkpoint_every", "keep_checkpoints", "checkpoint_every_minutes")
LORA = ("lora_rank", "lora_alpha", "lora_targets")


def check_flags(**flags) -> None:
    """Positive integers (None allowed for optional ones), named by their command-line flag."""
    for name, value in flags.items():
        if value is None and name in ("checkpoint_every", "gradient_accumulation_steps"):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                f"--{name.replace('_', '-')} must be a positive integer. Received: {value!r}."
            )


def check_rates(learning_rate, warmup_fraction, weight_decay=0.0) -> None:
    if not learning_rate > 0:
        raise ValueError(f"--learning-rate must be positive. Received: {learning_rate!r}.")
    if not 0 <= warmup_fraction < 1:
        raise ValueError(f"--warmup-fraction must be in [0, 1). Received: {warmup_fraction!r}.")
    if not 0 <= weight_decay < float("inf"):
        raise ValueError(f"--weight-decay must be 0 (off) or positive. Received: {weight_decay!r}.")


def setting(default=dataclasses.MISSING, help="", *, identity=True, record=True, **flag):
    """A config field: `help` for its flag, `identity=False` for how a run executes (not what
    it computes), `record=False` for what `run.json` leaves out (the output directory);
    `flag`: argparse's `choices`, `shown` (the default as `--help` says it), or `flag=False`
    for a field that is no command-line flag."""
    metadata = dict(help=help, identity=identity, record=record, **flag)
    if isinstance(default, dict):  # a mutable default: each config its own
        return dataclasses.field(default_factory=dict, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


class RunConfig:
    """What the run configs share: the settings a run records and those that define it."""

    def settings(self) -> dict:
        """The recorded fields, JSON values (tuples as lists), as `run.json` holds them."""
        values = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata["record"]
        }
        return _json(values)

    def identity(self) -> dict:
        """The recorded settings that define the run: another value is another run."""
        execution = {f.name for f in dataclasses.fields(self) if not f.metadata["identity"]}
        return {k: v for k, v in self.settings().items() if k not in execution}

    def defaults(self) -> dict:
        """The recorded fields' fixed defaults, as `settings()` writes them (a run recorded
        before a field existed ran with its default)."""
        fields = dataclasses.fields(self)
        return _json(
            {
                f.name: f.default
                for f in fields
                if f.metadata["record"] and f.default is not dataclasses.MISSING
            }
        )


def _json(value):
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)  # a path


_SEED = (
    "seed of the new head, dropout and the batch order: the same seed and data give the same run"
)
_STRATEGY = (
    "none (one device); on TensorFlow, a tf.distribute strategy: mirrored (every local GPU), "
    "multi-worker (TF_CONFIG's workers), tpu (with --tpu); on JAX, data-parallel: every "
    "device of every process, the processes joined as keras.distribution.initialize reads "
    "KERAS_DISTRIBUTION_JOB_ADDRESSES (process 0's host:port), "
    "KERAS_DISTRIBUTION_NUM_PROCESSES and KERAS_DISTRIBUTION_PROCESS_ID; process 0 writes "
    "--output, which every process must see"
)
_PRECISION = (
    "Keras dtype policy: float32, mixed_bfloat16 (TPU, recent GPUs), mixed_float16 (GPUs; "
    "loss scaling on)"
)
_JIT = "compile training steps with XLA (--no-jit-compile runs them uncompiled, e.g. to debug)"
_JIT_SHOWN = "on, off with KERAS_BACKEND=torch"
_OVERWRITE = (
    "start afresh in --output, deleting a previous run there (without it, only the same "
    "command resumes an unfinished run; a finished one returns its metrics)"
)


@dataclasses.dataclass(frozen=True)
class FinetuneConfig(RunConfig):
    """A `kbz finetune TASK` run, any task (`jobs.finetune.finetune`). The schedule fields
    left None take the task's defaults (`tasks.registry`; a LoRA run's learning rate
    `choices.LORA_LEARNING_RATE`) when the config is made; the task's own options (the
    embedder's `scale`, ...) are `task_options`."""

    task: str = setting(help="the task (`keras_bert_zoo.tasks.registry`)", flag=False)
    preset: str = setting(help="preset name or directory")
    train: str = setting(help="the training file")
    validation: str = setting(help="a file of the same format")
    output: str = setting(help="output directory", record=False)
    epochs: int | None = setting(None, "passes over the training data")
    batch_size: int | None = setting(None, "training examples per step")
    sequence_length: int | None = setting(None, "tokens per sequence (QA: per window)")
    learning_rate: float | None = setting(
        None, "peak learning rate of the warmup + linear-decay schedule"
    )
    warmup_fraction: float | None = setting(
        None, "share of the steps that warm the learning rate up"
    )
    weight_decay: float = setting(
        0.01,
        "AdamW's decoupled weight decay, not applied to LayerNorm weights and biases (BERT's "
        "0.01; transformers' Trainer defaults to 0.0)",
    )
    strategy: str = setting("none", _STRATEGY, identity=False, choices=STRATEGIES)
    tpu: str | None = setting(
        None, "TPU name or address (--strategy tpu)", identity=False, shown="none, local"
    )
    jit_compile: bool = setting(True, _JIT, identity=False, shown=_JIT_SHOWN)
    mixed_precision: str = setting("float32", _PRECISION, choices=PRECISIONS)
    seed: int = setting(0, _SEED)
    checkpoint_every: int | None = setting(
        None,
        "save a checkpoint every N steps; re-running the same command resumes from the newest "
        "intact one",
        shown="every epoch",
    )
    keep_checkpoints: int = setting(
        3, "checkpoints kept: a damaged newest one falls back to the one before", identity=False
    )
    checkpoint_every_minutes: float | None = setting(
        None,
        "also save a checkpoint once M minutes have passed since the last one (at the next "
        "step), in addition to --checkpoint-every",
        identity=False,
        shown="off",
    )
    export: bool = setting(True, "write the SavedModel export/1", identity=False)
    keep: str = setting(
        "best",
        "weights written out: the best validation epoch's (embed: by MRR) or the last ones",
        choices=("best", "last"),
    )
    bucketing: bool = setting(
        True,
        "batches of similar length (embed: of distinct texts) trimmed to a few lengths chosen "
        "from the training set (multiples of 8; validation: 16, 32, 64, ...); --no-bucketing "
        "pads every batch to --sequence-length",
    )
    packing: bool | None = setting(
        None,
        "train on rows of up to --sequence-length tokens holding several examples each, attention "
        "kept within each example, so padding costs almost nothing (the classifier, the tagger, "
        "the embedder; the reranker with --packing); --no-packing: length buckets",
        shown="on for classify, tag and embed where --bucketing is on",
    )
    overwrite: bool = setting(False, _OVERWRITE, record=False)
    verbose: object = setting("auto", "Keras' progress output", identity=False, flag=False)
    lora_rank: int | None = setting(
        None,
        "train rank-R LoRA adapters on the encoder's projections (and the task head) instead "
        "of every weight; outputs hold the merged weights, adapter.safetensors the adapters "
        "alone",
        shown="off, every weight trains",
    )
    lora_alpha: float | None = setting(
        None,
        "LoRA scale numerator: updates are scaled by alpha / rank",
        shown="the rank, a scale of 1, as Keras and PEFT",
    )
    lora_targets: str = setting(
        "all",
        "projections adapted: all (query/key/value, attention output, feed-forward) or "
        "attention only",
        choices=("all", "attention"),
    )
    task_options: dict = setting(
        {}, "the task's own options (its spec's `TaskOption`s)", flag=False
    )

    def __post_init__(self):
        if registry.find(self.task) is None:  # the job refuses the tasks it does not run
            raise ValueError(
                f"Unknown fine-tuning task {self.task!r}. Expected one of {registry.names()}."
            )
        _resolve_schedule(self, self.task)
        # Here, so the command line answers before it imports Keras (`cli.main`).
        check_flags(
            epochs=self.epochs,
            batch_size=self.batch_size,
            checkpoint_every=self.checkpoint_every,
            keep_checkpoints=self.keep_checkpoints,
        )
        check_rates(self.learning_rate, self.warmup_fraction, self.weight_decay)

    def settings(self) -> dict:
        settings = super().settings()
        options = settings.pop("task_options")  # recorded flat, as `kbz predict` reads them
        return {**settings, **options}


def _resolve_schedule(config, task: str) -> None:
    """Fills the schedule fields left None with `task`'s defaults (frozen: set once, here)."""
    given = {name: getattr(config, name) for name in SCHEDULE}
    resolved = finetune_settings(task, lora=bool(config.lora_rank), **given)
    for name, value in resolved.items():
        object.__setattr__(config, name, value)


def like(config, name: str, default=dataclasses.MISSING, **metadata):
    """A field of another config, the same help and role (`default`, `metadata` changed)."""
    field = config.__dataclass_fields__[name]
    default = field.default if default is dataclasses.MISSING else default
    return setting(default, **{**field.metadata, **metadata})


@dataclasses.dataclass(frozen=True)
class PretrainConfig(RunConfig):
    """A `kbz pretrain` run (`jobs.pretrain`): MLM + NSP from TFRecords or raw text."""

    preset: str = like(FinetuneConfig, "preset")
    output: str = like(FinetuneConfig, "output")
    input_file: str | None = setting(
        None, "TFRecord files, comma-separated or globs", shown="none; this or --text-file"
    )
    text_file: str | None = setting(
        None, "text files, masked on the fly each epoch", shown="none; this or --input-file"
    )
    from_scratch: bool = setting(False, "the preset's architecture with fresh weights")
    num_train_steps: int = setting(
        1000, "batches to train on (optimizer updates x accumulation steps)"
    )
    batch_size: int = like(FinetuneConfig, "batch_size", 32)
    max_seq_length: int = setting(128, "tokens per sequence")
    max_predictions_per_seq: int = setting(
        20, "masked positions per sequence, google-research/bert's flag"
    )
    learning_rate: float = like(FinetuneConfig, "learning_rate", 1e-4)
    warmup_fraction: float = like(FinetuneConfig, "warmup_fraction", 0.1)
    optimizer: str = setting(
        "adamw", "adamw, or lamb (large batches, as in the LAMB paper)", choices=("adamw", "lamb")
    )
    gradient_accumulation_steps: int | None = setting(
        None, "batches whose gradients add up to one optimizer step", shown="1"
    )
    strategy: str = like(FinetuneConfig, "strategy")
    tpu: str | None = like(FinetuneConfig, "tpu")
    jit_compile: bool = like(FinetuneConfig, "jit_compile")
    mixed_precision: str = like(FinetuneConfig, "mixed_precision")
    seed: int = setting(0, "seed of fresh weights, dropout, masking and the data order")
    checkpoint_every: int | None = like(FinetuneConfig, "checkpoint_every", shown="1000 steps")
    keep_checkpoints: int = like(FinetuneConfig, "keep_checkpoints")
    checkpoint_every_minutes: float | None = like(FinetuneConfig, "checkpoint_every_minutes")
    overwrite: bool = like(FinetuneConfig, "overwrite")
    verbose: object = like(FinetuneConfig, "verbose")

    def __post_init__(self):
        check_flags(
            num_train_steps=self.num_train_steps,
            batch_size=self.batch_size,
            max_predictions_per_seq=self.max_predictions_per_seq,
            checkpoint_every=self.checkpoint_every,
            keep_checkpoints=self.keep_checkpoints,
            gradient_accumulation_steps=self.gradient_accumulation_steps,
        )
        check_rates(self.learning_rate, self.warmup_fraction)
