"""The registry of fine-tuning tasks: what each task is, as data, importable without Keras.

A task is two objects, registered once each:

- its spec (`TaskSpec`, here): names (the model's task name, its `kbz` subcommand and
  aliases), what it trains on and writes, its per-task defaults, its own flags declared as
  data (`TaskOption`: type, default, help), its serving outputs and its Hugging Face head.
  The CLI's `--help`, the jobs' checks, export, presets and the Hugging Face converters read
  it; none of them writes a task name.
- its behaviour (`keras_bert_zoo.finetuning.<task>`): reader, arrays, loss, predictions,
  metrics and prediction files, a class whose `spec` is the task's spec, listed in
  `finetuning.registry.FINETUNING_TASKS`.

Why two objects and not one module: the spec is read by modules below the behaviour
(`export`, `checkpoints`, `presets`: they must not import `finetuning`, which imports them)
and by `kbz --help`, which must not load Keras or TensorFlow; the behaviour needs Keras, the
readers and the metrics. Deferring the behaviour's imports inside one module would hide
package imports in functions, which the layering (`tests/test_architecture.py`) forbids for
good reason. So the spec is plain data at the bottom of the package and the behaviour a module
of `finetuning`; a test checks that the two registries name the same tasks.
Model Garden's `official/nlp/tasks` holds config and behaviour in one class because it has no
light command line to serve; transformers' `pipelines.SUPPORTED_TASKS` is the data half.
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
    `(our path, [transformers names], rule)`, whether it uses the BERT pooler, the settings
    that define its structure, and which setting counts its labels (`num_labels`).

    Heads that share an architecture are told apart by `markers`: config.json keys of which
    any, with `num_labels` outputs, marks a checkpoint of this head (sentence-transformers'
    CrossEncoder is a `BertForSequenceClassification` with one label and its own keys); the
    head without markers is the architecture's default. `fields` are written to config.json.
    """

    architecture: str
    rows: tuple
    pooler: bool
    settings: frozenset
    label_count: str | None = None
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
def _schedule(learning_rate, batch_size, epochs, sequence_length, warmup_fraction=0.1):
    return dict(
        learning_rate=learning_rate,
        batch_size=batch_size,
        epochs=epochs,
        warmup_fraction=warmup_fraction,
        sequence_length=sequence_length,
    )


# google-research/bert's convention; docs/command-line.md's "--doc-stride" derives the conversion.
_DOC_STRIDE = (
    "tokens between the starts of consecutive context windows (run_squad.py's doc_stride; "
    "Hugging Face run_qa.py's --doc_stride S is their overlap: the same windows take "
    "L - 3 - q - S for sequence length L and a q-token question)"
)


def _classifier_rows(prefix: str, names: str) -> tuple:
    return (
        (f"{prefix}/kernel", [f"{names}.weight"], "transpose"),
        (f"{prefix}/bias", [f"{names}.bias"], None),
    )


CLASSIFIER = TaskSpec(
    name="classifier",
    cli_name="classify",
    summary="sentence (or sentence-pair) classification or regression",
    train_file="GLUE-style TSV with a header: the text column(s) and the label column",
    file_kind="GLUE-style TSV",
    defaults=_schedule(learning_rate=5e-5, batch_size=32, epochs=3, sequence_length=128),
    options=(
        TaskOption(
            "text_columns",
            columns,
            ("sentence",),
            "comma-separated text column(s), e.g. question,sentence",
        ),
        TaskOption("label_column", str, "label", "label column"),
        TaskOption("regression", bool, False, "float labels: one score, MSE loss", predict=False),
    ),
    prediction_file="predictions.tsv",
    serving_outputs=("probabilities", "label", "label_name", "score"),
    huggingface=HuggingFaceHead(
        "BertForSequenceClassification",
        _classifier_rows("classifier_head", "classifier"),
        pooler=True,
        settings=frozenset({"num_classes", "dropout", "multi_label", "label_names"}),
        label_count="num_classes",
        problem_type=True,
    ),
)
TAGGER = TaskSpec(
    name="tagger",
    cli_name="tag",
    summary="token tagging (named entities), labels on each word's first sub-word",
    train_file="CoNLL: a word and its tag per line, a blank line between sentences",
    file_kind="CoNLL",
    defaults=_schedule(learning_rate=1e-4, batch_size=16, epochs=3, sequence_length=128),
    prediction_file="predictions.conll",
    serving_outputs=("tags", "words", "word_tags", "tag_names", "word_tag_names"),
    pooler=False,
    huggingface=HuggingFaceHead(
        "BertForTokenClassification",
        _classifier_rows("tagger_head", "classifier"),
        pooler=False,
        settings=frozenset({"num_tags", "dropout", "label_names"}),
        label_count="num_tags",
    ),
)
QUESTION_ANSWERER = TaskSpec(
    name="question_answerer",
    cli_name="qa",
    summary="extractive question answering, SQuAD v1.1 / v2.0",
    train_file="SQuAD JSON (v1.1, or v2.0 with is_impossible)",
    file_kind="SQuAD JSON",
    defaults=_schedule(learning_rate=1e-4, batch_size=16, epochs=2, sequence_length=384),
    options=(
        TaskOption("doc_stride", int, 128, _DOC_STRIDE),
        TaskOption("max_query_length", int, 64, "question tokens kept"),
        TaskOption("n_best_size", int, 20, "candidates kept per question", run_setting=False),
        TaskOption("max_answer_length", int, 30, "longest answer, in tokens", run_setting=False),
    ),
    prediction_file="predictions.json",
    serving_outputs=("start_logits", "end_logits", "answer_start", "answer_end", "answer_text"),
    pair_input=True,
    pooler=False,
    huggingface=HuggingFaceHead(
        "BertForQuestionAnswering",
        _classifier_rows("span_head", "qa_outputs"),
        pooler=False,
        settings=frozenset(),
    ),
)
# Contrastive, in-batch negatives (`finetuning.embedding`); validated by retrieval.
EMBEDDER = TaskSpec(
    name="embedder",
    cli_name="embed",
    summary="sentence embeddings, contrastive with in-batch negatives",
    train_file="TSV of pairs with a header: query<TAB>positive (or anchor/sentence1 ...)",
    file_kind="query<TAB>positive pairs TSV",
    defaults=_schedule(learning_rate=2e-5, batch_size=32, epochs=3, sequence_length=128),
    options=(
        TaskOption(
            "scale",
            float,
            20.0,
            "cosine scale of the in-batch loss (sentence-transformers')",
            predict=False,
        ),
    ),
    serving_outputs=("embeddings",),
    pooler=False,
)

