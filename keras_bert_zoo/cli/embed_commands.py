"""What `kbz embed` does, and every line it prints (`kbz finetune embed` is
`commands.run_finetune`'s, as every task's).

As in `commands`, the implementation (Keras, TensorFlow) is imported when a command runs.
"""


def run_embed(args) -> int:
    from keras_bert_zoo.jobs import embed  # when run: --help stays instant

    result = embed.run_embed(
        args.model,
        args.input,
        args.output,
        batch_size=args.batch_size,
        sequence_length=args.sequence_length,
    )
    rows, width = result["shape"]
    print(
        f"Wrote {result['file']}: {rows} vectors of {width} floats ({result['pooling']} pooling"
        f"{', L2-normalised' if result['normalize'] else ''}), one per input line."
    )
    return 0
