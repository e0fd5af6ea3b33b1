"""`kbz embed`: one sentence vector per line of a text file (`jobs.embed`). Training an
embedder is `kbz finetune embed`, as every task's training."""

import argparse

from keras_bert_zoo.cli.common import add_stream_arguments
from keras_bert_zoo.cli.compile_flags import add_compile_cache_argument
from keras_bert_zoo.cli.runtime_flags import add_runtime_arguments


def add_parser(subcommands) -> None:
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
    embed.add_argument(
        "--packing",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="several texts per row of the longest one's length, attention kept within each, "
        "each pooled over its own tokens: the same vectors with almost no padding (default: "
        "where buckets would compute 1.2x the packed positions, with the keras runtime; "
        "--no-packing: length buckets)",
    )
    add_stream_arguments(embed)
    add_compile_cache_argument(embed)
    add_runtime_arguments(embed)
    embed.set_defaults(run=run)


def run(args) -> int:
    from keras_bert_zoo.jobs import embed  # when run: --help stays instant

    result = embed.run_embed(
        args.model,
        args.input,
        args.output,
        batch_size=args.batch_size,
        sequence_length=args.sequence_length,
        runtime=args.runtime,
        precision=args.precision,
        window=args.window,
        restart=args.restart,
        packing=args.packing,
    )
    rows, width = result["shape"]
    print(
        f"Wrote {result['file']}: {rows} vectors of {width} floats ({result['pooling']} pooling"
        f"{', L2-normalised' if result['normalize'] else ''}), one per input line "
        f"({result['runtime']} {result['precision']})."
    )
    return 0
