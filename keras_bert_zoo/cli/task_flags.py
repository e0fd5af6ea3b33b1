"""The subcommands of `kbz finetune TASK` and `kbz predict TASK`: each task's own flags.

`kbz finetune tag --help` lists the tagger's flags with the tagger's defaults, and no other
task's (argparse only; no heavy import).
"""

# google-research/bert's convention; the README's "--doc-stride" derives the conversion.
DOC_STRIDE = (
    "tokens between the starts of consecutive context windows (run_squad.py's doc_stride; "
    "Hugging Face run_qa.py's --doc_stride S is their overlap: the same windows take "
    "L - 3 - q - S for sequence length L and a q-token question)"
)
# What each task is, and the file it trains on (`kbz finetune TASK --train`).
SUMMARIES = {
    "classify": "sentence (or sentence-pair) classification or regression",
    "tag": "token tagging (named entities), labels on each word's first sub-word",
    "qa": "extractive question answering, SQuAD v1.1 / v2.0",
    "embed": "sentence embeddings, contrastive with in-batch negatives",
    "rerank": "cross-encoder reranking: one relevance score per (query, passage) pair",
}
TRAIN_FILES = {
    "classify": "GLUE-style TSV with a header: the text column(s) and the label column",
    "tag": "CoNLL: a word and its tag per line, a blank line between sentences",
    "qa": "SQuAD JSON (v1.1, or v2.0 with is_impossible)",
    "embed": "TSV of pairs with a header: query<TAB>positive (or anchor/sentence1 ...)",
    "rerank": "TSV with the header query<TAB>passage<TAB>label, label 1 (relevant) or 0, "
    "any number of rows per query",
}
TOP_K = "the k of the recall_at_k metric (MRR is at 10, recall also at 1)"


def add_finetune_task_flags(parser, task: str) -> None:
    """The flags only `kbz finetune <task>` has."""
    if task == "classify":
        parser.add_argument(
            "--text-columns",
            default="sentence",
            help="comma-separated text column(s), e.g. question,sentence (default: sentence)",
        )
        parser.add_argument("--label-column", default="label", help="label column (default: label)")
        parser.add_argument(
            "--regression", action="store_true", help="float labels: one score, MSE loss"
        )
    elif task == "qa":
        parser.add_argument(
            "--doc-stride", type=int, default=128, help=f"{DOC_STRIDE} (default: 128)"
        )
        parser.add_argument(
            "--max-query-length",
            type=int,
            default=64,
            help="question tokens kept (default: 64)",
        )
    elif task == "rerank":
        parser.add_argument(
            "--negatives-from",
            default=None,
            help="an embedder (preset name or directory, or a kbz finetune embed run) that "
            "mines hard negatives for each training query from the training file's own "
            "passages, labelled 0 (default: none, the file's pairs only)",
        )
        parser.add_argument(
            "--num-negatives",
            type=int,
            default=3,
            help="hard negatives mined per query with --negatives-from (default: 3)",
        )
        parser.add_argument("--top-k", type=int, default=10, help=f"{TOP_K} (default: 10)")
    elif task == "embed":
        parser.add_argument(
            "--scale",
            type=float,
            default=20.0,
            help="cosine scale of the in-batch loss (default: 20, sentence-transformers')",
        )


def add_predict_task_flags(parser, task: str) -> None:
    """The flags only `kbz predict <task>` has; left out, they take the run's own."""
    if task == "classify":
        parser.add_argument(
            "--text-columns",
            default=None,
            help="comma-separated text column(s) (default: the run's)",
        )
        parser.add_argument(
            "--label-column", default=None, help="label column, if any (default: the run's)"
        )
    elif task == "qa":
        parser.add_argument(
            "--doc-stride", type=int, default=None, help=f"{DOC_STRIDE} (default: the run's)"
        )
        parser.add_argument(
            "--max-query-length",
            type=int,
            default=None,
            help="question tokens kept (default: the run's)",
        )
        parser.add_argument(
            "--n-best-size", type=int, default=20, help="candidates kept per question (default: 20)"
        )
        parser.add_argument(
            "--max-answer-length",
            type=int,
            default=30,
            help="longest answer, in tokens (default: 30)",
        )
    elif task == "rerank":
        parser.add_argument("--top-k", type=int, default=None, help=f"{TOP_K} (default: the run's)")


def predict_options(args) -> dict:
    """The task options `run_predict` takes from `kbz predict <task>`'s flags."""
    if args.task == "classify":
        columns = tuple(args.text_columns.split(",")) if args.text_columns else None
        return {"text_columns": columns, "label_column": args.label_column}
    if args.task == "qa":
        names = ("n_best_size", "max_answer_length", "doc_stride", "max_query_length")
        return {name: getattr(args, name) for name in names}
    if args.task == "rerank":
        return {"top_k": args.top_k}
    return {}
