"""The flags of `kbz export` beyond the SavedModel's (argparse only; no heavy import)."""

from keras_bert_zoo.cli import export_commands


def add_export_flags(export) -> None:
    """`--sequence-length`, `--format`, `--quantize` and `--task`, and the command that runs
    `kbz export`."""
    export.add_argument(
        "--sequence-length",
        type=int,
        default=None,
        help="tokens per text of the string signature (default: the length the preset "
        "records: a kbz finetune run's --sequence-length, a sentence-transformers model's "
        "max_seq_length; else 128)",
    )
    export.add_argument(
        "--format",
        choices=("savedmodel", "onnx"),
        default="savedmodel",
        help="savedmodel (TF Serving, raw strings in; the default) or onnx (ONNX Runtime, "
        "token ids in; needs pip install 'keras-bert-zoo[onnx]')",
    )
    export.add_argument(
        "--quantize",
        choices=("int8",),
        default=None,
        help="int8 weights: ONNX Runtime's dynamic quantization for --format onnx, Keras' "
        "model.quantize('int8') for a SavedModel",
    )
    export.add_argument(
        "--task",
        choices=("encoder", "embedder"),
        default=None,
        help="export a preset directory as this task instead of its own (default: the "
        "preset's task; embedder for a converted sentence-transformers preset)",
    )
    export.set_defaults(run=export_commands.run_export)
