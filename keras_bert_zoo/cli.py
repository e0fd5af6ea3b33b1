"""The `kbz` command line: every flag and every line it prints.

The parser imports nothing heavy, so `kbz --help`, `kbz --version` and `kbz presets` answer
at once; each command imports what it runs (Keras, TensorFlow) when it starts. Unless
`--verbose` is given, TensorFlow's C++ start-up lines are filtered from the terminal
(`keras_bert_zoo.console`).
"""

import argparse
import importlib
import json
import logging
import sys
from pathlib import Path

from keras_bert_zoo import __version__, console
from keras_bert_zoo.choices import PRECISIONS, STRATEGIES

# Command-line task names -> the package's task names (`keras_bert_zoo.tasks.TASKS`).
FINETUNE_TASKS = {"classify": "classifier", "tag": "tagger", "qa": "question_answerer"}


def _load(module: str):
    """Imports a command's implementation when the command runs (keeps `--help` instant)."""
    return importlib.import_module(f"keras_bert_zoo.{module}")


def _presets(args) -> int:
    registry = _load("presets.registry")
    for name in registry.list_presets():
        config = registry.load_preset_config(name)
        arch = config.architecture
        print(
            f"{name:26s} L{arch['num_layers']:<3d} H{arch['hidden_dim']:<5d} "
            f"A{arch['num_heads']:<3d} params {config.num_parameters:>12,}  "
            f"{'uncased' if config.lowercase else 'cased'}"
        )
    return 0


def _convert(args) -> int:
    source = args.src
    if not Path(source).exists() and args.target_format == "huggingface":
        registry = _load("presets.registry")
        if source in registry.list_presets():  # a named preset: its downloaded weights
            source = registry.cache_dir() / source
            if not source.is_dir():
                raise ValueError(
                    f"Preset '{args.src}' has no weights on this machine yet; "
                    f"load it once with kbz.from_preset('{args.src}')."
                )
    destination = _load("checkpoints").convert(
        source,
        args.dst,
        source_format=args.source_format,
        target_format=args.target_format,
        overwrite=args.overwrite,
        allow_pickle=args.allow_pickle,
        vocab_file=args.vocab_file,
    )
    if args.target_format == "huggingface":
        print(
            f"Wrote Hugging Face BERT directory {destination}; load it with transformers' "
            f"from_pretrained('{destination}')."
        )
    else:
        print(
            f"Wrote preset directory {destination}; load it with kbz.from_preset('{destination}')."
        )
    return 0


def _finetune(args) -> int:
    options = {}
    if args.task == "classify":
        options = dict(
            text_columns=tuple(args.text_columns.split(",")),
            label_column=args.label_column,
            regression=args.regression,
        )
    elif args.task == "qa":
        options = dict(doc_stride=args.doc_stride, max_query_length=args.max_query_length)
    metrics = _load("training.runs").run_finetune(
        FINETUNE_TASKS[args.task],
        args.preset,
        args.train,
        args.validation,
        args.output,
        epochs=args.epochs,
        batch_size=args.batch_size,
        sequence_length=args.sequence_length,
        learning_rate=args.learning_rate,
        warmup_fraction=args.warmup_fraction,
        strategy=args.strategy,
        tpu=args.tpu,
        jit_compile=args.jit_compile,
        mixed_precision=args.mixed_precision,
        seed=args.seed,
        checkpoint_every=args.checkpoint_every,
        export=not args.no_export,
        **options,
    )
    print(json.dumps(metrics, indent=2, sort_keys=True))
    return 0


def _pretrain(args) -> int:
    metrics = _load("training.runs").run_pretrain(
        args.preset,
        args.output,
        input_file=args.input_file,
        text_file=args.text_file,
        from_scratch=args.from_scratch,
        num_train_steps=args.num_train_steps,
        batch_size=args.batch_size,
        max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq,
        learning_rate=args.learning_rate,
        warmup_fraction=args.warmup_fraction,
        optimizer=args.optimizer,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        strategy=args.strategy,
        tpu=args.tpu,
        jit_compile=args.jit_compile,
        mixed_precision=args.mixed_precision,
        seed=args.seed,
        checkpoint_every=args.checkpoint_every,
    )
    print(json.dumps(metrics, indent=2, sort_keys=True))
    return 0


