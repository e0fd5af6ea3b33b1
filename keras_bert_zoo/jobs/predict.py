"""`run_predict`, the job behind `kbz predict`: a fine-tuned model's predictions on a file.

The model comes from a `kbz finetune` output directory (its `preset/`, and the settings in
its `run.json`: sequence length, text columns, QA windows) or from any preset directory
saved from a task model. Inputs are read as `kbz finetune` reads them, except that labels
are optional (a TSV without its label column, a words-only CoNLL file, SQuAD questions
without answers); when they carry labels or answers, the same metrics as `kbz finetune` are
returned too.
"""

from pathlib import Path

from keras_bert_zoo.finetuning.registry import FINETUNING_TASKS
from keras_bert_zoo.jobs.checks import input_file, output_file
from keras_bert_zoo.presets.factory import from_preset
from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.presets.sources import model_source, run_sequence_length
from keras_bert_zoo.tokenization import BertPreprocessor
from keras_bert_zoo.training import bucketed_prediction


def _model_source(model) -> tuple[Path, dict]:
    """(preset directory, the run's settings) of a run directory or a preset directory."""
    path = Path(model)
    if not path.is_dir():
        raise ValueError(
            f"--model {model} is not a directory. Pass a `kbz finetune` output "
            "directory or a preset directory saved from a fine-tuned model."
        )
    return model_source(path)


def run_predict(
    task: str,
    model,
    input,
    output,
    batch_size: int = 64,
    sequence_length: int | None = None,
    jit_compile: bool = True,
    bucketing: bool = True,
    **options,
) -> dict:
    """Predicts `input` with the fine-tuned `model`; writes the prediction file(s) at `output`.

    Args:
        task: "classifier", "tagger" or "question_answerer".
        model: a `kbz finetune` output directory, or a preset directory of a task model.
        input: a GLUE TSV (the label column optional), a CoNLL file (the tag column
            optional) or a SQuAD JSON file (answers optional).
        output: the TSV / CoNLL / `predictions.json` path (QA also writes
            `nbest_predictions.json` beside it).
        options: task reading options (`text_columns`, `doc_stride`, ...) and for QA
            `n_best_size`, `max_answer_length`; a run's own settings are the defaults.
        bucketing: batches of similar length, trimmed to a few static lengths (the same
            predictions for real tokens, faster); False pads every batch to the full length.
        jit_compile: XLA on GPU and TPU; on CPU prediction runs one TensorFlow graph for
            every bucket either way (`training.bucketed_prediction.predicts_as_graph`).

    Returns `{"files": [...], "metrics": {...}}` (metrics empty for unlabeled input).

    >>> kbz.jobs.run_predict("classifier", "runs/sst2", "test.tsv", "predictions.tsv")
    """
    if task not in FINETUNING_TASKS:
        raise ValueError(f"Unknown task {task!r}. Expected one of {sorted(FINETUNING_TASKS)}.")
    spec = FINETUNING_TASKS[task].spec
    input_file("--input", input, f"a {spec.file_kind} file")
    output_file("--output", output, "prediction file", spec.prediction_file)
    preset, settings = _model_source(model)
    config = load_preset_config(preset)
    if config.task != task:
        raise ValueError(
            f"--model {model} holds a {config.task} model, not a {task}. Predict "
            "with the task it was fine-tuned for."
        )
    length = run_sequence_length(preset, sequence_length, settings)
    defaults = {k: settings[k] for k in spec.run_settings if k in settings}  # the run's
    if "text_columns" in defaults:
        defaults["text_columns"] = tuple(defaults["text_columns"])
    options = {**defaults, **{k: v for k, v in options.items() if v is not None}}
    preprocessor = BertPreprocessor.from_preset(preset, sequence_length=length)
    job = FINETUNING_TASKS[task](preprocessor, **options)
    dataset = job.read(
        input, label_names=config.task_config.get("label_names"), labels_optional=True
    )
    x, _, extra = job.arrays(dataset)
    network = from_preset(preset, task=task)
    network.compile(jit_compile=jit_compile)
    # Steps of 8 tokens where one graph runs every length (TensorFlow on CPU), else one XLA
    # program per bucket (`bucketed_prediction.prediction_buckets`).
    buckets = bucketed_prediction.prediction_buckets(network, length) if bucketing else [length]
    outputs = bucketed_prediction.predict(network, x, batch_size, buckets, job.sequence_outputs)
    predictions = job.predict(dataset, outputs, extra)
    files = job.write_predictions(dataset, predictions, output)
    return {"files": [str(f) for f in files], "metrics": job.metrics(dataset, predictions)}
