"""`kbz`'s parser: the global flags, then each command's subparser, declared by its own module
(`cli.commands`). argparse only; no heavy import."""

import argparse

from keras_bert_zoo import __version__
from keras_bert_zoo.cli.commands import COMMANDS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbz", description="BERT for Keras 3.")
    parser.add_argument("--version", action="version", version=f"kbz {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log at INFO level and show TensorFlow's own log lines",
    )
    subcommands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(subcommands)
    return parser
