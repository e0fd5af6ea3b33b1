"""What `kbz embed` and `kbz finetune embed` do, and every line they print.

As in `commands`, the implementation (Keras, TensorFlow) is imported when a command runs.
`run_finetune` sends `kbz finetune embed` here and the other tasks to `commands`.
"""

import json
from pathlib import Path

from keras_bert_zoo.cli import commands, finetune_flags
from keras_bert_zoo.cli.config_flags import config_from_args
from keras_bert_zoo.cli.task_flags import FINETUNE_TASKS, finetune_options
from keras_bert_zoo.jobs.config import EmbedFinetuneConfig


def run_finetune_embed(args) -> int:
    from keras_bert_zoo.jobs import finetune_embed  # when run: --help stays instant

    unsupported = {
        "--strategy": args.strategy != "none",
        "--tpu": args.tpu is not None,
        "--mixed-precision": args.mixed_precision != "float32",
        "--checkpoint-every": args.checkpoint_every is not None,
    }
    given = [flag for flag, used in unsupported.items() if used]
    if given:
        raise ValueError(
            f"kbz finetune embed runs on one device in float32 without mid-run checkpoints; "
            f"drop {', '.join(given)}."
        )
    config = config_from_args(EmbedFinetuneConfig, args, **finetune_options(args))
    metrics = finetune_embed.finetune_embed(config)
    print(json.dumps(metrics, indent=2, sort_keys=True))
    output = Path(args.output)
    commands.list_outputs(
        output,
        ("model.keras", "the embedder as a Keras model (kbz.load_model)"),
        ("adapter.safetensors", "LoRA adapters alone (kbz.load_lora_weights)"),
        ("preset", f"the embedder (kbz embed --model {output})"),
        ("export/1", "SavedModel, raw strings in, `embeddings` out"),
        ("metrics.json", "validation retrieval before and after, the loss per epoch"),
        ("logs", "TensorBoard: tensorboard --logdir " + str(output / "logs")),
    )
    return 0


def run_embed(args) -> int:
    from keras_bert_zoo.jobs import embed  # when run: --help stays instant

    result = embed.run_embed(
        args.model,
        args.input,
        args.output,
        batch_size=args.batch_size,
        sequence_length=args.sequence_length,
    )
    rows, width = result["shape"]
    print(
        f"Wrote {result['file']}: {rows} vectors of {width} floats ({result['pooling']} pooling"
        f"{', L2-normalised' if result['normalize'] else ''}), one per input line."
    )
    return 0


def run_finetune(args) -> int:
    """`kbz finetune TASK`: the embedder here, the tasks of `jobs.finetune` in `commands`."""
    finetune_flags.resolve(args)  # the task's defaults for the flags left out
    if args.task in FINETUNE_TASKS:
        return commands.run_finetune(args)
    return run_finetune_embed(args)
