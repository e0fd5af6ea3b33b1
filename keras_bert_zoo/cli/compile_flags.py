"""`--jit-compile` and `--compile-cache`, shared by `kbz finetune`, `pretrain` and `predict`."""

import argparse

# Flags the command line resolves itself (`resolve_jit_compile`: the backend's XLA default), so
# `add_config_flags` leaves their default at None.
RESOLVED = {"jit_compile": None}


def add_compile_arguments(parser, jit_help: str) -> None:
    """`--jit-compile` and the on-disk cache of its compiled programs, `--compile-cache`."""
    parser.add_argument(
        "--jit-compile", action=argparse.BooleanOptionalAction, default=None, help=jit_help
    )
    add_compile_cache_argument(parser)


def add_compile_cache_argument(parser) -> None:
    """`--compile-cache`: where XLA's compiled programs are kept (how this process runs)."""
    parser.add_argument(
        "--compile-cache",
        default=None,
        metavar="DIR",
        help="keep XLA's compiled programs in DIR, so that the same run again (a resume, "
        "another seed, kbz predict of the same model again) skips those compiles (default: "
        "$KBZ_COMPILE_CACHE, else ~/.cache/keras_bert_zoo/xla; 'off' to switch it off)",
    )


def resolve_jit_compile(args) -> None:
    """`--jit-compile`'s default for the running backend: on with TensorFlow and JAX (XLA), off
    with PyTorch, where Keras' `jit_compile` is `torch.compile`: on CPU it compiles C++ for
    minutes per batch shape (one per length bucket), which cost more than it saved."""
    if getattr(args, "jit_compile", False) is None:
        import keras  # the commands with this flag load Keras next anyway

        args.jit_compile = keras.backend.backend() != "torch"
