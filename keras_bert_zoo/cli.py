"""The `kbz` command line: `kbz presets`, `kbz convert SRC DST`."""

import argparse
import logging
import os
import sys


def _convert(args) -> int:
    from keras_bert_zoo import checkpoints

    destination = checkpoints.convert_huggingface(args.src, args.dst, overwrite=args.overwrite)
    print(f"Wrote preset directory {destination}; load it with kbz.from_preset('{destination}').")
    return 0


def _presets(args) -> int:
    from keras_bert_zoo.presets import list_presets, load_preset_config

    for name in list_presets():
        config = load_preset_config(name)
        arch = config.architecture
        print(f"{name:26s} L{arch['num_layers']:<3d} H{arch['hidden_dim']:<5d} "
              f"A{arch['num_heads']:<3d} params {config.num_parameters:>12,}  "
              f"{'uncased' if config.lowercase else 'cased'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbz", description="BERT for Keras 3 on TensorFlow.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    commands = parser.add_subparsers(dest="command", required=True)

    presets = commands.add_parser("presets", help="list the bundled presets")
    presets.set_defaults(run=_presets)

    convert = commands.add_parser("convert", help="convert a checkpoint to a preset directory")
    convert.add_argument("src", help="Hugging Face BERT directory (config.json, "
                                     "model.safetensors, vocab.txt)")
    convert.add_argument("dst", help="preset directory to write")
    convert.add_argument("--from", dest="source_format", choices=["huggingface"],
                         default="huggingface", help="checkpoint format (default: huggingface)")
    convert.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    convert.set_defaults(run=_convert)
    return parser


def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError) as error:
        print(f"kbz {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
