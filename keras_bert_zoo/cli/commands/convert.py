"""`kbz convert`: a checkpoint (Google's release, Hugging Face, keras-hub) to a preset
directory, or a preset back to a Hugging Face directory."""

from pathlib import Path


def add_parser(subcommands) -> None:
    convert = subcommands.add_parser("convert", help="convert a checkpoint to a preset directory")
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
    convert.set_defaults(run=run)


def run(args) -> int:
    from keras_bert_zoo.checkpoints import convert  # when run: --help stays instant
    from keras_bert_zoo.presets import registry  # when run: --help stays instant

    source = args.src
    if not Path(source).exists() and args.target_format == "huggingface":
        if source in registry.list_presets():  # a named preset: its downloaded weights
            source = registry.cache_dir() / source
            if not source.is_dir():
                raise ValueError(
                    f"Preset '{args.src}' has no weights on this machine yet; "
                    f"load it once with kbz.from_preset('{args.src}')."
                )
    destination = convert(
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
