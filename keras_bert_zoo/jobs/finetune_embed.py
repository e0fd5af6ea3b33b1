"""`run_finetune_embed`, the job behind `kbz finetune embed`: contrastive fine-tuning of an
embedder on (query, positive) pairs with in-batch negatives.

The loss is sentence-transformers' MultipleNegativesRankingLoss: softmax cross-entropy over
`20 * cos(query_i, positive_j)` for all j of the batch, label i. Batches never hold the same
query or positive text twice (sentence-transformers' `NoDuplicatesDataLoader` does the same):
a repeated positive would be a false negative. The validation pairs are scored before and
after training by retrieval: each validation query against all distinct validation
positives, recall@1 / recall@5 / MRR (`recall_at_k`), written to `metrics.json`; the model
goes to `preset/` (task "embedder", its pooling kept), which `kbz embed --model` reads, and to
`model.keras`, with the training loss per epoch in TensorBoard `logs/`, as `kbz finetune`'s.
"""

import dataclasses
import logging
import random
from pathlib import Path

import keras
import numpy as np

from keras_bert_zoo import export as exports
from keras_bert_zoo.extras import TF_DATA_PIPELINES, require_tensorflow
from keras_bert_zoo.jobs.checks import check_lora, input_file, output_directory
from keras_bert_zoo.jobs.config import EmbedFinetuneConfig
from keras_bert_zoo.jobs.embed import embed_texts, load_embedder, read_lines, recall_at_k
from keras_bert_zoo.jobs.finetune import tensorboard, write_lora_outputs
from keras_bert_zoo.jobs.rundir import RunDirectory
from keras_bert_zoo.layers.common import check_positive_int
from keras_bert_zoo.layers.pooling import InBatchSimilarity
from keras_bert_zoo.lora import enable_lora
from keras_bert_zoo.saving.atomic import write_json
from keras_bert_zoo.saving.models import save_model_file, save_preset
from keras_bert_zoo.tokenization.arrays import packed_arrays
from keras_bert_zoo.training.heap import frozen_heap
from keras_bert_zoo.training.optimizers import create_optimizer

# Keras on TensorFlow imported it already; other backends fit on numpy arrays.
tf = require_tensorflow(TF_DATA_PIPELINES) if keras.backend.backend() == "tensorflow" else None

logger = logging.getLogger(__name__)
HEADERS = (("anchor", "positive"), ("query", "positive"), ("sentence1", "sentence2"))
INPUT_KEYS = ("token_ids", "segment_ids", "padding_mask")


def read_pairs(path, flag: str) -> list[tuple[str, str]]:
    """`query<TAB>positive` lines (an `anchor<TAB>positive` header is skipped)."""
    lines = read_lines(path, flag)
    if tuple(lines[0].lower().split("\t")) in HEADERS:
        lines = lines[1:]
    pairs = []
    for number, line in enumerate(lines, 1):
        fields = line.split("\t")
        if len(fields) != 2 or not all(f.strip() for f in fields):
            raise ValueError(
                f"{flag} {path}, pair {number}: expected `query<TAB>positive` (two non-empty "
                f"tab-separated texts). Received: {line[:80]!r}"
            )
        pairs.append((fields[0], fields[1]))
    if not pairs:
        raise ValueError(f"{flag} {path} holds no pairs.")
    return pairs


def distinct_batches(pairs, batch_size: int, seed: int) -> list[list[int]]:
    """Shuffled full batches of pair indices, no text twice in a batch (leftovers dropped).

    Hand-written: a greedy fill as in sentence-transformers' NoDuplicatesDataLoader.
    """
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    batches, open_batches = [], []  # [indices, texts] being filled
    for i in order:
        texts = set(pairs[i])
        home = next((b for b in open_batches if not texts & b[1]), None)
        if home is None:
            home = [[], set()]
            open_batches.append(home)
        home[0].append(i)
        home[1].update(texts)
        if len(home[0]) == batch_size:
            batches.append(home[0])
            open_batches.remove(home)
    return batches


def build_contrastive_trainer(embedder, sequence_length: int, scale: float = 20.0):
    """Keras model: `query_*` and `positive_*` id inputs -> `[batch, batch]` logits."""
    inputs = {
        f"{side}_{key}": keras.Input((sequence_length,), dtype="int32", name=f"{side}_{key}")
        for side in ("query", "positive")
        for key in INPUT_KEYS
    }
    vectors = [
        embedder({key: inputs[f"{side}_{key}"] for key in INPUT_KEYS})
        for side in ("query", "positive")
    ]
    logits = InBatchSimilarity(scale, name="in_batch_similarity")(*vectors)
    return keras.Model(inputs, logits, name="contrastive_trainer")


def _dataset(pairs, batches, preprocessor) -> dict:
    """`fit`'s data arguments for `batches`, in order: a tf.data dataset on TensorFlow, the
    numpy arrays with their batch size on the other backends (the same batches)."""
    queries = packed_arrays(preprocessor, [q for q, _ in pairs])
    positives = packed_arrays(preprocessor, [p for _, p in pairs])
    order = np.concatenate(batches)
    features = {f"query_{k}": v[order] for k, v in queries.items()}
    features.update({f"positive_{k}": v[order] for k, v in positives.items()})
    size = len(batches[0])
    labels = np.tile(np.arange(size, dtype=np.int32), len(batches))
    if tf is None:  # whole batches only (`distinct_batches`), unshuffled in `fit`
        return {"x": features, "y": labels, "batch_size": size}
    data = tf.data.Dataset.from_tensor_slices((features, labels))
    return {"x": data.batch(size, drop_remainder=True)}


