"""`kbz create-pretraining-data`: text files to MLM + NSP TFRecords, with google-research/bert's
snake_case flags; each also answers to the kebab-case spelling the other commands use
(`--input-file`)."""

import argparse
from pathlib import Path


def _bool_flag(value: str) -> bool:
    lowered = str(value).strip().lower()
    if lowered in ("1", "true", "t", "yes", "y"):
        return True
    if lowered in ("0", "false", "f", "no", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def add_create_pretraining_data_arguments(parser: argparse.ArgumentParser) -> None:
    """google-research/bert's flags (`--do_lower_case=false`, `--nodo_lower_case` too); each
    also answers to the kebab-case spelling the other commands use (`--input-file`)."""

    def add(flag, *args, **kwargs):
        parser.add_argument(flag, flag.replace("_", "-"), *args, **kwargs)

    add("--input_file", required=True, help="text files: comma-separated paths or globs")
    add(
        "--output_file",
        required=True,
        help="TFRecord files: comma-separated paths, or PATH@N for N shards",
    )
    add("--vocab_file", help="WordPiece vocabulary (one token per line)")
    parser.add_argument("--preset", help="take the vocabulary and lowercasing from this preset")
    for flag, meaning in (
        ("do_lower_case", "lowercase the text (default: true, or the preset's)"),
        ("do_whole_word_mask", "mask whole words"),
    ):
        add(f"--{flag}", type=_bool_flag, nargs="?", const=True, default=None, help=meaning)
        parser.add_argument(f"--no{flag}", dest=flag, action="store_false", help=argparse.SUPPRESS)
    add("--max_seq_length", type=int, default=128, help="tokens per sequence (default 128)")
    add("--max_predictions_per_seq", type=int, default=20, help="masked LM slots (default 20)")
    add("--random_seed", type=int, default=12345, help="seed (default 12345)")
    add("--dupe_factor", type=int, default=10, help="passes with new masks (default 10)")
    add("--masked_lm_prob", type=float, default=0.15, help="masked LM probability (0.15)")
    add("--short_seq_prob", type=float, default=0.1, help="short sequence probability (0.1)")
    add(
        "--input_format",
        choices=["sentence_per_line", "raw"],
        default="sentence_per_line",
        help="sentence_per_line (original format) or raw running text (default: the former)",
    )
    add(
        "--num_workers",
        type=int,
        default=None,
        help="parallel input files (default: CPU count; worker processes from 2M tokens)",
    )


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser(
        "create-pretraining-data", help="text to MLM+NSP TFRecords (google-research/bert flags)"
    )
    add_create_pretraining_data_arguments(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    from keras_bert_zoo.data.pretraining import create  # when run: --help stays instant

    stats = create.create_pretraining_data(
        args.input_file,
        args.output_file,
        args.vocab_file,
        args.do_lower_case,
        args.max_seq_length,
        args.max_predictions_per_seq,
        args.random_seed,
        args.dupe_factor,
        args.masked_lm_prob,
        args.short_seq_prob,
        bool(args.do_whole_word_mask),
        args.preset,
        args.input_format,
        args.num_workers,
    )
    print(
        f"Wrote {stats['instances']} instances from {stats['documents']} documents to "
        f"{', '.join(str(Path(p)) for p in stats['output_files'])}"
    )
    return 0
