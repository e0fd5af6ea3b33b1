"""`run_predict`, the job behind `kbz predict`: a fine-tuned model's predictions on a file.

The model comes from a `kbz finetune` output directory (its `preset/`, and the settings in
its `run.json`: sequence length, text columns, QA windows) or from any preset directory
saved from a task model. Inputs are read as `kbz finetune` reads them, except that labels
are optional (a TSV without its label column, a words-only CoNLL file, SQuAD questions
without answers); when they carry labels or answers, the same metrics as `kbz finetune` are
returned too. The model runs in Keras or, exported once, in ONNX Runtime or OpenVINO, in
float32 or int8 (`keras_bert_zoo.runtimes`); every task decodes the outputs the same way.
"""

from keras_bert_zoo.inference.streaming import DEFAULT_WINDOW
from keras_bert_zoo.jobs.checks import check_apart, input_file, output_file
from keras_bert_zoo.jobs.predictors import Predictor, load_task_model
from keras_bert_zoo.jobs.streaming import prediction_identity
from keras_bert_zoo.runtimes import DEFAULT_PRECISION, DEFAULT_RUNTIME
from keras_bert_zoo.runtimes.loading import check_runtime, load_runner
from keras_bert_zoo.tasks.models import FINETUNING_TASKS
from keras_bert_zoo.training import packed_prediction
from keras_bert_zoo.training.progress import progress_bar


def check_prediction_paths(paths: list, overwrite: bool) -> None:
    """The side files beside `--output` (`paths[1:]`): an existing one is replaced only with
    `overwrite`, since kbz cannot tell its own earlier file from one the user wrote there."""
    for side in paths[1:]:
        if side.is_dir():
            raise ValueError(f"--output: {side}, written beside it, is a directory. Move it.")
        if side.exists() and not overwrite:
            raise ValueError(
                f"--output {paths[0]}: {side.name} is written beside it and {side} already "
                "exists. Pass --overwrite to replace it, or choose an --output in another "
                "directory."
            )


def run_predict(
    task: str,
    model,
    input,
    output,
    batch_size: int = 64,
    sequence_length: int | None = None,
    jit_compile: bool = True,
    bucketing: bool = True,
    window: int = DEFAULT_WINDOW,
    restart: bool = False,
    runtime: str = DEFAULT_RUNTIME,
    precision: str = DEFAULT_PRECISION,
    overwrite: bool = False,
    packing=None,
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
        packing: a classifier's texts or a reranker's pairs packed several to a row of
            the longest one's length (`training.packed_prediction`: the same predictions,
            almost no padding);
            True, False or None ("auto": on where it was measured faster, with `bucketing`
            and the Keras runtime; True elsewhere is an error).
        jit_compile: XLA on GPU and TPU; on CPU prediction runs one TensorFlow graph for
            every bucket either way (`training.bucketed_prediction.predicts_as_graph`).
        window, restart: the file is streamed `window` rows at a time and continued after a
            kill (the task's `stream_predictions`; not SQuAD);
            `restart` starts an unfinished output afresh.
        runtime: "keras", "onnx" or "openvino" (`keras_bert_zoo.runtimes`); the exported
            ones are written once into the cache and reused. Streaming runs on Keras; another
            runtime predicts the file whole.
        precision: "float32" or "int8"; an int8 model is checked against float32 on rows of
            `input` when it is written, and a loss above the tolerance is a warning.
        overwrite: replace existing side files (QA's `nbest_predictions.json`, the
            reranker's `*.ranked.tsv`). `output`, the file named, is replaced as today; a
            side file is named by kbz, not by the user, so an existing one (maybe the
            user's own) is replaced only when asked.

    Returns `{"files": [...], "metrics": {...}}` (metrics empty for unlabeled input).

    >>> kbz.jobs.run_predict("classifier", "runs/sst2", "test.tsv", "predictions.tsv")
    """
    if task not in FINETUNING_TASKS:
        raise ValueError(f"Unknown task {task!r}. Expected one of {sorted(FINETUNING_TASKS)}.")
    spec = FINETUNING_TASKS[task].spec
    input_file("--input", input, f"a {spec.file_kind} file")
    output_file("--output", output, "prediction file", spec.prediction_file)
    check_prediction_paths(FINETUNING_TASKS[task].prediction_paths(output), overwrite)
    check_apart({"--output": FINETUNING_TASKS[task].prediction_paths(output)},
                {"--input": input, "--model": model})  # fmt: skip
    packing = packed_prediction.check_packing(
        packing, spec.packs_predictions and runtime == DEFAULT_RUNTIME
    )
    packing = packing if bucketing or packing is True else False  # as fine-tuning's auto
    keras = runtime == DEFAULT_RUNTIME and precision == DEFAULT_PRECISION
    network, preprocessor, config, settings = load_task_model(
        model, task, sequence_length, jit_compile, build=keras
    )
    check_runtime(runtime, precision, config.directory, task)
    defaults = {k: settings[k] for k in spec.run_settings if k in settings}  # the run's
    if "text_columns" in defaults:
        defaults["text_columns"] = tuple(defaults["text_columns"])
    options = {**defaults, **{k: v for k, v in options.items() if v is not None}}
    job = FINETUNING_TASKS[task](preprocessor, **options)
    predictor = Predictor.of(task, network, preprocessor, config, batch_size, packing)
    if keras and bucketing and job.streams(predictor, input):  # streamed, resumable
        identity = prediction_identity(spec.name, model, predictor, window)
        files, metrics = job.stream_predictions(predictor, input, output, window, restart, identity)
        return {"files": [str(f) for f in files], "metrics": metrics}
    dataset = job.read(
        input, label_names=config.task_config.get("label_names"), labels_optional=True
    )
    x, _, extra = job.arrays(dataset)
    if not keras:
        network = load_runner(
            config.directory, task, runtime, precision, sample=x, jit_compile=jit_compile
        )
    # Steps of 8 tokens where one graph runs every length (TensorFlow on CPU), else one XLA
    # program per bucket (`bucketed_prediction.prediction_buckets`).
    with progress_bar(len(x["token_ids"]), "predict", runtime, precision, "example") as advance:
        outputs = packed_prediction.predict_outputs(
            network, x, batch_size, job.sequence_outputs, advance, packing, bucketing=bucketing
        )
    predictions = job.predict(dataset, outputs, extra)
    files = job.write_predictions(dataset, predictions, output)
    return {"files": [str(f) for f in files], "metrics": job.metrics(dataset, predictions)}