def retrieval_metrics(embedder, preprocessor, pairs, batch_size: int) -> dict:
    """Recall@1/@5 and MRR of each query against all distinct positives of `pairs`."""
    positives = sorted({p for _, p in pairs})
    row = {p: i for i, p in enumerate(positives)}
    index = embed_texts(embedder, preprocessor, positives, batch_size)
    queries = embed_texts(embedder, preprocessor, [q for q, _ in pairs], batch_size)
    return recall_at_k(queries, index, [row[p] for _, p in pairs])


def run_finetune_embed(preset, train, validation, output, **settings) -> dict:
    """Fine-tunes `preset` as an embedder on `train` pairs: the keyword form of
    `finetune_embed(EmbedFinetuneConfig(preset, train, validation, output, **settings))`.

    >>> kbz.jobs.run_finetune_embed("minilm_preset", "pairs.tsv", "val.tsv", "runs/emb")
    """
    return finetune_embed(EmbedFinetuneConfig(preset, train, validation, output, **settings))


def _prepare(config: EmbedFinetuneConfig):
    """Every check and both files read, before any work and before --output exists."""
    check_lora(config.lora_rank, config.lora_alpha, config.lora_targets)
    for name in ("epochs", "batch_size"):
        check_positive_int(name, getattr(config, name))
    batch_size = config.batch_size
    if batch_size < 2:
        raise ValueError(
            f"--batch-size must be >= 2 for in-batch negatives. Received: {batch_size}"
        )
    for flag, path in (("--train", config.train), ("--validation", config.validation)):
        input_file(flag, path, "a file of query<TAB>positive pairs")
    output_directory("--output", config.output)
    train_pairs = read_pairs(config.train, "--train")
    validation_pairs = read_pairs(config.validation, "--validation")
    epoch_batches = [
        distinct_batches(train_pairs, batch_size, config.seed + e) for e in range(config.epochs)
    ]
    if not all(epoch_batches):
        raise ValueError(
            f"--train {config.train}: {len(train_pairs)} pairs make no full batch of "
            f"{batch_size} distinct texts. Lower --batch-size or add pairs."
        )
    return train_pairs, validation_pairs, epoch_batches


def finetune_embed(config: EmbedFinetuneConfig) -> dict:
    """Runs `config`: checks, the retrieval before, contrastive training, the retrieval after.

    Returns (and writes to `output/metrics.json`) `{"before": {...}, "after": {...}, ...}`
    with `recall@1`, `recall@5`, `mrr` of the validation pairs. `epochs`, `batch_size`,
    `sequence_length`, `learning_rate`, `warmup_fraction`: None takes the embedder's default
    (`task_specs.EMBEDDER.defaults`, as `kbz finetune embed`; the learning rate of a LoRA
    run: `LORA_LEARNING_RATE`).
    """
    train_pairs, validation_pairs, epoch_batches = _prepare(config)
    output = Path(config.output)
    export = exports.export_on_this_backend(config.export, output / "preset")
    config = dataclasses.replace(config, export=export)
    inputs = {"train": [config.train], "validation": [config.validation]}
    keras.utils.set_random_seed(config.seed)
    # a download fails here, before --output is written
    embedder, preprocessor = load_embedder(config.preset, config.sequence_length)
    with (
        RunDirectory(output, "finetune_embed", config, inputs, config.overwrite) as run,
        frozen_heap() as freeze,
    ):
        if run.finished is not None:
            return run.finished
        before = retrieval_metrics(embedder, preprocessor, validation_pairs, 64)
        logger.info("validation before fine-tuning: %s", before)
        if config.lora_rank:
            enable_lora(embedder, config.lora_rank, config.lora_alpha, config.lora_targets)
        trainer = build_contrastive_trainer(embedder, config.sequence_length, config.scale)
        steps = sum(len(batches) for batches in epoch_batches)
        trainer.compile(
            optimizer=create_optimizer(config.learning_rate, steps, config.warmup_fraction),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=config.jit_compile,
        )
        # slots before the first trace, or the train step is traced twice (BertModel.fit)
        trainer.optimizer.build(trainer.trainable_variables)
        losses = []
        freeze()  # the model and data: out of the collector's walks (training.heap)
        logs = tensorboard(output)
        for epoch, batches in enumerate(epoch_batches):  # new distinct batches each epoch
            data = _dataset(train_pairs, batches, preprocessor)
            history = trainer.fit(
                **data, initial_epoch=epoch, epochs=epoch + 1, shuffle=False, verbose=0,
                callbacks=[logs],
            )  # fmt: skip
            losses.append(float(history.history["loss"][-1]))
        freeze()  # and the traced programs, before the export's tracing makes new ones
        after = retrieval_metrics(embedder, preprocessor, validation_pairs, 64)
        metrics = {
            "before": before,
            "after": after,
            "train_pairs": len(train_pairs),
            "validation_pairs": len(validation_pairs),
            "steps": steps,
            "loss": losses,
        }
        embedder = write_lora_outputs(embedder, config.lora_rank, output)
        save_model_file(embedder, output / "model.keras")
        save_preset(
            embedder, output / "preset", overwrite=True, sequence_length=config.sequence_length
        )
        if config.export:
            exports.export_saved_model(
                embedder, output / "export" / "1", preprocessor=preprocessor, overwrite=True
            )
        write_json(output / "metrics.json", metrics)
        run.complete(metrics)
    return metrics