def _create_pretraining_data(args) -> int:
    stats = _load("data.pretraining.create").create_pretraining_data(
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


def _export(args) -> int:
    source = Path(args.source)
    tokenizer_preset = args.preset
    if source.is_dir():
        config = _load("presets.registry").load_preset_config(source)
        model = _load("presets").from_preset(source, task=config.task)
        tokenizer_preset = tokenizer_preset or source
    elif source.suffix == ".keras" and source.is_file():
        model = _load("saving.models").load_model(source, compile=False)
    else:
        raise ValueError(f"{source} is neither a preset directory nor a .keras file.")
    preprocessor = None
    if tokenizer_preset is not None:
        preprocessor = _load("tokenization").BertPreprocessor.from_preset(
            tokenizer_preset, sequence_length=args.sequence_length
        )
    elif not args.ids_only:
        raise ValueError(
            "A .keras model holds no vocabulary: pass --preset (the preset it was "
            "fine-tuned from) for the raw-string signature, or --ids-only."
        )
    path = _load("export").export_saved_model(
        model,
        args.destination,
        preprocessor=preprocessor,
        strings=not args.ids_only,
        overwrite=args.overwrite,
    )
    print(
        f"Exported {path} ({model.task}): signatures serving_default (strings) and serve_token_ids."
    )
    return 0


def _add_convert(commands) -> None:
    convert = commands.add_parser("convert", help="convert a checkpoint to a preset directory")
    convert.add_argument(
        "src",
        help="checkpoint: Google's release folder or .zip, a Hugging "
        "Face BERT directory, a keras-hub preset, or (with --to "
        "huggingface) a preset directory or downloaded preset name",
    )
    convert.add_argument("dst", help="directory to write")
    convert.add_argument(
        "--from",
        dest="source_format",
        choices=["auto", "huggingface", "google", "keras_hub"],
        default="auto",
        help="checkpoint format (default: auto, told by its files)",
    )
    convert.add_argument(
        "--to",
        dest="target_format",
        choices=["keras_bert_zoo", "huggingface"],
        default="keras_bert_zoo",
        help="write a preset directory (default) or a transformers directory",
    )
    convert.add_argument(
        "--allow-pickle",
        action="store_true",
        help="UNSAFE: read pytorch_model.bin (pickle runs code); trusted files only, needs torch",
    )
    convert.add_argument(
        "--vocab-file", help="vocab.txt for a keras-hub preset without a tokenizer asset"
    )
    convert.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    convert.set_defaults(run=_convert)


def _add_training_arguments(parser, learning_rate: float, batch_size: int) -> None:
    """Flags shared by `kbz finetune` and `kbz pretrain`."""
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument("--batch-size", type=int, default=batch_size)
    parser.add_argument(
        "--learning-rate",
        type=float,
        default=learning_rate,
        help="peak learning rate of the warmup + linear-decay schedule",
    )
    parser.add_argument("--warmup-fraction", type=float, default=0.1)
    parser.add_argument("--strategy", choices=STRATEGIES, default="none")
    parser.add_argument("--tpu", default=None, help="TPU name or address (--strategy tpu)")
    parser.add_argument("--jit-compile", action="store_true", help="compile steps with XLA")
    parser.add_argument("--mixed-precision", choices=PRECISIONS, default="float32")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=None,
        help="back up every N steps (default: every epoch); re-running the "
        "same command resumes from the last backup",
    )


