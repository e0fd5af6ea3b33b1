"""`finetune(config)`, the job behind `kbz finetune TASK`, every task (`run_finetune`: its
keyword form), in phases that read top to bottom:

- prepare: the settings, the input files and the preset's weights (a download) are checked
  before any work and before the output directory is created (`checks`);
- read: both files read, the training set tokenized and its batches planned (the task's
  `training_schedule`);
- build: the task model inside the strategy scope, its LoRA adapters and optimizer;
- train: `model.fit` (a few static shapes: whole batches trimmed to their length bucket,
  `training.batching`) through `resume.fit_resumable`, so re-running the same config resumes
  exactly and a NaN/Inf loss stops with a clear error; validated after every interval;
- write: predictions, metrics, model, preset and export, atomically into the output directory,
  held by `rundir.RunDirectory` (one writer, resumed only by the same run: `config.identity()`).
"""

import dataclasses
import logging
from pathlib import Path

import keras

from keras_bert_zoo import export as exports
from keras_bert_zoo.finetuning.packed_training import use_packing
from keras_bert_zoo.finetuning.task_training import (
    check_one_batch,
    compile_task_model,
    stepped_model,
    training_schedule,
    training_stream,
)
from keras_bert_zoo.jobs.checks import (
    check_apart,
    check_length,
    check_lora,
    input_file,
    output_directory,
)
from keras_bert_zoo.jobs.config import FinetuneConfig
from keras_bert_zoo.jobs.logs import check_tensorboard, tensorboard
from keras_bert_zoo.jobs.process_run import ProcessRun
from keras_bert_zoo.jobs.rundir import check_overwrite
from keras_bert_zoo.jobs.validation import ValidationCallback
from keras_bert_zoo.lora import enable_lora, merge_lora
from keras_bert_zoo.presets.factory import from_preset, preset_with_weights
from keras_bert_zoo.presets.sources import is_run_directory
from keras_bert_zoo.saving.adapters import save_lora_weights
from keras_bert_zoo.saving.atomic import write_json
from keras_bert_zoo.saving.models import save_model_file, save_preset
from keras_bert_zoo.tasks.models import FINETUNING_TASKS, TASK_MODELS
from keras_bert_zoo.tokenization import BertPreprocessor
from keras_bert_zoo.training import packed_prediction
from keras_bert_zoo.training.distributed import get_strategy, keeps_global_policy, set_precision
from keras_bert_zoo.training.heap import frozen_heap
from keras_bert_zoo.training.processes import batch_devices, check_global_batch, shard_batches
from keras_bert_zoo.training.progress import interactive, logged_while
from keras_bert_zoo.training.resume import check_minutes, fit_resumable, interval_sizes

logger = logging.getLogger(__name__)


def write_lora_outputs(model, rank, output: Path):
    """`adapter.safetensors` of a LoRA model, and the merged plain model for what follows."""
    if not rank:
        return model
    save_lora_weights(model, output / "adapter.safetensors")
    return merge_lora(model)


def run_finetune(task: str, preset: str, train: str, validation: str, output: str, **settings):
    """Fine-tunes `preset` on `train`, evaluates on `validation`, writes to `output`.

    The keyword form of `finetune(FinetuneConfig(...))`: `settings` are `FinetuneConfig`'s
    fields (`epochs`, `batch_size`, ... `lora_rank`; None takes the task's default), any
    other keyword is one of the task's options (`text_columns`, `doc_stride`, ...: its
    spec's `TaskOption`s).

    >>> kbz.jobs.run_finetune("classifier", "my_preset", "train.tsv", "dev.tsv", "out")
    """
    fields = {field.name for field in dataclasses.fields(FinetuneConfig)}
    options = {k: settings.pop(k) for k in list(settings) if k not in fields}
    config = FinetuneConfig(task, preset, train, validation, output, **settings)
    return finetune(dataclasses.replace(config, task_options=options) if options else config)


@keeps_global_policy
def finetune(config: FinetuneConfig) -> dict:
    """Runs `config`: checks, reads, trains, writes (see the module docstring).

    The validation set is evaluated after every checkpoint interval (an epoch by default;
    progress output, TensorBoard and `metrics.json`'s `history`), and the weights of the best
    one are kept (`keep="last"`: the final ones) for what follows. With `bucketing`, batches
    group examples of similar length trimmed to a few static lengths (`training.batching`);
    whole batches only, per bucket, in an order fixed by `seed`. Writes `model.keras` (no
    optimizer state), `metrics.json`, the validation predictions (as `kbz predict`),
    `preset/`, `adapter.safetensors` (LoRA) and (with `export`) `export/1`. Returns the
    validation metrics; the same config again on a finished run returns them untrained.
    """
    job, distribution, config = _prepare(config)
    data = _read(job, config, distribution)
    inputs = {"--train": [config.train], "--validation": [config.validation]}
    preset_with_weights(config.preset)  # a download fails here, before --output is written
    with (
        ProcessRun("finetune", config, inputs) as run,
        frozen_heap() as freeze,
    ):
        if run.finished is not None:
            return run.finished
        output = run.output  # a scratch copy on the processes other than 0 of a run
        model, trained = _build(job, data, config, distribution)
        validated = _train(model, trained, job, data, config, distribution, output, run, freeze)
        results = _write(model, job, data, config, validated, output)
        run.complete(results)
    logger.info("Validation metrics: %s", results)
    return results


