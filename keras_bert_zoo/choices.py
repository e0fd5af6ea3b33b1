"""Names a user picks from, importable without Keras or TensorFlow (the CLI's `--help`)."""

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")  # Keras dtype policies
STRATEGIES = ("none", "mirrored", "multi-worker", "tpu")  # tf.distribute strategies by name
# What `kbz finetune` / `kbz predict` write predictions to, per task.
PREDICTION_FILES = {
    "classifier": "predictions.tsv",
    "tagger": "predictions.conll",
    "question_answerer": "predictions.json",
}
POOLING_MODES = ("mean", "cls", "max")  # sentence-embedding pooling (sentence-transformers' modes)
