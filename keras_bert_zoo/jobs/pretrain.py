"""`run_pretrain`, the job behind `kbz pretrain`: MLM + NSP from TFRecords or raw text.

Checkpoints every 1,000 steps by default (google-research/bert's `save_checkpoints_steps`),
and with `checkpoint_every_minutes` also in time, the newest `keep_checkpoints` kept, in an
output directory held by `rundir.RunDirectory`. The input is a stream positioned by step
(`RecordStream`, `MaskingStream`), so a resume does not replay the steps already done.
`--text-file` runs on every backend, as numpy batches off TensorFlow; `--input-file`
(TFRecords) needs TensorFlow, which `_prepare` says before any work.
"""

from pathlib import Path

import keras

from keras_bert_zoo.data.pretraining.datasets import RecordStream, require_records
from keras_bert_zoo.data.pretraining.masking import MaskingStream
from keras_bert_zoo.data.pretraining.text import expand_input_patterns
from keras_bert_zoo.jobs.checks import (
    check_apart,
    check_length,
    output_directory,
)
from keras_bert_zoo.jobs.config import PretrainConfig
from keras_bert_zoo.jobs.logs import check_tensorboard, tensorboard
from keras_bert_zoo.jobs.process_run import ProcessRun
from keras_bert_zoo.jobs.rundir import check_overwrite
from keras_bert_zoo.presets.factory import from_preset, preset_with_weights
from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.pretraining import compile_pretrainer
from keras_bert_zoo.saving.atomic import write_json
from keras_bert_zoo.saving.models import save_preset
from keras_bert_zoo.tokenization import BertTokenizer
from keras_bert_zoo.training.distributed import get_strategy, keeps_global_policy, set_precision
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
    stream `start_step -> batches` (a tf.data dataset, or numpy batches off TensorFlow from
    text) that a resume positions without replaying the steps done."""
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


def run_pretrain(preset: str, output: str, **settings) -> dict:
    """MLM + NSP pretraining of `preset` (its weights, or its architecture `from_scratch`):
    the keyword form of `pretrain(PretrainConfig(preset, output, **settings))`.

    >>> kbz.jobs.run_pretrain("bert_tiny_en_uncased", "out", text_file="books.txt",
    ...                       from_scratch=True, num_train_steps=500)
    """
    return pretrain(PretrainConfig(preset, output, **settings))


@keeps_global_policy
def pretrain(config: PretrainConfig) -> dict:
    """Runs `config`: checks, data, model, training, the preset (phases, top to bottom).

    Writes checkpoints (resumable), TensorBoard logs and a final `preset/` directory that
    `kbz finetune` and `kbz.from_preset` take. Returns the last training metrics (the
    stored ones when the same config finds its run complete).
    """
    interval, distribution = _prepare(config)
    flag, patterns = input_flag(config.input_file, config.text_file)
    inputs = {flag: expand_input_patterns(patterns, flag)}
    dataset = pretraining_data(
        config.input_file,
        config.text_file,
        config.preset,
        config.batch_size,
        config.max_seq_length,
        config.max_predictions_per_seq,
        config.seed,
    )
    if not config.from_scratch:
        preset_with_weights(config.preset)  # a download fails here, before --output is written
    dataset = shard_batches(dataset, config.batch_size, distribution)  # this process's rows
    with (
        ProcessRun("pretrain", config, inputs) as run,
        frozen_heap() as freeze,
    ):
        if run.finished is not None:
            return run.finished
        output = run.output  # a scratch copy on the processes other than 0 of a run
        model = _build(config, distribution)
        freeze()  # the model and data: out of the collector's walks (training.heap)
        history = fit_resumable(
            model,
            dataset,
            config.num_train_steps,
            interval,
            output / "checkpoints",
            callbacks=[tensorboard(output)],
            verbose=config.verbose if run.chief else 0,
            strategy=distribution,
            jit_compile=config.jit_compile,
            keep_checkpoints=config.keep_checkpoints,
            checkpoint_every_minutes=config.checkpoint_every_minutes,
            progress="steps",  # fit's epochs are checkpoint intervals here
        )
        results = {key: float(v[-1]) for key, v in history.history.items() if v}
        write_json(output / "metrics.json", results)
        provenance = f"kbz pretrain of {config.preset}, {config.num_train_steps} steps"
        save_preset(
            model,
            output / "preset",
            overwrite=True,
            metadata={"provenance": provenance},
            sequence_length=config.max_seq_length,
        )
        run.complete(results)
    return results


def _prepare(config: PretrainConfig):
    """Every check before any work and before --output exists; `(interval, strategy)`."""
    if input_flag(config.input_file, config.text_file)[0] == "--input-file":
        require_records()  # TFRecords need TensorFlow: say so before anything is made
    # The flags' numbers are checked by `PretrainConfig` itself (before Keras on the CLI).
    check_minutes(config.checkpoint_every_minutes)
    check_length("--max-seq-length", config.max_seq_length, config.preset, minimum=8)
    steps = config.num_train_steps
    interval = config.checkpoint_every or min(DEFAULT_CHECKPOINT_EVERY, steps)
    interval_sizes(steps, interval, f"--num-train-steps {steps}")
    output_directory("--output", config.output)
    flag, patterns = input_flag(config.input_file, config.text_file)
    inputs = {flag: expand_input_patterns(patterns, flag), "--preset": config.preset}
    check_apart({"--output": config.output}, inputs)
    check_overwrite(config.output, config.overwrite)
    distribution = get_strategy(config.strategy, config.tpu)  # first: processes join
    check_global_batch(config.batch_size, distribution)
    check_tensorboard(Path(config.output))
    set_precision(config.mixed_precision)
    keras.utils.set_random_seed(config.seed)
    return interval, distribution


def _build(config: PretrainConfig, distribution):
    """The pretrainer (the preset's weights unless `from_scratch`), compiled in scope."""
    accumulation = config.gradient_accumulation_steps
    with distribution.scope():
        model = from_preset(
            config.preset,
            task="pretrainer",
            load_weights=not config.from_scratch,
            max_predictions=config.max_predictions_per_seq,
        )
        updates = config.num_train_steps // (accumulation or 1)  # steps are batches
        optimizer = create_optimizer(
            config.learning_rate,
            updates,
            config.warmup_fraction,
            optimizer=config.optimizer,
            gradient_accumulation_steps=accumulation,
            loss_scale=config.mixed_precision == "mixed_float16",
        )
        compile_pretrainer(model, optimizer, jit_compile=config.jit_compile)
    return model
