"""`run_finetune`, the job behind `kbz finetune`.

Flags, input files and the preset's weights (a download) are checked before any work and
before the output directory is created (`checks`); the output
directory is held by `rundir.RunDirectory` (one writer, resumed only by the same run).

It builds the model inside the strategy scope, trains with `model.fit` (a few static shapes:
whole batches trimmed to their length bucket, `training.batching`) through
`resume.fit_resumable`, so re-running the same command resumes exactly and a NaN/Inf loss
stops with a clear error, and writes its results atomically into the output directory.
"""

import logging
from pathlib import Path

import keras

from keras_bert_zoo import export as exports
from keras_bert_zoo.choices import finetune_settings
from keras_bert_zoo.finetuning.registry import FINETUNING_TASKS
from keras_bert_zoo.jobs.checks import (
    check_flags,
    check_length,
    check_lora,
    check_rates,
    input_file,
    output_directory,
    settings_of,
)
from keras_bert_zoo.jobs.process_run import ProcessRun
from keras_bert_zoo.jobs.rundir import RunDirectory
from keras_bert_zoo.jobs.validation import ValidationCallback
from keras_bert_zoo.lora import enable_lora, merge_lora
from keras_bert_zoo.presets.factory import from_preset, preset_with_weights
from keras_bert_zoo.saving.adapters import save_lora_weights
from keras_bert_zoo.saving.atomic import write_json
from keras_bert_zoo.saving.models import save_model_file, save_preset
from keras_bert_zoo.tokenization import BertPreprocessor
from keras_bert_zoo.training import batching, bucket_choice
from keras_bert_zoo.training.distributed import get_strategy, set_precision
from keras_bert_zoo.training.heap import frozen_heap
from keras_bert_zoo.training.optimizers import create_optimizer
from keras_bert_zoo.training.processes import check_global_batch, shard_batches
from keras_bert_zoo.training.resume import check_minutes, fit_resumable, interval_sizes

logger = logging.getLogger(__name__)


class TensorBoard(keras.callbacks.TensorBoard):
    """Keras' TensorBoard callback, with the epoch scalars always written.

    Keras 3.15 writes epoch scalars inside the `record_if` of the last batch, so with an
    integer `update_freq` that the step count does not hit they are dropped: fit for 8 steps
    with `update_freq=50` logged no `epoch_loss` at all (`tests/test_runs.py` checks ours).
    """

    def on_epoch_end(self, epoch, logs=None):
        with self.summary.record_if(True):
            super().on_epoch_end(epoch, logs)


def tensorboard(output: Path) -> keras.callbacks.Callback:
    """Loss every 50 steps; per interval the loss, learning rate and validation metrics."""
    return TensorBoard(str(output / "logs"), update_freq=50)


def write_lora_outputs(model, rank, output: Path):
    """`adapter.safetensors` of a LoRA model, and the merged plain model for what follows."""
    if not rank:
        return model
    save_lora_weights(model, output / "adapter.safetensors")
    return merge_lora(model)


