"""The LoRA flags of `kbz finetune` (argparse only; no heavy import)."""

# The flags passed on by name to the fine-tuning runs (`commands.flags(args, LORA)`).
LORA = ("lora_rank", "lora_alpha", "lora_targets")


def add_lora_arguments(parser) -> None:
    """`--lora-rank`, `--lora-alpha`, `--lora-targets` (with `--lora-rank`, `--learning-rate`
    defaults to `choices.LORA_LEARNING_RATE`: `finetune_flags.resolve`)."""
    parser.add_argument(
        "--lora-rank",
        type=int,
        default=None,
        help="train rank-R LoRA adapters on the encoder's projections (and the task head) "
        "instead of every weight; outputs hold the merged weights, adapter.safetensors the "
        "adapters alone (default: off, every weight trains)",
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
