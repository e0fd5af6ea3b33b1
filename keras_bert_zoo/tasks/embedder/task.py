"""The embedder: `BertEmbedder` (the task model) and its behaviour, contrastive fine-tuning
on (query, positive) pairs with in-batch negatives (`EMBEDDER`), validated by retrieval.

Training rows are the pairs, each `[2, length]` (the query, then its positive; its length
the longer one's). The batches are `training.distinct_batches`: no text twice in a batch (a
repeated positive would be a false negative), drawn anew each epoch from `seed + epoch`, each
trimmed to the bucket of its longest text. `tasks.build_contrastive_trainer` embeds both
sides with the embedder and gives `scale` x cosine of every query against every positive of
the batch; the loss is the cross-entropy of each query's own positive (sentence-transformers'
MultipleNegativesRankingLoss), its targets made from the rows' positions in the loss.

On packed rows (`fit(packing=...)`, `--packing`; "auto", the default: where bucketing is
on) the unit packed is the pair, not the text: both texts of a pair go one after the other
into one row (`packed_batches.packed_batch`), so `PackedSchedule`, which counts what it
packs, gives about `--batch-size` pairs per step as unpacked, and a query always meets its
own positive in its batch (texts packed one by one could land in different batches). A row
holds up to twice `--sequence-length` tokens, as a pair does.
`packed_encoder.PackedPairSimilarity` pools each text's own tokens as the embedder pools,
so the loss sees the same query and positive vectors as unpacked. Packed batches are drawn
without `distinct_batches`' check, so the packed loss masks another pair of the batch that
shares a text (a false negative otherwise), from the texts' ids the training targets carry.

Validation is retrieval: each validation query against all distinct validation positives,
recall@1, recall@5 and MRR (`ranking_metrics.retrieval_scores`), before training
(`validates_before`) and after every interval; `--keep best` keeps the best MRR. The
embedder writes no prediction file; `metrics.json` holds `before`, `after` (the kept
weights'), `train_pairs`, `validation_pairs`, `steps`, `kept_epoch` and `history`.
"""

import dataclasses

import keras
import numpy as np

from keras_bert_zoo.data.pairs_reader import PairsData, read_pairs
from keras_bert_zoo.finetuning.common import FinetuningTask
from keras_bert_zoo.finetuning.raw_data import pairs_data, texts_or_pairs
from keras_bert_zoo.finetuning.task_model import TaskModel
from keras_bert_zoo.packed_encoder import build_packed_contrastive_trainer
from keras_bert_zoo.ranking_metrics import retrieval_ranks, retrieval_scores
from keras_bert_zoo.task_graphs import build_contrastive_trainer, in_batch_negatives_loss
from keras_bert_zoo.tasks.embedder.spec import EMBEDDER
from keras_bert_zoo.tokenization.arrays import packed_arrays
from keras_bert_zoo.training.distinct_batches import DistinctBatchSchedule