def run_finetune(
    task: str,
    preset: str,
    train: str,
    validation: str,
    output: str,
    epochs: int | None = None,
    batch_size: int | None = None,
    sequence_length: int | None = None,
    learning_rate: float | None = None,
    warmup_fraction: float | None = None,
    strategy: str = "none",
    tpu: str | None = None,
    jit_compile: bool = True,
    mixed_precision: str = "float32",
    seed: int = 0,
    checkpoint_every: int | None = None,
    keep_checkpoints: int = 3,
    checkpoint_every_minutes: float | None = None,
    export: bool = True,
    keep: str = "best",
    bucketing: bool = True,
    overwrite: bool = False,
    verbose="auto",
    lora_rank: int | None = None,
    lora_alpha: float | None = None,
    lora_targets: str = "all",
    **task_options,
) -> dict:
    """Fine-tunes `preset` on `train`, evaluates on `validation`, writes to `output`.

    Args:
        task: "classifier", "tagger" or "question_answerer" (`FINETUNING_TASKS`).
        task_options: the task's options (its spec's `TaskOption`s: `text_columns`, ...).
        epochs, batch_size, sequence_length, learning_rate, warmup_fraction: None takes the
            task's default (its spec's `defaults`, `keras_bert_zoo.task_specs`, as `kbz finetune`;
            the learning rate of a LoRA run: `LORA_LEARNING_RATE`).
        lora_rank: train LoRA adapters of this rank (`kbz.enable_lora`, with `lora_alpha`
            and `lora_targets`) and the head instead of every weight; `adapter.safetensors`
            holds them, every other output the merged weights.

    The validation set is evaluated after every checkpoint interval (an epoch by default;
    progress output, TensorBoard and `metrics.json`'s `history`), and the weights of the best
    one are kept (`keep="last"`: the final ones) for what follows.
    With `bucketing` (the default), batches group examples of similar length and are trimmed
    to a few static lengths (`training.batching`); `bucketing=False` pads every batch to
    `sequence_length`. Whole batches only, per bucket, in an order fixed by `seed`.
    Writes `model.keras` (no optimizer state), `metrics.json`, the validation predictions
    (`predictions.tsv` / `.conll` / `.json`, as `kbz predict`), `preset/` and (with `export`)
    `export/1`. Returns the validation metrics; the same call again on a finished run
    returns them without training.

    >>> kbz.training.run_finetune("classifier", "my_preset", "train.tsv", "dev.tsv", "out")
    """
    given = dict(locals())
    if task not in FINETUNING_TASKS:
        raise ValueError(
            f"Unknown fine-tuning task {task!r}. Expected one of {sorted(FINETUNING_TASKS)}."
        )
    hyperparameters = finetune_settings(
        task,
        lora=bool(lora_rank),
        epochs=epochs,
        batch_size=batch_size,
        sequence_length=sequence_length,
        learning_rate=learning_rate,
        warmup_fraction=warmup_fraction,
    )
    epochs, batch_size, sequence_length, learning_rate, warmup_fraction = hyperparameters.values()
    settings = settings_of({**given, **hyperparameters})
    if keep not in ("best", "last"):
        raise ValueError(f"--keep must be 'best' or 'last'. Received: {keep!r}.")
    check_flags(
        epochs=epochs,
        batch_size=batch_size,
        checkpoint_every=checkpoint_every,
        keep_checkpoints=keep_checkpoints,
    )
    check_rates(learning_rate, warmup_fraction)
    check_lora(lora_rank, lora_alpha, lora_targets)
    check_length("--sequence-length", sequence_length, preset, minimum=8)
    check_minutes(checkpoint_every_minutes)
    inputs = {"--train": [train], "--validation": [validation]}
    for flag, (path,) in inputs.items():
        input_file(flag, path, f"a {FINETUNING_TASKS[task].spec.file_kind} file")
    output_directory("--output", output)
    distribution = get_strategy(strategy, tpu)  # first: processes join before JAX computes
    check_global_batch(batch_size, distribution)
    export = exports.export_on_this_backend(export, Path(output) / "preset")
    set_precision(mixed_precision)
    keras.utils.set_random_seed(seed)
    preprocessor = BertPreprocessor.from_preset(preset, sequence_length=sequence_length)
    job = FINETUNING_TASKS[task](preprocessor, **task_options)
    train_data = job.read(train)
    validation_data = job.read(validation, label_names=job.label_names(train_data))
    x, y, _ = job.arrays(train_data)
    lengths = batching.real_lengths(x)
    train_buckets = bucket_choice.training_buckets(
        lengths, batch_size, sequence_length, epochs, bucketing
    )
    logger.info("Training batches trimmed to the lengths %s.", train_buckets)
    schedule = batching.BatchSchedule(lengths, batch_size, train_buckets, seed)
    buckets = batching.bucket_lengths(sequence_length, bucketing)  # prediction's
    steps_per_epoch = schedule.steps_per_epoch
    if len(x["token_ids"]) < batch_size:
        raise ValueError(
            f"{train} gives {len(x['token_ids'])} training sequences, fewer than "
            f"one batch of {batch_size}; lower --batch-size."
        )
    total = epochs * steps_per_epoch
    interval = checkpoint_every or steps_per_epoch
    intervals = interval_sizes(
        total, interval, f"the run ({epochs} epochs of {steps_per_epoch} steps)"
    )
    preset_with_weights(preset)  # a download fails here, before --output is written
    with (
        ProcessRun(RunDirectory(output, "finetune", settings, inputs, overwrite)) as run,
        frozen_heap() as freeze,
    ):
        if run.finished is not None:
            return run.finished
        output = run.output  # a scratch copy on the processes other than 0 of a run
        with distribution.scope():
            model = from_preset(preset, task=task, **job.task_kwargs(train_data))
            if lora_rank:
                enable_lora(model, lora_rank, lora_alpha, lora_targets)
            optimizer = create_optimizer(
                learning_rate, total, warmup_fraction, loss_scale=mixed_precision == "mixed_float16"
            )
            model.compile(optimizer=optimizer, loss=job.loss(train_data), jit_compile=jit_compile)
        dataset = batching.training_stream(x, y, schedule, job.sequence_outputs)
        dataset = shard_batches(dataset, batch_size, distribution)  # this process's rows
        x_val, _, extra_val = job.arrays(validation_data)

        def predict(network):
            return batching.predict(network, x_val, batch_size, buckets, job.sequence_outputs)

        newest = {}  # the newest validation pass's outputs by epoch: reused if that one is kept

        def validate(network, warn=False):
            freeze()  # the train steps' traced graphs, before prediction traces its own
            newest.clear()
            outputs = newest[validation.epoch] = predict(network)
            return job.evaluate(validation_data, outputs, extra_val, warn=warn)

        validation = ValidationCallback(validate, output / "checkpoints", len(intervals))
        freeze()  # the model and data: out of the collector's walks (training.heap)
        fit_resumable(
            model,
            dataset,
            total,
            interval,
            output / "checkpoints",
            callbacks=[validation, tensorboard(output)],
            verbose=verbose if run.chief else 0,
            strategy=distribution,
            jit_compile=jit_compile,
            keep_checkpoints=keep_checkpoints,
            checkpoint_every_minutes=checkpoint_every_minutes,
            progress="steps" if checkpoint_every else "epochs",  # intervals are not epochs
        )
        freeze()  # and the traced programs, before the export's tracing makes new ones
        kept = validation.restore_best() if keep == "best" else validation.history[-1]
        outputs = newest.get(kept["epoch"])
        if outputs is None:  # an earlier epoch's weights, or validated before a resume
            outputs = predict(model)
        predictions = job.predict(validation_data, outputs, extra_val)
        results = job.metrics(validation_data, predictions)
        results = {key: float(value) for key, value in results.items()}
        job.write_predictions(validation_data, predictions, output / job.spec.prediction_file)
        write_json(
            output / "metrics.json",
            {**results, "kept_epoch": kept["epoch"], "history": validation.history},
        )
        model = write_lora_outputs(model, lora_rank, output)
        save_model_file(model, output / "model.keras")
        save_preset(model, output / "preset", overwrite=True, sequence_length=sequence_length)
        if export:
            exports.export_saved_model(
                model, output / "export" / "1", preprocessor=preprocessor, overwrite=True
            )
        run.complete(results)
    logger.info("Validation metrics: %s", results)
    return results
