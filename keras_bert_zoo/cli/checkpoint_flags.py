"""The checkpoint flags of `kbz finetune` and `kbz pretrain` (argparse only; no heavy import)."""


def add_checkpoint_arguments(parser) -> None:
    """`--checkpoint-every`, `--keep-checkpoints` and `--checkpoint-every-minutes`."""
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=None,
        help="save a checkpoint every N steps (default: every epoch for finetune, every "
        "1000 steps for pretrain); re-running the same command resumes from the newest intact one",
    )
    parser.add_argument(
        "--keep-checkpoints",
        type=int,
        default=3,
        help="checkpoints kept (default 3): a damaged newest one falls back to the one before",
    )
    parser.add_argument(
        "--checkpoint-every-minutes",
        type=float,
        default=None,
        help="also save a checkpoint once M minutes have passed since the last one (at the "
        "next step), in addition to --checkpoint-every (default: off)",
    )
