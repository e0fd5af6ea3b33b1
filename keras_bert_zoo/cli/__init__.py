"""The `kbz` command line: one module per command in `commands` (its flags, its run and every
line it prints), the shared flags beside them (`config_flags`, `task_flags`, `compile_flags`).

The parser imports nothing heavy; a command runs on an installed Keras backend
(`extras.choose_backend`), or, when its model runs in an exported runtime, on Keras' numpy
backend (`extras.choose_light_backend`); unless `--verbose` is given, TensorFlow's C++ log lines are
filtered from the terminal (`keras_bert_zoo.console`). An error is one line in the
command's flags (`messages`), exit status 2 for bad input, 1 for other system errors.
The process-wide settings of `kbz`'s processes belong to the entry point, `run`, alone.
"""

import atexit
import logging
import os
import sys

from keras_bert_zoo import console
from keras_bert_zoo.cli import common, messages
from keras_bert_zoo.cli.commands.create_pretraining_data import (
    add_create_pretraining_data_arguments,
)
from keras_bert_zoo.cli.parser import build_parser
from keras_bert_zoo.extras import (
    ExportNeedsTensorFlow,
    MissingExtraError,
    choose_backend,
    choose_light_backend,
)
from keras_bert_zoo.host_memory import tune_process
from keras_bert_zoo.runtimes import DEFAULT_RUNTIME

__all__ = ["add_create_pretraining_data_arguments", "build_parser", "main", "run"]


def main(argv=None, restart=None) -> int:
    """Runs one `kbz` command (`argv`, default the process's arguments); returns its status.

    `restart(argv)`, given by the entry point alone, replaces the process: a command that runs
    an exported runtime goes on Keras' numpy backend (`extras.choose_light_backend`), and its
    first run, which must export the model with TensorFlow, is then run again on TensorFlow.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    console.show_status()
    flags = messages.command_flags(parser, args.command, getattr(args, "task", None))
    light = False
    with console.quiet_tensorflow(enabled=not args.verbose):
        try:
            if hasattr(args, "check"):  # flags that need no library: answered at once
                args.check(args)
            light = _runs_outside_keras(args) and choose_light_backend()
            note = None if light else choose_backend()  # before Keras is imported
            if note:
                console.status.info(note)
            common.use_compile_cache(args)
            return args.run(args)
        except ExportNeedsTensorFlow as error:
            if not (light and restart):  # TensorFlow is installed: the runtime checked it
                return _failed(args, error, flags, 2)
        except (ValueError, MissingExtraError, *messages.PATH_ERRORS) as error:
            return _failed(args, error, flags, 2)
        except OSError as error:
            return _failed(args, error, flags, 1)
        except KeyboardInterrupt:
            print(f"\nkbz {args.command}: {common.interrupted(args)}", file=sys.stderr)
            return 130
    # Outside `quiet_tensorflow`: the new process gets the terminal's descriptor 2 back.
    console.status.info(
        "Exporting the model for --runtime %s once: this run goes on TensorFlow; later runs "
        "reuse the export without it.",
        args.runtime,
    )
    return restart(argv)


def _failed(args, error, flags, status: int) -> int:
    print(f"kbz {args.command}: error: {messages.describe(error, flags)}", file=sys.stderr)
    return status


def _runs_outside_keras(args) -> bool:
    """Whether the command's model runs in an exported runtime (`--runtime onnx|openvino`)."""
    return getattr(args, "runtime", DEFAULT_RUNTIME) != DEFAULT_RUNTIME


def run_again_on_tensorflow(argv) -> int:
    """Replaces this process with the same `kbz` command on TensorFlow (`os.execv`): nothing
    was written yet, and the export made there is what later runs reuse."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.environ["KERAS_BACKEND"] = "tensorflow"
    os.execv(sys.executable, [sys.executable, "-m", "keras_bert_zoo.cli", *argv])
    return 1  # not reached: execv returns only by raising


def run() -> int:
    """The `kbz` executable (and `python -m keras_bert_zoo.cli`): the process settings `kbz`
    runs with, then `main()`; the process then ends without the interpreter's teardown.

    Only this entry point changes the process, before Keras or a backend is imported (`main`,
    for callers in Python such as tests, notebooks and the demo, changes nothing):

    - `kbz.tune_process()`: on JAX and PyTorch, glibc keeps the memory XLA:CPU frees for the
      next step, and JAX runs CPU computations inline (keras_bert_zoo/host_memory.py).
    - No teardown at exit. After `kbz finetune` the process holds hundreds of thousands of
      Python objects (the model, every traced program). Python's exit runs a last garbage
      collection and frees them one by one, touching each memory page again, which takes many
      seconds with the CPU idle where the host reclaimed those pages during training
      (benchmarks/RESULTS.md, "Fixed costs of a fine-tuning run"); the kernel frees the address
      space without touching it. So the interpreter's own exit runs as usual (it waits for
      threads that are not daemons, wakes and ends idle executor workers, runs the `atexit`
      handlers registered after this one, such as TensorFlow's and temporary files'), and the
      last handler, registered here first, ends the process with `os._exit` before the
      teardown. Every output is complete by then: files are written by rename.
    """
    status = [1]  # an exception that escapes main: Python prints it and the status is 1
    atexit.register(_end_before_teardown, status, os.getpid())
    tune_process()
    try:
        status[0] = main(restart=run_again_on_tensorflow)
    except SystemExit as stop:  # argparse's --help and usage errors
        status[0] = stop.code
    if status[0] is None:
        status[0] = 0
    elif not isinstance(status[0], int):  # sys.exit("message"): Python prints it, status 1
        print(status[0], file=sys.stderr)
        status[0] = 1
    return status[0]


def _end_before_teardown(status: list, pid: int) -> None:
    """The last `atexit` handler: logging's handlers closed and the standard streams flushed
    (as the teardown would), then the process ends with `status[0]`. A child forked from
    `kbz` inherits the handler and exits its own way."""
    if os.getpid() != pid:
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or a broken pipe: nothing more can be said
            pass
    os._exit(status[0])