def _prepare(config: FinetuneConfig):
    """Every check of the settings and files, before any work and before --output exists."""
    if is_run_directory(config.preset):  # a finished run's model: its preset/
        config = dataclasses.replace(config, preset=str(Path(config.preset) / "preset"))
    if config.task not in FINETUNING_TASKS:
        raise ValueError(
            f"Unknown fine-tuning task {config.task!r}. Expected one of {sorted(FINETUNING_TASKS)}."
        )
    if config.keep not in ("best", "last"):
        raise ValueError(f"--keep must be 'best' or 'last'. Received: {config.keep!r}.")
    # The flags' numbers are checked by `FinetuneConfig` itself (before Keras on the CLI).
    check_lora(config.lora_rank, config.lora_alpha, config.lora_targets)
    check_length("--sequence-length", config.sequence_length, config.preset, minimum=8)
    check_minutes(config.checkpoint_every_minutes)
    task = FINETUNING_TASKS[config.task]
    for flag, path in (("--train", config.train), ("--validation", config.validation)):
        input_file(flag, path, f"a {task.spec.file_kind} file")
    output_directory("--output", config.output)
    inputs = {"--train": config.train, "--validation": config.validation, "--preset": config.preset}
    check_apart({"--output": config.output}, inputs)
    check_overwrite(config.output, config.overwrite)
    distribution = get_strategy(config.strategy, config.tpu)  # first: processes join
    export = exports.export_on_this_backend(config.export, Path(config.output) / "preset")
    check_tensorboard(Path(config.output))
    set_precision(config.mixed_precision)
    keras.utils.set_random_seed(config.seed)
    preprocessor = BertPreprocessor.from_preset(
        config.preset, sequence_length=config.sequence_length
    )
    job = task(preprocessor, **config.task_options)
    packed = use_packing(job, config.packing, config.bucketing)  # --packing: a task that packs
    config = dataclasses.replace(config, packing=packed)
    job.training_rows(config.batch_size)  # a batch that would split a training group stops
    check_global_batch(config.batch_size, distribution, job.training_group_size())
    return job, distribution, dataclasses.replace(config, export=export)


@dataclasses.dataclass
class _Data:
    """The read and tokenized files, and the batch schedule: what the later phases share."""

    train: object
    validation: object
    x: dict  # the training rows (`job.training_arrays`: examples, or groups of them)
    y: object
    schedule: object
    intervals: list
    interval: int
    validation_x: dict
    validation_extra: object  # what the task's `predict` needs besides the outputs


def _read(job, config: FinetuneConfig, distribution) -> _Data:
    """Both files read, the training set tokenized and its batches planned (errors first):
    packed rows (`--packing`) or the task's length buckets."""
    train = job.read(config.train)
    validation = job.read(config.validation, label_names=job.label_names(train))
    x, y = job.training_arrays(train, config.seed)
    batch_size, epochs = job.training_rows(config.batch_size), config.epochs
    unit = "sequences" if batch_size == config.batch_size else "groups"  # reranker: groups
    check_one_batch(x, batch_size, str(config.train), "lower --batch-size", unit)
    schedule = training_schedule(
        job, train, x, batch_size, config.sequence_length, epochs, config.bucketing,
        config.packing, config.seed, batch_devices(distribution),  # whole rows on each device
    )  # fmt: skip
    steps = schedule.steps_per_epoch
    interval = config.checkpoint_every or steps
    intervals = interval_sizes(
        epochs * steps, interval, f"the run ({epochs} epochs of {steps} steps)"
    )
    x_val, _, extra = job.arrays(validation)
    return _Data(train, validation, x, y, schedule, intervals, interval, x_val, extra)


