"""The LoRA flags of `kbz finetune` (argparse only; no heavy import)."""

FULL_LEARNING_RATE = 2e-5  # BERT's fine-tuning default (google-research/bert's range 2e-5..5e-5)
LORA_LEARNING_RATE = 5e-4  # adapters start at zero and need a larger step (benchmarks/lora.py)


def add_lora_arguments(parser) -> None:
    """`--lora-rank`, `--lora-alpha`, `--lora-targets`; `--learning-rate` then defaults by
    whether LoRA is on (`learning_rate`)."""
    parser.add_argument(
        "--lora-rank",
        type=int,
        default=None,
        help="train rank-R LoRA adapters on the encoder's projections (and the task head) "
        "instead of every weight; outputs hold the merged weights, adapter.safetensors the "
        "adapters alone",
    )
    parser.add_argument(
        "--lora-alpha",
        type=float,
        default=None,
        help="LoRA scale numerator: updates are scaled by alpha / rank (default: the rank, "
        "a scale of 1, as Keras and PEFT)",
    )
    parser.add_argument(
        "--lora-targets",
        choices=["all", "attention"],
        default="all",
        help="projections adapted: all (query/key/value, attention output, feed-forward; "
        "default) or attention only",
    )
    parser.set_defaults(learning_rate=None)


def learning_rate(args) -> float:
    """`--learning-rate`, else 2e-5 (full fine-tuning) or 5e-4 (with `--lora-rank`)."""
    if args.learning_rate is not None:
        return args.learning_rate
    return LORA_LEARNING_RATE if args.lora_rank else FULL_LEARNING_RATE


def lora_options(args) -> dict:
    """The keyword arguments of the fine-tuning runs for LoRA."""
    return dict(
        lora_rank=args.lora_rank, lora_alpha=args.lora_alpha, lora_targets=args.lora_targets
    )