@dataclasses.dataclass
class EmbeddingTask(FinetuningTask):
    """Sentence embeddings trained with in-batch negatives (see the module docstring).

    Args:
        scale: the cosine scale of the in-batch logits (sentence-transformers' 20).
    """

    preprocessor: object
    scale: float = EMBEDDER.default("scale")
    spec = EMBEDDER
    sequence_outputs = False  # one vector per text
    packs = True  # each text's mean over its own tokens: packed pairs train it
    validates_before = True  # the untrained embedder's retrieval: `metrics.json`'s "before"

    def __post_init__(self):
        scale = self.scale
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0:
            raise ValueError(f"--scale must be a positive number. Received: {scale!r}.")

    def read(self, path, label_names=None, labels_optional=False) -> PairsData:
        return PairsData(str(path), read_pairs(path))

    def arrays(self, dataset: PairsData):
        """The validation texts, each query then each distinct positive; `extra`: the
        number of queries and each one's positive's row among the positives."""
        positives = sorted({p for _, p in dataset.pairs})
        row = {p: i for i, p in enumerate(positives)}
        x = packed_arrays(self.preprocessor, [q for q, _ in dataset.pairs] + positives)
        targets = np.array([row[p] for _, p in dataset.pairs], np.int64)
        return x, targets, (len(dataset.pairs), targets)

    def training_arrays(self, dataset: PairsData, seed: int):
        """`[pairs, 2, length]` arrays (query, positive); the targets `[pairs, 2]` are the
        texts' ids (1 + index among the distinct texts), which only the packed loss reads."""
        queries = packed_arrays(self.preprocessor, [q for q, _ in dataset.pairs])
        positives = packed_arrays(self.preprocessor, [p for _, p in dataset.pairs])
        x = {key: np.stack([queries[key], positives[key]], axis=1) for key in queries}
        texts = {
            text: i + 1 for i, text in enumerate(sorted({t for p in dataset.pairs for t in p}))
        }
        return x, np.array([[texts[q], texts[p]] for q, p in dataset.pairs], np.int32)

    def training_rows(self, batch_size: int) -> int:
        if batch_size < 2:
            raise ValueError(
                f"--batch-size must be >= 2 for in-batch negatives. Received: {batch_size}"
            )
        return batch_size

    def training_schedule(self, dataset, lengths, rows, sequence_length, epochs, bucketing, seed):
        """Batches of pairs with no text twice in a batch, drawn anew each epoch."""
        try:
            return DistinctBatchSchedule(
                dataset.pairs, lengths, rows, seed, epochs, sequence_length, bucketing
            )
        except ValueError as error:
            raise ValueError(f"--train {dataset.path}: {error}") from None

    def training_model(self, model):
        return build_contrastive_trainer(model, self.scale)

    def packed_training_model(self, model):
        return build_packed_contrastive_trainer(model, self.scale)

    def loss(self, dataset):
        return in_batch_negatives_loss()

    def decode(self, output, label_names):
        return np.asarray(output, np.float32)

    def predict(self, dataset, outputs, extra):
        """The rank of each query's positive among all distinct positives (1 = first)."""
        count, targets = extra
        vectors = np.asarray(outputs, np.float32)
        return retrieval_ranks(vectors[:count], vectors[count:], targets)

    def metrics(self, dataset, predictions, warn=True):
        return retrieval_scores(predictions)

    def write_predictions(self, dataset, predictions, path):
        return []  # the embedder writes no prediction file (`spec.prediction_file` is None)

    def report(self, train, validation, results, run):
        """`before` and `after` (the kept weights') retrieval, counts, the history."""
        record = {
            "before": run["before"],
            "after": results,
            "train_pairs": len(train.pairs),
            "validation_pairs": len(validation.pairs),
            "steps": run["steps"],
            "kept_epoch": run["kept_epoch"],
            "history": run["history"],
        }
        return record, record


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertEmbedder(TaskModel):
    """Sentence embeddings: `encode(texts)` gives L2-normalised vectors (by default; as
    `kbz embed` computes them, pooled as the preset records, e.g. a sentence-transformers
    model's mean pooling).

    `fit(x=(queries, positives))` trains with in-batch negatives as `kbz finetune embed`
    does (no `y`); `evaluate(x=(queries, positives))` gives retrieval recall@1, recall@5
    and MRR of each query's positive among all the positives.

    >>> embedder = kbz.BertEmbedder.from_preset("all_minilm_l6_v2")
    >>> vectors = embedder.encode(["A sentence.", "Another one."])  # float32 [2, 384]
    """

    task_name = EMBEDDER.name
    behaviour = EmbeddingTask

    def raw_data(self, x, y=None):
        return pairs_data(x)

    def predict_inputs(self, x) -> dict:
        texts, second = texts_or_pairs(x)
        if second is not None:
            raise ValueError("`x` must be a list of texts to embed (one vector per text).")
        return packed_arrays(self.preprocessor, texts)

    def encode(self, texts, batch_size=None, packing="auto") -> np.ndarray:
        """float32 `[len(texts), hidden]` vectors in the order of `texts`; `packing` (True,
        False, or "auto": where it saves positions) several texts to a row, each pooled over
        its own tokens (`training.packed_prediction`), else length buckets: the same vectors."""
        vectors = self.predict(texts, batch_size=batch_size, packing=packing)
        return np.asarray(vectors, np.float32)
