"""The flags of `kbz embed` (argparse only; no heavy import). `kbz finetune embed` has
`kbz finetune`'s flags (`parser`), plus `--scale`."""

from keras_bert_zoo.cli import embed_commands


def add_embed(subcommands) -> None:
    """`kbz embed`: one vector per line of a text file."""
    embed = subcommands.add_parser("embed", help="sentence vectors of a text file, one per line")
    embed.add_argument("--model", required=True, help="preset or kbz finetune embed output")
    embed.add_argument("--input", required=True, help="UTF-8 text file, one text per line")
    embed.add_argument("--output", required=True, help=".npy file: float32 [lines, hidden]")
    embed.add_argument("--batch-size", type=int, default=64)
    embed.add_argument(
        "--sequence-length",
        type=int,
        help="tokens per text (default: the run's, else the preset's recorded length, such as "
        "a converted sentence-transformers model's max_seq_length, else 128)",
    )
    embed.set_defaults(run=embed_commands.run_embed)
