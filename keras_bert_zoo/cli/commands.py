"""What each `kbz` command does, and every line it prints.

Each command imports its job (Keras, TensorFlow) inside its function, when it runs, so
`kbz --help`, `kbz --version` and `kbz presets` answer at once.
"""

import json
from pathlib import Path

from keras_bert_zoo.choices import PREDICTION_FILES
from keras_bert_zoo.cli import finetune_flags
from keras_bert_zoo.cli.compile_flags import resolve_jit_compile
from keras_bert_zoo.cli.config_flags import config_from_args
from keras_bert_zoo.cli.task_flags import (
    FINETUNE_TASKS,
    PREDICT_TASKS,
    finetune_options,
    predict_options,
)
from keras_bert_zoo.jobs.config import FinetuneConfig, PretrainConfig


def use_compile_cache(args) -> None:
    """Before anything compiles: `--jit-compile`'s default for the backend, and XLA's programs
    kept on disk (`--compile-cache`)."""
    resolve_jit_compile(args)
    if not getattr(args, "jit_compile", False):
        return
    from keras_bert_zoo.training import compile_cache  # only for XLA: it loads the backend

    choice = args.compile_cache
    if choice is None or choice.strip().lower() not in compile_cache.OFF:
        compile_cache.enable_compile_cache(choice)


def run_presets(args) -> int:
    from keras_bert_zoo.presets import registry  # when run: --help stays instant

    for name in registry.list_presets():
        config = registry.load_preset_config(name)
        arch = config.architecture
        print(
            f"{name:26s} L{arch['num_layers']:<3d} H{arch['hidden_dim']:<5d} "
            f"A{arch['num_heads']:<3d} params {config.num_parameters:>12,}  "
            f"{'uncased' if config.lowercase else 'cased':8s} "
            f"{config.metadata.get('description', '')}"
        )
    return 0


def run_convert(args) -> int:
    from keras_bert_zoo.checkpoints import convert  # when run: --help stays instant
    from keras_bert_zoo.presets import registry  # when run: --help stays instant

    source = args.src
    if not Path(source).exists() and args.target_format == "huggingface":
        if source in registry.list_presets():  # a named preset: its downloaded weights
            source = registry.cache_dir() / source
            if not source.is_dir():
                raise ValueError(
                    f"Preset '{args.src}' has no weights on this machine yet; "
                    f"load it once with kbz.from_preset('{args.src}')."
                )
    destination = convert(
        source,
        args.dst,
        source_format=args.source_format,
        target_format=args.target_format,
        overwrite=args.overwrite,
        allow_pickle=args.allow_pickle,
        vocab_file=args.vocab_file,
    )
    if args.target_format == "huggingface":
        print(
            f"Wrote Hugging Face BERT directory {destination}; load it with transformers' "
            f"from_pretrained('{destination}')."
        )
    else:
        print(
            f"Wrote preset directory {destination}; load it with kbz.from_preset('{destination}')."
        )
    return 0


def run_finetune(args) -> int:
    """`kbz finetune TASK`, every task (`jobs.finetune`)."""
    from keras_bert_zoo.jobs import finetune  # when run: --help stays instant

    finetune_flags.resolve(args)  # the task's defaults for the flags left out
    task, options = FINETUNE_TASKS[args.task], finetune_options(args)
    config = config_from_args(FinetuneConfig, args, task=task, task_options=options)
    metrics = finetune.finetune(config)
    print(json.dumps(metrics, indent=2, sort_keys=True))
    output = Path(args.output)
    if task not in PREDICTION_FILES:  # the embedder: retrieval metrics, no predictions
        preset = ("preset", f"the embedder (kbz embed --model {output}, kbz.from_preset)")
        listed = [("metrics.json", "validation retrieval before and after, per epoch")]
    else:
        preset = ("preset", "preset directory (kbz.from_preset, kbz predict --model)")
        listed = [
            (PREDICTION_FILES[task], "validation predictions"),
            ("metrics.json", "validation metrics, per epoch in `history`"),
        ]
    list_outputs(
        output,
        ("model.keras", "the Keras model (kbz.load_model)"),
        ("adapter.safetensors", "LoRA adapters and head alone (kbz.load_lora_weights)"),
        preset,
        ("export/1", "SavedModel for TF Serving, raw strings in"),
        *listed,
        ("logs", "TensorBoard: tensorboard --logdir " + str(output / "logs")),
    )
    return 0


def list_outputs(output, *written) -> None:
    """One line per output a run wrote: `(name, what it is for)`, those that exist."""
    for name, what in written:
        if (Path(output) / name).exists():
            print(f"  {Path(output) / name}: {what}")


def run_pretrain(args) -> int:
    from keras_bert_zoo.jobs import pretrain  # when run: --help stays instant

    metrics = pretrain.pretrain(config_from_args(PretrainConfig, args))
    print(json.dumps(metrics, indent=2, sort_keys=True))
    list_outputs(
        args.output,
        ("preset", "the pretrained preset (kbz finetune --preset, kbz.from_preset)"),
        ("metrics.json", "the last interval's training metrics"),
        ("logs", "TensorBoard: tensorboard --logdir " + str(Path(args.output) / "logs")),
    )
    return 0


def run_create_pretraining_data(args) -> int:
    from keras_bert_zoo.data.pretraining import create  # when run: --help stays instant

    stats = create.create_pretraining_data(
        args.input_file,
        args.output_file,
        args.vocab_file,
        args.do_lower_case,
        args.max_seq_length,
        args.max_predictions_per_seq,
        args.random_seed,
        args.dupe_factor,
        args.masked_lm_prob,
        args.short_seq_prob,
        bool(args.do_whole_word_mask),
        args.preset,
        args.input_format,
        args.num_workers,
    )
    print(
        f"Wrote {stats['instances']} instances from {stats['documents']} documents to "
        f"{', '.join(str(Path(p)) for p in stats['output_files'])}"
    )
    return 0


def interrupted(args) -> str:
    """The one line shown for Ctrl-C: where the run stopped and how to go on."""
    output = getattr(args, "output", None)
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


def run_predict(args) -> int:
    from keras_bert_zoo.jobs import predict  # when run: --help stays instant

    options = predict_options(args)
    result = predict.run_predict(
        PREDICT_TASKS[args.task],
        args.model,
        args.input,
        args.output,
        batch_size=args.batch_size,
        sequence_length=args.sequence_length,
        jit_compile=args.jit_compile,
        bucketing=args.bucketing,
        **options,
    )
    print(f"Wrote {', '.join(result['files'])}")
    if result["metrics"]:
        print(json.dumps(result["metrics"], indent=2, sort_keys=True))
    return 0
