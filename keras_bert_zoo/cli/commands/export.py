"""`kbz export`: a preset directory or a `.keras` model to a SavedModel or an ONNX directory.

The implementation (Keras, TensorFlow, tf2onnx) is imported when the command runs.
"""

from pathlib import Path

from keras_bert_zoo.cli.common import SAVED_MODEL_LOADING
from keras_bert_zoo.tasks import registry


def add_parser(subcommands) -> None:
    export = subcommands.add_parser("export", help="SavedModel (TF Serving) or ONNX")
    export.add_argument(
        "source", help="preset directory (task and vocabulary from it) or a .keras model"
    )
    export.add_argument("destination", help="SavedModel version dir (exports/m/1) or ONNX dir")
    export.add_argument(
        "--preset",
        default=None,
        help="preset whose vocabulary the string signature uses (needed for a .keras model)",
    )
    export.add_argument(
        "--ids-only", action="store_true", help="only the serve_token_ids signature"
    )
    export.add_argument("--overwrite", action="store_true")
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
        choices=("encoder", registry.vectors_task()),
        default=None,
        help="export a preset directory as this task instead of its own (default: the "
        "preset's task; embedder for a converted sentence-transformers preset)",
    )
    export.set_defaults(run=run)


def export_task(config, requested: str | None) -> str:
    """The task a preset directory is exported as: `--task`, else the preset's own task, or
    `embedder` for an encoder preset that records sentence-transformers pooling (converted
    from a sentence-transformers directory: what its users want is the sentence vector)."""
    if requested is None:
        vectors = config.task == "encoder" and config.embedder
        return registry.vectors_task() if vectors else config.task
    if requested not in (config.task, "encoder", registry.vectors_task()):  # argparse's choices
        raise ValueError(f"--task {requested} does not fit a {config.task} preset.")
    return requested


def export_length(preset, args) -> int:
    """`--sequence-length`, else the length the preset records (the run's), else the default
    (`presets.sources.run_sequence_length`)."""
    from keras_bert_zoo.presets.sources import run_sequence_length  # when run: --help stays instant

    return run_sequence_length(preset, args.sequence_length)


def _model(args):
    from keras_bert_zoo.presets import from_preset  # when run: --help stays instant
    from keras_bert_zoo.presets.registry import load_preset_config  # when run: --help stays instant
    from keras_bert_zoo.saving.models import load_model  # when run: --help stays instant

    source = Path(args.source)
    if source.is_dir():
        config = load_preset_config(source)
        task = export_task(config, args.task)
        return from_preset(source, task=task), args.preset or source
    if source.suffix == ".keras" and source.is_file():
        return load_model(source, compile=False), args.preset
    raise ValueError(f"{source} is neither a preset directory nor a .keras file.")


def run(args) -> int:
    from keras_bert_zoo.saving.ownership import check_apart  # when run, as the job below
    from keras_bert_zoo.tokenization import BertPreprocessor  # when run: --help stays instant
    from keras_bert_zoo.training.progress import interactive, logged_while  # imports Keras

    check_apart({"DESTINATION": args.destination}, {"SOURCE": args.source, "--preset": args.preset})

    onnx = args.format == "onnx"
    if onnx:  # a missing extra is named before any work, as one line (kbz prints ValueError)
        from keras_bert_zoo.export import onnx as onnx_export  # only for ONNX: tf2onnx

        try:
            onnx_export.require_onnx()
        except ImportError as error:
            raise ValueError(str(error)) from error
    else:
        from keras_bert_zoo.export import saved_model_missing  # imports Keras

        if saved_model_missing():
            raise ValueError(saved_model_missing())
    keras_file = Path(args.source).suffix == ".keras"
    if args.task is not None and keras_file:
        raise ValueError(
            f"--task applies to a preset directory; {args.source} is a .keras model, which "
            "exports as the task it was built for. Drop --task, or export its preset."
        )
    if not onnx and args.preset is None and not args.ids_only and keras_file:
        raise ValueError(
            "A .keras model holds no vocabulary: pass --preset (the preset it was "
            "fine-tuned from) for the raw-string signature, or --ids-only."
        )
    model, tokenizer_preset = _model(args)
    preprocessor = None
    if tokenizer_preset is not None:
        preprocessor = BertPreprocessor.from_preset(
            tokenizer_preset, sequence_length=export_length(tokenizer_preset, args)
        )
    details = f", {args.quantize}" if args.quantize else ""
    if preprocessor is not None:  # which length the strings are cut to, said once
        details += f", {preprocessor.sequence_length} tokens"
    if onnx:
        with logged_while("export", enabled=not interactive()):
            path = onnx_export.export_onnx(
                model,
                args.destination,
                preprocessor=preprocessor,
                quantize=args.quantize,
                overwrite=args.overwrite,
            )
        vocabulary = "vocab.txt, " if preprocessor is not None else ""
        print(
            f"Exported {path} ({model.task}, ONNX{details}): model.onnx (token_ids, "
            f"segment_ids, padding_mask in), {vocabulary}export.json. Run it with "
            f"onnxruntime.InferenceSession('{path / 'model.onnx'}')."
        )
        return 0
    from keras_bert_zoo.export import saved_model  # when run: --help stays instant

    if args.quantize:
        from keras_bert_zoo.export.quantization import quantize_keras  # only for int8

        quantize_keras(model, args.quantize)
    with logged_while("export", enabled=not interactive()):
        path = saved_model.export_saved_model(
            model,
            args.destination,
            preprocessor=preprocessor,
            strings=not args.ids_only,
            overwrite=args.overwrite,
        )
    if args.ids_only:
        print(f"Exported {path} ({model.task}{details}): signature serve_token_ids.")
    else:
        print(
            f"Exported {path} ({model.task}{details}): signatures serving_default (strings) "
            f"and serve_token_ids. {SAVED_MODEL_LOADING}."
        )
    if args.quantize:
        print(
            "Note: a Keras int8 SavedModel is smaller but ran several times slower than the "
            "float one on CPU (benchmarks/RESULTS.md); for CPU speed use --format onnx "
            "--quantize int8."
        )
    return 0
