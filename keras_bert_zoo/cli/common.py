"""What every `kbz` command shares when it runs: XLA's compile settings, the list of what a
run wrote, and the line shown for Ctrl-C."""

import json
from pathlib import Path

from keras_bert_zoo.cli.compile_flags import resolve_jit_compile

# Its string signature tokenizes with tensorflow-text's op, which plain TensorFlow lacks
# ("Op type not registered 'FastWordpieceTokenizeWithOffsets'").
SAVED_MODEL_LOADING = (
    "TF Serving has its tokenizer op built in; in Python, `import tensorflow_text` before "
    "tf.saved_model.load"
)


def use_compile_cache(args) -> None:
    """Before anything compiles: `--jit-compile`'s default for the backend, and XLA's programs
    kept on disk (`--compile-cache`)."""
    resolve_jit_compile(args)
    # `kbz embed` has no `--jit-compile`: its prediction compiles with XLA on JAX (one program
    # per length bucket), runs as a graph on TensorFlow and eagerly on PyTorch.
    if not hasattr(args, "compile_cache") or not getattr(args, "jit_compile", True):
        return
    from keras_bert_zoo.training import compile_cache  # only for XLA: it loads the backend

    choice = args.compile_cache
    if choice is None or choice.strip().lower() not in compile_cache.OFF:
        compile_cache.enable_compile_cache(choice)


def list_outputs(output, *written) -> None:
    """One line per output a run wrote: `(name, what it is for)`, those that exist."""
    for name, what in written:
        if (Path(output) / name).exists():
            print(f"  {Path(output) / name}: {what}")


def interrupted(args) -> str:
    """The one line shown for Ctrl-C: where the run stopped and how to go on."""
    output = getattr(args, "output", None)
    record = Path(output or ".")
    record = record.with_name(f".{record.name}.progress.json")  # a streamed output's
    if output is not None and record.is_file():
        rows = json.loads(record.read_text())["rows"]
        return f"interrupted. {rows} rows are written; re-run the same command to continue."
    state = Path(output or ".") / "checkpoints" / "state.json"
    if output is None or not state.is_file():
        return "interrupted before any checkpoint was written."
    newest = json.loads(state.read_text())
    newest = newest["checkpoints"][-1] if "checkpoints" in newest else newest
    where = f"step {newest['step']}" if "step" in newest else f"interval {newest['interval']}"
    return (
        f"interrupted. The checkpoint of {where} in {state.parent} is kept; re-run the same "
        "command to resume from it."
    )


def add_stream_arguments(parser) -> None:
    """`--window` and `--restart` of the streaming commands (`inference.streaming`)."""
    parser.add_argument(
        "--window",
        type=int,
        default=10_000,
        help="input rows held in memory at once and sorted by length for bucketing "
        "(default: 10000); memory grows with it, not with the input",
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="discard an unfinished output and start from the first row (default: off, the "
        "same command continues an unfinished output, and another one is refused)",
    )
