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
    """`--jit-compile`'s default for the running backend (`layers.backend.default_jit_compile`:
    the task models' default too)."""
    if getattr(args, "jit_compile", False) is None:
        from keras_bert_zoo.layers.backend import default_jit_compile  # loads Keras, as next

        args.jit_compile = default_jit_compile()
