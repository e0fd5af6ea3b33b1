"""`kbz predict TASK`: a fine-tuned model's predictions on a file, written as `kbz finetune`
writes its validation predictions, and the metrics where the file has labels."""

import argparse
import json

from keras_bert_zoo.cli.common import add_stream_arguments
from keras_bert_zoo.cli.compile_flags import add_compile_arguments
from keras_bert_zoo.cli.runtime_flags import add_runtime_arguments
from keras_bert_zoo.cli.task_flags import (
    PREDICT_TASKS,
    add_predict_task_flags,
    add_task,
    predict_options,
)


def add_parser(subcommands) -> None:
    predict = subcommands.add_parser(
        "predict",
        help="predictions of a fine-tuned model on a file (and its metrics)",
        description="`kbz predict TASK --help` lists the task's flags.",
    )
    tasks = predict.add_subparsers(dest="task", required=True, metavar="TASK")
    for task in sorted(PREDICT_TASKS):
        parser, spec = add_task(tasks, task)
        parser.add_argument(
            "--model", required=True, help="a kbz finetune output directory, or a fine-tuned preset"
        )
        parser.add_argument(
            "--input",
            required=True,
            help=f"{spec.train_file}; labels optional: metrics only where they are given",
        )
        parser.add_argument(
            "--output",
            required=True,
            help=f"the file to write, as `kbz finetune {task}` writes {spec.prediction_file}"
            " (QA also writes nbest_predictions.json beside it)",
        )
        parser.add_argument(
            "--overwrite",
            action="store_true",
            help="replace an existing side file beside --output (QA's nbest_predictions.json, "
            "the reranker's *.ranked.tsv; --output itself is always replaced; default: off, an "
            "existing side file stops the run before any work)",
        )
        parser.add_argument("--batch-size", type=int, default=64, help="(default: 64)")
        parser.add_argument(
            "--sequence-length",
            type=int,
            default=None,
            help="default: the run's own (the length its preset records; else 128)",
        )
        add_compile_arguments(
            parser,
            "run the model with XLA on GPU and TPU (default: on; on CPU one TensorFlow graph "
            "serves every length bucket)",
        )
        parser.add_argument(
            "--bucketing",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="batches of similar length trimmed to 16, 32, 64, ... tokens (default: on; "
            "--no-bucketing pads every batch to --sequence-length)",
        )
        if spec.packs_predictions:
            parser.add_argument(
                "--packing",
                action=argparse.BooleanOptionalAction,
                default=None,
                help="several examples per row of the longest one's length, attention kept "
                "within each: the same predictions with almost no padding (default: where "
                "buckets would compute 1.2x the packed positions, with --bucketing and the "
                "keras runtime; --no-packing: length buckets)",
            )
        add_runtime_arguments(parser)
        if spec.streams:  # streamed (the task's `stream_predictions`)
            add_stream_arguments(parser)
        add_predict_task_flags(parser, task)
        parser.set_defaults(run=run)


def run(args) -> int:
    from keras_bert_zoo.jobs import predict  # when run: --help stays instant

    options = predict_options(args)
    if hasattr(args, "window"):
        options.update(window=args.window, restart=args.restart)
    result = predict.run_predict(
        PREDICT_TASKS[args.task],
        args.model,
        args.input,
        args.output,
        batch_size=args.batch_size,
        sequence_length=args.sequence_length,
        jit_compile=args.jit_compile,
        bucketing=args.bucketing,
        runtime=args.runtime,
        precision=args.precision,
        overwrite=args.overwrite,
        packing=getattr(args, "packing", None),
        **options,
    )
    print(f"Wrote {', '.join(result['files'])}")
    if result["metrics"]:
        print(json.dumps(result["metrics"], indent=2, sort_keys=True))
    return 0
