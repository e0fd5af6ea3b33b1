"""The `kbz` command line: `parser` holds every flag, `commands` every action and print.

The parser imports nothing heavy; unless `--verbose` is given, TensorFlow's C++ log lines
are filtered from the terminal (`keras_bert_zoo.console`).
"""

import logging
import sys

from keras_bert_zoo import console
from keras_bert_zoo.cli import commands
from keras_bert_zoo.cli.parser import add_create_pretraining_data_arguments, build_parser

__all__ = ["add_create_pretraining_data_arguments", "build_parser", "main"]


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    with console.quiet_tensorflow(enabled=not args.verbose):
        try:
            commands.use_compile_cache(args)
            return args.run(args)
        except (ValueError, FileNotFoundError) as error:
            print(f"kbz {args.command}: error: {error}", file=sys.stderr)
            return 2
        except OSError as error:
            print(f"kbz {args.command}: error: {error}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"\nkbz {args.command}: {commands.interrupted(args)}", file=sys.stderr)
            return 130
