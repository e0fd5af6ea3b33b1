"""The training jobs behind `kbz finetune` and `kbz pretrain`, as plain functions.

Both build the model inside the strategy scope, train with `model.fit` (static shapes:
`drop_remainder=True`) through `checkpointing.fit_resumable`, so re-running the same command
resumes exactly and a NaN/Inf loss stops with a clear error, and write their results
atomically into the output directory.
"""

import logging
from pathlib import Path

import keras
import tensorflow as tf

from keras_bert_zoo.data.pretraining.datasets import dynamic_masking_dataset, pretraining_dataset
from keras_bert_zoo.export.saved_model import export_saved_model
from keras_bert_zoo.presets.factory import from_preset
from keras_bert_zoo.presets.registry import load_preset_config
from keras_bert_zoo.pretraining import compile_pretrainer
from keras_bert_zoo.saving.atomic import write_json
from keras_bert_zoo.saving.models import save_preset
from keras_bert_zoo.tokenization import BertPreprocessor, BertTokenizer
from keras_bert_zoo.training.distributed import get_strategy, set_precision
from keras_bert_zoo.training.finetuning import FINETUNING_TASKS
from keras_bert_zoo.training.optimizers import create_optimizer
from keras_bert_zoo.training.resume import fit_resumable, interval_sizes

logger = logging.getLogger(__name__)


def _tensorboard(output: Path):
    return keras.callbacks.TensorBoard(str(output / "logs"), update_freq=50)


def run_finetune(
    task: str,
    preset: str,
    train: str,
    validation: str,
    output: str,
    epochs: int = 3,
    batch_size: int = 32,
    sequence_length: int = 128,
    learning_rate: float = 2e-5,
    warmup_fraction: float = 0.1,
    strategy: str = "none",
    tpu: str | None = None,
    jit_compile: bool = False,
    mixed_precision: str = "float32",
    seed: int = 0,
    checkpoint_every: int | None = None,
    export: bool = True,
    verbose: int = 1,
    **task_options,
) -> dict:
    """Fine-tunes `preset` on `train`, evaluates on `validation`, writes to `output`.

    Args:
        task: "classifier", "tagger" or "question_answerer" (`FINETUNING_TASKS`).

    Writes `model.keras`, `metrics.json`, `preset/` and (with `export`) `export/1`.
    Returns the validation metrics.

    >>> kbz.training.run_finetune("classifier", "my_preset", "train.tsv", "dev.tsv", "out")
    """
    if task not in FINETUNING_TASKS:
        raise ValueError(
            f"Unknown fine-tuning task {task!r}. Expected one of {sorted(FINETUNING_TASKS)}."
        )
    set_precision(mixed_precision)
    keras.utils.set_random_seed(seed)
    preprocessor = BertPreprocessor.from_preset(preset, sequence_length=sequence_length)
    job = FINETUNING_TASKS[task](preprocessor, **task_options)
    train_data = job.read(train)
    validation_data = job.read(validation, label_names=job.label_names(train_data))
    x, y, _ = job.arrays(train_data)
    x_val, y_val, extra_val = job.arrays(validation_data)
    steps_per_epoch = len(x["token_ids"]) // batch_size
    if steps_per_epoch < 1:
        raise ValueError(
            f"{train} gives {len(x['token_ids'])} training sequences, fewer than "
            f"one batch of {batch_size}; lower --batch-size."
        )
    total = epochs * steps_per_epoch
    interval = checkpoint_every or steps_per_epoch
    interval_sizes(total, interval, f"the run ({epochs} epochs of {steps_per_epoch} steps)")
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    distribution = get_strategy(strategy, tpu)
    with distribution.scope():
        model = from_preset(preset, task=task, **job.task_kwargs(train_data))
        optimizer = create_optimizer(
            learning_rate, total, warmup_fraction, loss_scale=mixed_precision == "mixed_float16"
        )
        model.compile(optimizer=optimizer, loss=job.loss(train_data), jit_compile=jit_compile)
    dataset = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(len(x["token_ids"]), seed=seed, reshuffle_each_iteration=True)
        .repeat()
        .batch(batch_size, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )
    fit_resumable(
        model,
        dataset,
        total,
        interval,
        output / "checkpoints",
        callbacks=[_tensorboard(output)],
        verbose=verbose,
        strategy=distribution,
        jit_compile=jit_compile,
    )
    outputs = model.predict(x_val, batch_size=batch_size, verbose=0)
    results = job.evaluate(validation_data, outputs, extra_val)
    results = {key: float(value) for key, value in results.items()}
    write_json(output / "metrics.json", results)
    model.save(output / "model.keras")
    save_preset(model, output / "preset", overwrite=True)
    if export:
        export_saved_model(
            model, output / "export" / "1", preprocessor=preprocessor, overwrite=True
        )
    logger.info("Validation metrics: %s", results)
    return results


def pretraining_data(
    input_file, text_file, preset, batch_size, max_seq_length, max_predictions_per_seq, seed
):
    """TFRecords (google-research/bert features) or dynamic masking straight from text."""
    if bool(input_file) == bool(text_file):
        raise ValueError(
            "Pass exactly one of --input-file (TFRecords from kbz "
            "create-pretraining-data) or --text-file (raw text, masked on the fly)."
        )
    if input_file:
        return pretraining_dataset(
            input_file, batch_size, max_seq_length, max_predictions_per_seq, seed=seed
        )
    config = load_preset_config(preset)
    return dynamic_masking_dataset(
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
    jit_compile: bool = False,
    mixed_precision: str = "float32",
    seed: int = 0,
    checkpoint_every: int | None = None,
    verbose: int = 1,
) -> dict:
    """MLM + NSP pretraining of `preset` (its weights, or its architecture `from_scratch`).

    Writes checkpoints (resumable), TensorBoard logs and a final `preset/` directory that
    `kbz finetune` and `kbz.from_preset` take. Returns the last training metrics.

    >>> kbz.training.run_pretrain("bert_tiny_en_uncased", "out", text_file="books.txt",
    ...                       from_scratch=True, num_train_steps=500)
    """
    interval = checkpoint_every or num_train_steps
    interval_sizes(num_train_steps, interval, f"--num-train-steps {num_train_steps}")
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    set_precision(mixed_precision)
    keras.utils.set_random_seed(seed)
    dataset = pretraining_data(
        input_file, text_file, preset, batch_size, max_seq_length, max_predictions_per_seq, seed
    )
    distribution = get_strategy(strategy, tpu)
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
    history = fit_resumable(
        model,
        dataset,
        num_train_steps,
        interval,
        output / "checkpoints",
        callbacks=[_tensorboard(output)],
        verbose=verbose,
        strategy=distribution,
        jit_compile=jit_compile,
    )
    results = {key: float(values[-1]) for key, values in history.history.items() if values}
    write_json(output / "metrics.json", results)
    save_preset(
        model,
        output / "preset",
        overwrite=True,
        metadata={"provenance": f"kbz pretrain of {preset}, {num_train_steps} steps"},
    )
    return results