# CrossEncoder's activation in config.json: the identity, since our score is the logit.
_IDENTITY = "torch.nn.modules.linear.Identity"
RERANKER = TaskSpec(
    name="reranker",
    cli_name="rerank",
    summary="cross-encoder reranking: one relevance score per (query, passage) pair",
    train_file="TSV with the header query<TAB>passage<TAB>label, label 1 (relevant) or 0, "
    "any number of rows per query",
    file_kind="query<TAB>passage<TAB>label TSV",
    # benchmarks/RESULTS.md, "Reranker"; 256: a query and a paragraph.
    defaults=_schedule(learning_rate=5e-5, batch_size=16, epochs=1, sequence_length=256),
    options=(
        TaskOption(
            "ranking_loss",
            str,
            "listwise",
            "listwise: softmax cross-entropy over query groups (each relevant pair and "
            "--num-negatives negatives of its query; --batch-size counts pairs, a multiple "
            "of the group size); pointwise: sigmoid cross-entropy of each pair's 0/1 label",
            predict=False,
            choices=("listwise", "pointwise"),
        ),
        TaskOption(
            "negatives_from",
            str,
            None,
            "an embedder (preset name or directory, or a kbz finetune embed run) that mines "
            "hard negatives for each training query from the training file's own passages, "
            "labelled 0",
            predict=False,
        ),
        TaskOption(
            "num_negatives",
            int,
            3,
            "hard negatives mined per query (--negatives-from), and with --ranking-loss listwise "
            "the negatives in each query group",
            predict=False,
        ),
        TaskOption(
            "top_k", int, 10, "the k of the recall_at_k metric (MRR is at 10, recall at 1 too)"
        ),
    ),
    prediction_file="predictions.tsv",
    serving_outputs=("score",),
    pair_input=True,
    pair_names=("query", "passage"),
    huggingface=HuggingFaceHead(
        "BertForSequenceClassification",
        _classifier_rows("reranker_head", "classifier"),
        pooler=True,
        settings=frozenset({"dropout"}),
        num_labels=1,
        markers=("sentence_transformers", "sbert_ce_default_activation_function"),
        fields={
            "sentence_transformers": {"activation_fn": _IDENTITY},
            "sbert_ce_default_activation_function": _IDENTITY,
        },
    ),
)

# The registry: one line per task.
SPECS = {spec.name: spec for spec in (CLASSIFIER, TAGGER, QUESTION_ANSWERER, EMBEDDER, RERANKER)}


def spec_for_cli(name: str) -> TaskSpec:
    """The task whose `kbz` subcommand (or alias) is `name`."""
    for spec in SPECS.values():
        if name == spec.cli_name or name in spec.aliases:
            return spec
    known = sorted(spec.cli_name for spec in SPECS.values())
    raise ValueError(f"Unknown task {name!r}. Expected one of {known}.")


def predictable() -> list:
    """The tasks `kbz predict` runs (those that write a prediction file)."""
    return [spec for spec in SPECS.values() if spec.prediction_file]