def _build(job, data: _Data, config: FinetuneConfig, distribution):
    """The task model, its LoRA adapters and its optimizer, inside the strategy's scope;
    returns it and the model `fit` trains (`job.training_model`: it, or a wrapper)."""
    total = config.epochs * data.schedule.steps_per_epoch
    with distribution.scope():
        graph = from_preset(config.preset, task=config.task, **job.task_kwargs(data.train))
        # the task model: its model.keras keeps the preprocessor and takes raw data again
        options = {name: getattr(job, name) for name in TASK_MODELS[config.task].option_names()}
        model = TASK_MODELS[config.task](graph, job.preprocessor, **options)
        job.start_head(model, data.y)
        if config.lora_rank:
            enable_lora(model, config.lora_rank, config.lora_alpha, config.lora_targets)
        # the task model's default compile, on the run's schedule (`task_training`)
        model.compile(
            learning_rate=config.learning_rate,
            warmup_fraction=config.warmup_fraction,
            weight_decay=config.weight_decay,
            jit_compile=config.jit_compile,
        )
        trained = stepped_model(job, model, config.packing)
        compile_task_model(model, trained, data.train, total, config.packing)
    return model, trained


def _train(model, trained, job, data: _Data, config, distribution, output, run, freeze):
    """`fit_resumable` of `trained` over the schedule, `model` validated after every
    interval; returns the `ValidationCallback` (its history, the best weights) and the
    newest validation outputs."""
    callbacks = [tensorboard(output)]
    dataset, added = training_stream(job, data.x, data.y, data.schedule, config.packing)
    callbacks = [*added, *callbacks]
    dataset = shard_batches(dataset, data.schedule.batch_size, distribution)  # this process's rows
    newest = {}  # the newest validation pass's outputs by epoch: reused if that one is kept

    def validate(network, warn=False):  # `network` is `trained`: validate the task model
        freeze()  # the train steps' traced graphs, before prediction traces its own
        newest.clear()
        outputs = newest[validation.epoch] = _predict(model, job, data, config)
        return job.evaluate(data.validation, outputs, data.validation_extra, warn=warn)

    validation = ValidationCallback(validate, output / "checkpoints", len(data.intervals))
    if job.validates_before:  # the untrained model's metrics, once per run
        logger.info("Validation before fine-tuning: %s", validation.validate_before(trained))
    freeze()  # the model and data: out of the collector's walks (training.heap)
    fit_resumable(
        trained,
        dataset,
        config.epochs * data.schedule.steps_per_epoch,
        data.interval,
        output / "checkpoints",
        callbacks=[validation, *callbacks],
        verbose=config.verbose if run.chief else 0,
        strategy=distribution,
        jit_compile=config.jit_compile,
        keep_checkpoints=config.keep_checkpoints,
        checkpoint_every_minutes=config.checkpoint_every_minutes,
        progress="steps" if config.checkpoint_every else "epochs",  # intervals are not epochs
    )
    freeze()  # and the traced programs, before the export's tracing makes new ones
    return validation, newest


def _predict(network, job, data: _Data, config):
    """The validation outputs, in the buckets or packed rows `kbz predict` uses (the same
    predictions): packed where training packs and packing saves positions ("auto")."""
    x, size = data.validation_x, config.batch_size
    packing = packed_prediction.AUTO if config.packing else False
    return packed_prediction.predict_outputs(
        network, x, size, job.sequence_outputs, packing=packing, label="validation",
        bucketing=config.bucketing,
    )  # fmt: skip


def _write(model, job, data: _Data, config, validated, output) -> dict:
    """The kept weights' predictions and metrics, the model, preset, LoRA adapters, export."""
    validation, newest = validated
    kept = validation.restore_best() if config.keep == "best" else validation.history[-1]
    outputs = newest.get(kept["epoch"])
    if outputs is None:  # an earlier epoch's weights, or validated before a resume
        outputs = _predict(model, job, data, config)
    predictions = job.predict(data.validation, outputs, data.validation_extra)
    results = job.metrics(data.validation, predictions)
    results = {key: float(value) for key, value in results.items()}
    if job.spec.prediction_file:  # the embedder writes none
        job.write_predictions(data.validation, predictions, output / job.spec.prediction_file)
    record = {
        "kept_epoch": kept["epoch"],
        "history": validation.history,
        "steps": config.epochs * data.schedule.steps_per_epoch,
        "before": validation.before,
    }
    results, written = job.report(data.train, data.validation, results, record)
    write_json(output / "metrics.json", written)
    model = write_lora_outputs(model, config.lora_rank, output)
    save_model_file(model, output / "model.keras")
    sequence_length = config.sequence_length
    save_preset(model, output / "preset", overwrite=True, sequence_length=sequence_length)
    if config.export:
        preprocessor = job.preprocessor
        with logged_while("export", enabled=not interactive()):
            exports.export_saved_model(
                model, output / "export" / "1", preprocessor=preprocessor, overwrite=True
            )
    return results
