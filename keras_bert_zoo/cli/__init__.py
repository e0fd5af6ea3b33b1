"""The `kbz` command line: one module per command in `commands` (its flags, its run and every
line it prints), the shared flags beside them (`config_flags`, `task_flags`, `compile_flags`).

The parser imports nothing heavy; a command runs on an installed Keras backend
(`extras.choose_backend`); unless `--verbose` is given, TensorFlow's C++ log lines are
filtered from the terminal (`keras_bert_zoo.console`). An error is one line in the
command's flags (`messages`), exit status 2 for bad input, 1 for other system errors.
"""

import atexit
import logging
import os
import sys
import threading

from keras_bert_zoo import console
from keras_bert_zoo.cli import common, messages
from keras_bert_zoo.cli.commands.create_pretraining_data import (
    add_create_pretraining_data_arguments,
)
from keras_bert_zoo.cli.parser import build_parser
from keras_bert_zoo.extras import MissingExtraError, choose_backend

__all__ = ["add_create_pretraining_data_arguments", "build_parser", "end_process", "main", "run"]


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    console.show_status()
    flags = messages.command_flags(parser, args.command, getattr(args, "task", None))
    with console.quiet_tensorflow(enabled=not args.verbose):
        try:
            if hasattr(args, "check"):  # flags that need no library: answered at once
                args.check(args)
            note = choose_backend()  # before Keras is imported
            if note:
                console.status.info(note)
            common.use_compile_cache(args)
            return args.run(args)
        except (ValueError, MissingExtraError, *messages.PATH_ERRORS) as error:
            print(f"kbz {args.command}: error: {messages.describe(error, flags)}", file=sys.stderr)
            return 2
        except OSError as error:
            print(f"kbz {args.command}: error: {messages.describe(error, flags)}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"\nkbz {args.command}: {common.interrupted(args)}", file=sys.stderr)
            return 130


def end_process(code: int):
    """Ends the process with `code` without the interpreter's teardown of every object.

    After `kbz finetune` the process holds ~570,000 Python objects (the model, every traced
    program). Python's exit runs a last garbage collection and frees them one by one, touching
    each memory page again: 2 s when the pages are resident, but 13-30 s with the CPU idle
    when the VM's host reclaimed them during training (measured on the project's 2-core VM,
    benchmarks/RESULTS.md); the kernel frees the address space without touching it. Every
    output is complete by then (files are written by rename), so this does what Python's exit
    does before its teardown: `threading._shutdown` (the `concurrent.futures` hooks that wake
    and end idle pool workers, such as PyTorch's compile pool, then waits for threads that are
    not daemons), the `atexit` handlers (logging, TensorFlow, temporary files), then it flushes
    the standard streams and calls `os._exit`.
    """
    # Joining non-daemon threads by hand waited forever on idle executor workers, which only
    # exit once the executor's shutdown hook (registered with threading) wakes them.
    threading._shutdown()
    atexit._run_exitfuncs()  # Python's own exit runs them; os._exit does not
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or a broken pipe: nothing more can be said
            pass
    os._exit(code)


def run():
    """The `kbz` executable (and `python -m keras_bert_zoo.cli`): `main()`, then `end_process`.

    `main` returns its exit status instead, for callers in Python (tests, notebooks, the demo).
    """
    code = main()  # argparse's --help and usage errors exit from here the ordinary way
    end_process(0 if code is None else int(code))
