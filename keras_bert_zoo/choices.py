"""Names a user picks from, importable without Keras or TensorFlow (the CLI's `--help`)."""

from keras_bert_zoo.tasks.registry import SPECS

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")  # Keras dtype policies
# tf.distribute strategies by name (TensorFlow), and Keras' DataParallel (JAX).
STRATEGIES = ("none", "mirrored", "multi-worker", "tpu", "data-parallel")
POOLING_MODES = ("mean", "cls", "max")  # sentence-embedding pooling (sentence-transformers' modes)
# Per task (`keras_bert_zoo.tasks.registry`): the file `kbz finetune` / `kbz predict` write
# predictions to, and `kbz finetune TASK`'s (and `run_finetune`'s) schedule defaults.
PREDICTION_FILES = {name: s.prediction_file for name, s in SPECS.items() if s.prediction_file}
FINETUNE_DEFAULTS = {name: spec.defaults for name, spec in SPECS.items()}


# The default peak rate of LoRA runs, whatever the task: the adapters start at zero and learn
# little at full fine-tuning's rates (benchmarks/RESULTS.md, "LoRA vs full fine-tuning").
LORA_LEARNING_RATE = 5e-4


def finetune_settings(task: str, lora: bool = False, **given) -> dict:
    """`given` with each None replaced by `task`'s default (its spec's `defaults`, and
    `LORA_LEARNING_RATE` for the learning rate of a LoRA run).

    >>> finetune_settings("tagger", learning_rate=None, epochs=1)
    {'learning_rate': 0.0001, 'epochs': 1}
    """
    defaults = dict(FINETUNE_DEFAULTS[task])
    if lora:
        defaults["learning_rate"] = LORA_LEARNING_RATE
    return {key: defaults[key] if value is None else value for key, value in given.items()}
