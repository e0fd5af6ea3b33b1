"""Names a user picks from, importable without Keras or TensorFlow (the CLI's `--help`)."""

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")  # Keras dtype policies
# tf.distribute strategies by name (TensorFlow), and Keras' DataParallel (JAX).
STRATEGIES = ("none", "mirrored", "multi-worker", "tpu", "data-parallel")
# What `kbz finetune` / `kbz predict` write predictions to, per task.
PREDICTION_FILES = {
    "classifier": "predictions.tsv",
    "tagger": "predictions.conll",
    "question_answerer": "predictions.json",
    "reranker": "predictions.tsv",
}
POOLING_MODES = ("mean", "cls", "max")  # sentence-embedding pooling (sentence-transformers' modes)
# `kbz finetune TASK`'s defaults (and `run_finetune`'s): measured to learn on the bundled
# samples from the MiniLM-L6 preset (benchmarks/RESULTS.md, "Per-task defaults"). Small models
# on small data need more than google-research/bert's BERT-base GLUE rate (2e-5..5e-5).
FINETUNE_DEFAULTS = {
    "classifier": dict(
        learning_rate=5e-5, batch_size=32, epochs=3, warmup_fraction=0.1, sequence_length=128
    ),
    "tagger": dict(
        learning_rate=1e-4, batch_size=16, epochs=3, warmup_fraction=0.1, sequence_length=128
    ),
    "question_answerer": dict(
        learning_rate=1e-4, batch_size=16, epochs=2, warmup_fraction=0.1, sequence_length=384
    ),
    "reranker": dict(
        learning_rate=5e-5, batch_size=16, epochs=1, warmup_fraction=0.1, sequence_length=256
    ),
    "embedder": dict(
        learning_rate=2e-5, batch_size=32, epochs=3, warmup_fraction=0.1, sequence_length=128
    ),
}


# The default peak rate of LoRA runs, whatever the task: the adapters start at zero and learn
# little at full fine-tuning's rates (benchmarks/RESULTS.md, "LoRA vs full fine-tuning").
LORA_LEARNING_RATE = 5e-4


def finetune_settings(task: str, lora: bool = False, **given) -> dict:
    """`given` with each None replaced by `task`'s default (`FINETUNE_DEFAULTS`, and
    `LORA_LEARNING_RATE` for the learning rate of a LoRA run).

    >>> finetune_settings("tagger", learning_rate=None, epochs=1)
    {'learning_rate': 0.0001, 'epochs': 1}
    """
    defaults = dict(FINETUNE_DEFAULTS[task])
    if lora:
        defaults["learning_rate"] = LORA_LEARNING_RATE
    return {key: defaults[key] if value is None else value for key, value in given.items()}
