"""`run_pretrain`, the job behind `kbz pretrain`: MLM + NSP from TFRecords or raw text.

Checkpoints every 1,000 steps by default (google-research/bert's `save_checkpoints_steps`),
and with `checkpoint_every_minutes` also in time, the newest `keep_checkpoints` kept, in an
output directory held by `rundir.RunDirectory`. The input is a stream positioned by step
(`RecordStream`, `MaskingStream`), so a resume does not replay the steps already done.
"""

import keras

from keras_bert_zoo.data.pretraining.datasets import RecordStream
from keras_bert_zoo.data.pretraining.masking import MaskingStream
from keras_bert_zoo.data.pretraining.text import expand_input_patterns
from keras_bert_zoo.jobs.checks import (
    check_flags,
    check_length,
    check_rates,
    output_directory,
    settings_of,
)
from keras_bert_zoo.jobs.finetune import tensorboard
from keras_bert_zoo.jobs.process_run import ProcessRun
from keras_bert_zoo.jobs.rundir import RunDirectory
from keras_bert_zoo.presets.factory import from_preset, preset_with_weights
from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.pretraining import compile_pretrainer
from keras_bert_zoo.saving.atomic import write_json
from keras_bert_zoo.saving.models import save_preset
from keras_bert_zoo.tokenization import BertTokenizer
from keras_bert_zoo.training.distributed import get_strategy, set_precision
from keras_bert_zoo.training.heap import frozen_heap
from keras_bert_zoo.training.optimizers import create_optimizer
from keras_bert_zoo.training.processes import check_global_batch, shard_batches
from keras_bert_zoo.training.resume import check_minutes, fit_resumable, interval_sizes

DEFAULT_CHECKPOINT_EVERY = 1000  # steps, as google-research/bert's save_checkpoints_steps


def input_flag(input_file, text_file) -> tuple[str, str]:
    """`(flag, patterns)` of the one pretraining input given (records or raw text)."""
    if bool(input_file) == bool(text_file):
        raise ValueError(
            "Pass exactly one of --input-file (TFRecords from kbz "
            "create-pretraining-data) or --text-file (raw text, masked on the fly)."
        )
    return ("--input-file", input_file) if input_file else ("--text-file", text_file)


def pretraining_data(
    input_file, text_file, preset, batch_size, max_seq_length, max_predictions_per_seq, seed
):
    """TFRecords (google-research/bert features) or dynamic masking straight from text, as a
    stream `start_step -> dataset` that a resume positions without replaying the steps done."""
    input_flag(input_file, text_file)
    if input_file:
        return RecordStream(
            input_file, batch_size, max_seq_length, max_predictions_per_seq, seed=seed
        )
    config = load_preset_config(preset)
    return MaskingStream(
        text_file,
        BertTokenizer.from_preset(preset),
        config.vocabulary_path,
        batch_size,
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
        seed=seed,
    )


def run_pretrain(
    preset: str,
    output: str,
    input_file=None,
    text_file=None,
    from_scratch: bool = False,
    num_train_steps: int = 1000,
    batch_size: int = 32,
    max_seq_length: int = 128,
    max_predictions_per_seq: int = 20,
    learning_rate: float = 1e-4,
    warmup_fraction: float = 0.1,
    optimizer: str = "adamw",
    gradient_accumulation_steps: int | None = None,
    strategy: str = "none",
    tpu: str | None = None,
    jit_compile: bool = True,
    mixed_precision: str = "float32",
    seed: int = 0,
    checkpoint_every: int | None = None,
    keep_checkpoints: int = 3,
    checkpoint_every_minutes: float | None = None,
    overwrite: bool = False,
    verbose="auto",
) -> dict:
    """MLM + NSP pretraining of `preset` (its weights, or its architecture `from_scratch`).

    Writes checkpoints (resumable), TensorBoard logs and a final `preset/` directory that
    `kbz finetune` and `kbz.from_preset` take. Returns the last training metrics (the
    stored ones when the same call finds its run complete).

    >>> kbz.training.run_pretrain("bert_tiny_en_uncased", "out", text_file="books.txt",
    ...                           from_scratch=True, num_train_steps=500)
    """
    settings = settings_of(dict(locals()))
    check_flags(
        num_train_steps=num_train_steps,
        batch_size=batch_size,
        max_predictions_per_seq=max_predictions_per_seq,
        checkpoint_every=checkpoint_every,
        keep_checkpoints=keep_checkpoints,
        gradient_accumulation_steps=gradient_accumulation_steps,
    )
    check_rates(learning_rate, warmup_fraction)
    check_minutes(checkpoint_every_minutes)
    check_length("--max-seq-length", max_seq_length, preset, minimum=8)
    interval = checkpoint_every or min(DEFAULT_CHECKPOINT_EVERY, num_train_steps)
    interval_sizes(num_train_steps, interval, f"--num-train-steps {num_train_steps}")
    output_directory("--output", output)
    distribution = get_strategy(strategy, tpu)  # first: processes join before JAX computes
    check_global_batch(batch_size, distribution)
    set_precision(mixed_precision)
    keras.utils.set_random_seed(seed)
    flag, patterns = input_flag(input_file, text_file)
    inputs = {flag: expand_input_patterns(patterns, flag)}
    dataset = pretraining_data(
        input_file, text_file, preset, batch_size, max_seq_length, max_predictions_per_seq, seed
    )
    if not from_scratch:
        preset_with_weights(preset)  # a download fails here, before --output is written
    dataset = shard_batches(dataset, batch_size, distribution)  # this process's rows
    with (
        ProcessRun(RunDirectory(output, "pretrain", settings, inputs, overwrite)) as run,
        frozen_heap() as freeze,
    ):
        if run.finished is not None:
            return run.finished
        output = run.output  # a scratch copy on the processes other than 0 of a run
        with distribution.scope():
            model = from_preset(
                preset,
                task="pretrainer",
                load_weights=not from_scratch,
                max_predictions=max_predictions_per_seq,
            )
            updates = num_train_steps // (gradient_accumulation_steps or 1)  # steps are batches
            compile_pretrainer(
                model,
                create_optimizer(
                    learning_rate,
                    updates,
                    warmup_fraction,
                    optimizer=optimizer,
                    gradient_accumulation_steps=gradient_accumulation_steps,
                    loss_scale=mixed_precision == "mixed_float16",
                ),
                jit_compile=jit_compile,
            )
        freeze()  # the model and data: out of the collector's walks (training.heap)
        history = fit_resumable(
            model,
            dataset,
            num_train_steps,
            interval,
            output / "checkpoints",
            callbacks=[tensorboard(output)],
            verbose=verbose if run.chief else 0,
            strategy=distribution,
            jit_compile=jit_compile,
            keep_checkpoints=keep_checkpoints,
            checkpoint_every_minutes=checkpoint_every_minutes,
            progress="steps",  # fit's epochs are checkpoint intervals here
        )
        results = {key: float(v[-1]) for key, v in history.history.items() if v}
        write_json(output / "metrics.json", results)
        save_preset(
            model,
            output / "preset",
            overwrite=True,
            metadata={"provenance": f"kbz pretrain of {preset}, {num_train_steps} steps"},
            sequence_length=max_seq_length,
        )
        run.complete(results)
    return results
