"""The reranker: `BertReranker` (the task model) and its behaviour: (query, passage) pairs
scored by a cross-encoder, ranked per query.

Reads `query<TAB>passage<TAB>label` files (`data.read_ranking_tsv`): the training file as
given, plus hard negatives mined by an embedder when `negatives_from` names one
(`hard_negatives`); a validation file must give each query a relevant passage; candidates to
score may have no label column. Pairs are packed `[CLS] query [SEP] passage [SEP]`; the
score of a pair is the model's relevance logit (ranking by it equals ranking by its sigmoid,
without the sigmoid's float32 ties near 1). Metrics group the pairs by query
(`ranking_metrics`: MRR@10, recall@1, recall@k). Two files are written: the pairs in input
order with a `score` column (`kbz predict rerank`'s contract), and beside it `*.ranked.tsv`,
each query's candidates from the best score down.

Training is listwise by default (`ranking_loss="listwise"`): the pairs are regrouped into query
groups (`query_groups`: each relevant pair, then `num_negatives` negatives of its query),
`tasks.build_group_scorer` scores a group's pairs with the reranker and `tasks.listwise_loss`
is the softmax cross-entropy of the relevant one, so a bias shared by all pairs (the label
prior that pointwise training learns first) teaches nothing. `--batch-size` still counts
pairs: a batch is `batch_size / (1 + num_negatives)` groups. `ranking_loss="pointwise"` trains the
pairs as they are with sigmoid cross-entropy (`tasks.reranker_loss`). The model saved and
served is the pair scorer either way.

On packed rows (`fit(packing=True)`, `--packing`) pointwise pairs pack as the classifier's
examples (`packed_encoder.build_packed_classifier`, each read at its `[CLS]`); listwise, the
unit packed is the query group, its pairs one after the other in one row of up to
`1 + num_negatives` times `--sequence-length` tokens (as the embedder packs its pairs), so
a group's scores are all in one batch; `packed_encoder.build_packed_group_scorer` gives them
in the group's order to `listwise_loss`. "auto" does not pack the reranker: passages fill
most of a row already, so packing saves little padding, while attention over a group's row
(up to four pairs long) costs far more than over each pair's own; an epoch ran slower packed
(`benchmarks/RESULTS.md`, "Sequence packing"), and rows of only twice the length would not
hold most groups of a query and three passages.
"""

import dataclasses
import logging
from pathlib import Path

import keras
import numpy as np

from keras_bert_zoo import ranking_metrics
from keras_bert_zoo.data.rerank_reader import RankingData, RankingPair, read_ranking_tsv
from keras_bert_zoo.finetuning.common import RAW_SOURCE, FinetuningTask
from keras_bert_zoo.finetuning.raw_data import column, ranking_data
from keras_bert_zoo.finetuning.task_model import TaskModel
from keras_bert_zoo.finetuning.truncation import full_rows, warn_truncated
from keras_bert_zoo.layers.common import check_positive_int
from keras_bert_zoo.packed_encoder import build_packed_classifier, build_packed_group_scorer
from keras_bert_zoo.task_graphs import build_group_scorer, listwise_loss, reranker_loss
from keras_bert_zoo.tasks.reranker.hard_negatives import (
    embedder_source,
    embedding_function,
    mine_hard_negatives,
)
from keras_bert_zoo.tasks.reranker.prediction_files import (
    ranked_path,
    warn_unanswered,
    write_scores,
)
from keras_bert_zoo.tasks.reranker.query_groups import query_groups
from keras_bert_zoo.tasks.reranker.spec import RERANKER
from keras_bert_zoo.tasks.reranker.stream import stream_scores
from keras_bert_zoo.tokenization.arrays import packed_arrays, token_lists

logger = logging.getLogger(__name__)
LABELS = ["0", "1"]  # irrelevant, relevant: the label vocabulary a validation file is read with
LOSSES = RERANKER.option("ranking_loss").choices