def _add_finetune(commands) -> None:
    finetune = commands.add_parser("finetune", help="fine-tune a classifier, tagger or QA model")
    finetune.add_argument("task", choices=sorted(FINETUNE_TASKS))
    finetune.add_argument("--preset", required=True, help="preset name or directory")
    finetune.add_argument("--train", required=True, help="GLUE TSV, CoNLL or SQuAD JSON file")
    finetune.add_argument("--validation", required=True, help="file of the same format")
    finetune.add_argument("--epochs", type=int, default=3)
    finetune.add_argument("--sequence-length", type=int, default=128)
    _add_training_arguments(finetune, learning_rate=2e-5, batch_size=32)
    finetune.add_argument("--no-export", action="store_true", help="skip the SavedModel")
    finetune.add_argument(
        "--text-columns",
        default="sentence",
        help="classify: comma-separated text column(s), e.g. question,sentence",
    )
    finetune.add_argument("--label-column", default="label", help="classify: label column")
    finetune.add_argument("--regression", action="store_true", help="classify: float labels")
    finetune.add_argument("--doc-stride", type=int, default=128, help="qa: window stride")
    finetune.add_argument("--max-query-length", type=int, default=64, help="qa")
    finetune.set_defaults(run=_finetune)


def _add_pretrain(commands) -> None:
    pretrain = commands.add_parser("pretrain", help="MLM + NSP pretraining")
    pretrain.add_argument("--preset", required=True, help="preset name or directory")
    pretrain.add_argument(
        "--from-scratch", action="store_true", help="the preset's architecture with fresh weights"
    )
    pretrain.add_argument("--input-file", help="TFRecord files (comma-separated or globs)")
    pretrain.add_argument("--text-file", help="text files, masked on the fly each epoch")
    pretrain.add_argument(
        "--num-train-steps",
        type=int,
        default=1000,
        help="batches to train on (optimizer updates x accumulation steps)",
    )
    pretrain.add_argument("--max-seq-length", type=int, default=128)
    pretrain.add_argument("--max-predictions-per-seq", type=int, default=20)
    pretrain.add_argument("--optimizer", choices=["adamw", "lamb"], default="adamw")
    pretrain.add_argument("--gradient-accumulation-steps", type=int, default=None)
    _add_training_arguments(pretrain, learning_rate=1e-4, batch_size=32)
    pretrain.set_defaults(run=_pretrain)


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


def _add_export(commands) -> None:
    export = commands.add_parser("export", help="SavedModel for TF Serving (raw strings in)")
    export.add_argument(
        "source", help="preset directory (task and vocabulary from it) or a .keras model"
    )
    export.add_argument("destination", help="version directory, e.g. exports/my_model/1")
    export.add_argument(
        "--preset",
        default=None,
        help="preset whose vocabulary the string signature uses (needed for a .keras model)",
    )
    export.add_argument("--sequence-length", type=int, default=128)
    export.add_argument(
        "--ids-only", action="store_true", help="only the serve_token_ids signature"
    )
    export.add_argument("--overwrite", action="store_true")
    export.set_defaults(run=_export)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbz", description="BERT for Keras 3.")
    parser.add_argument("--version", action="version", version=f"kbz {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log at INFO level and show TensorFlow's own log lines",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    presets = commands.add_parser("presets", help="list the bundled presets")
    presets.set_defaults(run=_presets)
    _add_convert(commands)
    _add_finetune(commands)
    create = commands.add_parser(
        "create-pretraining-data", help="text to MLM+NSP TFRecords (google-research/bert flags)"
    )
    add_create_pretraining_data_arguments(create)
    create.set_defaults(run=_create_pretraining_data)
    _add_pretrain(commands)
    _add_export(commands)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    with console.quiet_tensorflow(enabled=not args.verbose):
        try:
            return args.run(args)
        except (ValueError, FileNotFoundError) as error:
            print(f"kbz {args.command}: error: {error}", file=sys.stderr)
            return 2
        except OSError as error:
            print(f"kbz {args.command}: error: {error}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