@dataclasses.dataclass
class RerankingTask(FinetuningTask):
    """Cross-encoder reranking of (query, passage) pairs, labels 1 (relevant) / 0.

    Args:
        ranking_loss: "listwise" (query groups, softmax cross-entropy) or "pointwise" (pairs,
            sigmoid cross-entropy); see the module docstring.
        negatives_from: an embedder (preset name or directory, or a `kbz finetune embed`
            run) that mines `num_negatives` hard negatives per training query from the
            training file's passages; None trains on the file's pairs alone.
        num_negatives: negatives mined per query, and listwise, per query group.
        top_k: the `k` of the `recall_at_<k>` metric (MRR is at 10, recall also at 1).
    """

    preprocessor: object
    ranking_loss: str = RERANKER.default("ranking_loss")
    negatives_from: str | None = RERANKER.default("negatives_from")
    num_negatives: int = RERANKER.default("num_negatives")
    top_k: int = RERANKER.default("top_k")
    spec = RERANKER
    sequence_outputs = False  # one logit per pair
    packs = True  # each pair is read at its [CLS]: packed pairs (or query groups) train it
    packs_by_default = False  # not faster than buckets: see the module docstring

    def __post_init__(self):
        if self.ranking_loss not in LOSSES:
            raise ValueError(
                f"`ranking_loss` (--ranking-loss) must be one of {list(LOSSES)}. "
                f"Received: ranking_loss={self.ranking_loss!r}"
            )
        check_positive_int("num_negatives", self.num_negatives)
        check_positive_int("top_k", self.top_k)
        self._unmined = None  # the training file, until its negatives are mined

    def read(self, path, label_names=None, labels_optional=False) -> RankingData:
        """The training file (`label_names` None), a validation file (read with the training
        labels: each query needs a relevant passage), or with `labels_optional` candidates
        to score."""
        validation = label_names is not None and not labels_optional
        dataset = read_ranking_tsv(path, labels_optional, require_relevant=validation)
        if label_names is None and not labels_optional:
            self.check_training(dataset)
        return dataset

    def check_training(self, dataset: RankingData) -> None:
        """Both labels, or positives and an embedder to mine their negatives."""
        present = set(dataset.labels.tolist())
        if 1 not in present:
            raise ValueError(
                f"{dataset.path}: no pair is labelled 1, so there is nothing relevant to learn. "
                "Give each training query its relevant passage(s), labelled 1."
            )
        if self.negatives_from:
            embedder_source(self.negatives_from)  # a bad name stops here, before any work
            self._unmined = dataset
        elif 0 not in present:
            raise ValueError(
                f"{dataset.path}: every pair is labelled 1. Add irrelevant passages labelled 0, "
                "or mine them: --negatives-from EMBEDDER (e.g. all_minilm_l6_v2)."
            )

    def _with_negatives(self, dataset: RankingData) -> RankingData:
        """A training file's pairs and its mined negatives, mined once (after every file was
        read, so a bad file stops the run before the embedder loads)."""
        if dataset is self._unmined:
            embed = embedding_function(self.negatives_from)
            dataset.pairs = mine_hard_negatives(dataset, embed, self.num_negatives).pairs
            self._unmined = None
        return dataset

    def arrays(self, dataset: RankingData):
        dataset = self._with_negatives(dataset)
        passages = [p.passage for p in dataset.pairs]
        x = packed_arrays(self.preprocessor, dataset.queries, passages)
        self._warn_truncated(dataset, full_rows(x["padding_mask"]))
        return x, dataset.labels.astype(np.float32), None

    def _warn_truncated(self, dataset: RankingData, rows) -> None:
        """Counts the tokens of the pairs that fill every position (only those)."""
        lengths = self.token_counts([dataset.pairs[i] for i in rows])
        length = self.preprocessor.sequence_length
        warn_truncated(dataset.path, "pairs", lengths, len(dataset.pairs), length)

    def token_counts(self, pairs: list) -> dict:
        """`{line: tokens}` of `pairs` packed whole (`[CLS] query [SEP] passage [SEP]`)."""
        counts = np.full(len(pairs), 3)  # [CLS] and two [SEP]
        for texts in ([p.query for p in pairs], [p.passage for p in pairs]):
            if texts:
                pieces = token_lists(self.preprocessor.tokenizer, texts)
                counts += np.array([len(ids) for ids in pieces])
        return {p.line: int(c) for p, c in zip(pairs, counts, strict=True)}

    def training_arrays(self, dataset: RankingData, seed: int):
        """Listwise: `[groups, 1 + num_negatives, seq]` arrays and target 0 (the relevant
        pair) per group; pointwise: the pairs and their labels."""
        x, y, _ = self.arrays(dataset)
        if self.ranking_loss == "pointwise":
            return x, y
        groups = query_groups(dataset.pairs, self.num_negatives, seed)
        if groups.without_negatives or groups.without_relevant:
            logger.warning(
                "%s: %d queries have no negative and %d no relevant passage: no query group "
                "trains on them (--ranking-loss listwise; --negatives-from mines negatives).",
                dataset.path,
                groups.without_negatives,
                groups.without_relevant,
            )
        if not len(groups.indices):
            raise ValueError(
                f"{dataset.path}: no query has both a relevant passage and a negative, so "
                "there is no query group to train on. Add negatives labelled 0, mine them "
                "(--negatives-from EMBEDDER), or pass --ranking-loss pointwise."
            )
        logger.info(
            "%d query groups of %d pairs (1 relevant, %d negatives).",
            len(groups.indices),
            self.training_group_size(),
            self.num_negatives,
        )
        grouped = {key: value[groups.indices] for key, value in x.items()}
        return grouped, np.zeros(len(groups.indices), np.int32)

    def training_group_size(self) -> int:
        return 1 + self.num_negatives if self.ranking_loss == "listwise" else 1

    def training_rows(self, batch_size: int) -> int:
        size = self.training_group_size()
        if batch_size % size:
            raise ValueError(
                f"--batch-size {batch_size} must be a multiple of {size}, the pairs of a query "
                f"group (1 relevant + --num-negatives {self.num_negatives}) with --ranking-loss "
                f"listwise: --batch-size counts pairs. Pass --batch-size "
                f"{max(size, batch_size // size * size)}, or --ranking-loss pointwise."
            )
        return batch_size // size

    def training_model(self, model):
        if self.ranking_loss == "pointwise":
            return model
        return build_group_scorer(model, self.training_group_size())

    def packed_training_model(self, model):
        if self.ranking_loss == "pointwise":
            return build_packed_classifier(model, "packed_reranker", head="reranker_head")
        return build_packed_group_scorer(model, self.training_group_size())

    def label_names(self, dataset):
        return list(LABELS)

    def task_kwargs(self, dataset):
        return {}

    def loss(self, dataset):
        return listwise_loss() if self.ranking_loss == "listwise" else reranker_loss()

    def raw_dataset(self, inputs: list, label_names):
        """`(query, passage)` pairs."""
        pairs = [RankingPair(str(q), str(p), None, n) for n, (q, p) in enumerate(inputs, 1)]
        return RankingData(RAW_SOURCE, pairs)

    def predict(self, dataset, outputs, extra):
        """Each pair's score: its relevance logit."""
        return np.asarray(outputs, np.float64).reshape(-1)

    def metrics(self, dataset, predictions, warn=True):
        """MRR@10, recall@1 and recall@`top_k` over the queries, fractions; {} unlabelled."""
        if not dataset.labelled:
            return {}
        labels = dataset.labels
        if warn:
            relevant = {p.query for p in dataset.pairs if p.label == 1}
            warn_unanswered(dataset.path, len(set(dataset.queries) - relevant))
        return ranking_metrics.ranking_scores(dataset.queries, labels, predictions, self.top_k)

    @staticmethod
    def prediction_paths(path) -> list:
        return [Path(path), ranked_path(path)]

    def write_predictions(self, dataset, predictions, path):
        return write_scores(path, dataset, np.asarray(predictions))

    def streams(self, predictor, input) -> bool:
        return True  # labelled or not: its scores need no label names

    def stream_predictions(self, predictor, input, output, window, restart, identity):
        ranked = ranked_path(output)
        return stream_scores(self, predictor, input, output, window, restart, identity, ranked)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertReranker(TaskModel):
    """Cross-encoder reranker: one relevance score per (query, passage) pair.

    `fit(x=(queries, passages), y=labels)` (1 relevant, 0 not) trains as `kbz finetune
    rerank` does (listwise query groups by default); `score(queries, passages)` gives one
    score per pair, `rank(query, passages)` the passages best first.

    >>> reranker = kbz.BertReranker.from_preset("all_minilm_l6_v2")
    >>> reranker.rank("capital of France", ["Paris is the capital.", "Lyon is a city."])
    [('Paris is the capital.', 4.1), ('Lyon is a city.', -2.3)]
    """

    task_name = RERANKER.name
    behaviour = RerankingTask

    def raw_data(self, x, y=None):
        return ranking_data(x, y)

    def labelled(self, dataset):
        return dataset.labelled

    def score(self, queries, passages, batch_size=None) -> np.ndarray:
        """The relevance score (a logit) of each (query, passage) pair, float32 `[pairs]`."""
        outputs = self.predict((queries, passages), batch_size=batch_size)
        return np.asarray(outputs, np.float32).reshape(-1)

    def rank(self, query: str, passages, batch_size=None) -> list:
        """`(passage, score)` of each passage for `query`, the best first."""
        passages = column(passages, "passages")
        scores = self.score([query] * len(passages), passages, batch_size)
        order = np.argsort(-scores, kind="stable")
        return [(passages[i], float(scores[i])) for i in order]
