"""Training on groups of sequences, through a wrapper around the task model (its weights).

- A reranker on query groups: `build_group_scorer` scores each group's pairs with the
  reranker's own weights, `listwise_loss` is the softmax cross-entropy of the relevant pair
  (first) against its group.
- An embedder on (query, positive) pairs with in-batch negatives: `build_contrastive_trainer`
  embeds both texts of each pair with the embedder and gives the `[batch, batch]` scaled
  cosine similarities, `in_batch_negatives_loss` the cross-entropy of each query's own
  positive (sentence-transformers' MultipleNegativesRankingLoss).

Exported from `kbz.tasks` beside `build_reranker` and `build_embedder`.
"""

import keras
from keras import ops

from keras_bert_zoo.layers.common import MASK_BIAS, check_positive_int
from keras_bert_zoo.layers.pooling import InBatchSimilarity


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MergeGroups(keras.layers.Layer):
    """`[groups, group_size, length]` -> `[groups * group_size, length]`, groups in order."""

    def call(self, x):
        return keras.ops.reshape(x, (-1, keras.ops.shape(x)[-1]))

    def compute_output_shape(self, shape):
        rows = None if None in shape[:2] else shape[0] * shape[1]
        return (rows, shape[-1])


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SplitGroups(keras.layers.Layer):
    """`[groups * group_size, 1]` logits -> `[groups, group_size]`: `MergeGroups` undone;
    packed rows' `[rows, groups * group_size, 1]` -> `[rows, groups, group_size]`."""

    def __init__(self, group_size: int, **kwargs):
        super().__init__(**kwargs)
        self.group_size = check_positive_int("group_size", group_size)

    def call(self, x):
        return keras.ops.reshape(x, (*keras.ops.shape(x)[:-2], -1, self.group_size))

    def compute_output_shape(self, shape):
        *outer, places, _ = shape
        groups = None if places is None else places // self.group_size
        return (*outer, groups, self.group_size)

    def get_config(self):
        return {**super().get_config(), "group_size": self.group_size}


def build_group_scorer(
    reranker: keras.Model, group_size: int, name: str = "group_scorer"
) -> keras.Model:
    """`reranker`'s logits of query groups: inputs `[groups, group_size, length]`, outputs
    `[groups, group_size]`, every pair scored by `reranker` itself (its weights, no new
    ones). Train it with `listwise_loss()`, the relevant pair first in each group; save and
    serve `reranker`.

    >>> trainer = kbz.tasks.build_group_scorer(reranker, group_size=4)
    >>> trainer.compile("adam", kbz.tasks.listwise_loss())
    """
    check_positive_int("group_size", group_size)
    inputs = {
        key: keras.Input(shape=(group_size, None), dtype=tensor.dtype, name=key)
        for key, tensor in reranker.input.items()
    }
    merge = MergeGroups(name="merge_groups")
    logits = reranker({key: merge(value) for key, value in inputs.items()})
    logits = SplitGroups(group_size, name="group_logits", dtype="float32")(logits)
    return keras.Model(inputs, logits, name=name)


def listwise_loss() -> keras.losses.Loss:
    """Softmax cross-entropy over each query group's logits with the relevant pair as the
    target (0: first), the localized contrastive estimation of Gao et al. 2021 ("Rethink
    Training of BERT Rerankers in Multi-Stage Retrieval Pipeline"); a bias shared by the
    pairs cancels, so only their order is learnt. Targets are the index of the relevant pair.
    """
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def build_contrastive_trainer(
    embedder: keras.Model, scale: float = 20.0, name: str = "contrastive_trainer"
) -> keras.Model:
    """`embedder`'s in-batch similarities of (query, positive) pairs: inputs `[pairs, 2,
    length]` (the query, then its positive), outputs `[pairs, pairs]` logits, `scale` x the
    cosine of query i and positive j, through `embedder` itself (no weights of its own).
    Train it with `in_batch_negatives_loss()`; save and serve `embedder`.

    >>> trainer = kbz.tasks.build_contrastive_trainer(embedder)
    >>> trainer.compile("adam", kbz.tasks.in_batch_negatives_loss())
    """
    inputs = {
        key: keras.Input(shape=(2, None), dtype=tensor.dtype, name=key)
        for key, tensor in embedder.input.items()
    }
    merge = MergeGroups(name="merge_pairs")
    vectors = embedder({key: merge(value) for key, value in inputs.items()})
    pairs = ops.reshape(vectors, (-1, 2, ops.shape(vectors)[-1]))
    logits = InBatchSimilarity(scale, name="in_batch_similarity")(pairs[:, 0], pairs[:, 1])
    return keras.Model(inputs, logits, name=name)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class InBatchNegativesLoss(keras.losses.Loss):
    """Softmax cross-entropy of `[batch, batch]` logits with target i for row i: each
    query's own positive against the batch's other positives. The targets are the rows'
    positions, made here, so the `y` given is ignored (a row's target never depends on
    where the batch schedule put it); under `tf.distribute` each replica's batch is its own.
    Packed pairs' logits (`[rows, slots, rows * slots]`, `packed_encoder`) have one target
    per place, its position among the batch's places, and `y` is read: each place's query
    and positive text ids (`[rows, slots, 2]`, 1 + the text's index), so another pair
    sharing a text is not a negative (packed batches are drawn without
    `distinct_batches`' check; where no text repeats this changes nothing).
    """

    def call(self, y_true, y_pred):
        shape = ops.shape(y_pred)
        targets = ops.reshape(ops.arange(shape[-1], dtype="int32"), shape[:-1])
        if len(shape) == 3:  # packed pairs: mask the other places sharing a text
            ids = ops.reshape(ops.cast(y_true, "int32"), (-1, 2))
            same = ops.any(ops.equal(ids[:, None, :], ids[None, :, :]), axis=-1)
            place = ops.arange(shape[-1], dtype="int32")
            others = ops.not_equal(place[:, None], place[None, :])
            masked = ops.where(
                ops.logical_and(same, others),
                MASK_BIAS,
                ops.reshape(y_pred, (shape[-1], shape[-1])),
            )
            y_pred = ops.reshape(masked, shape)
        return keras.losses.sparse_categorical_crossentropy(targets, y_pred, from_logits=True)


def in_batch_negatives_loss() -> keras.losses.Loss:
    """`InBatchNegativesLoss`: sentence-transformers' MultipleNegativesRankingLoss on the
    logits of `build_contrastive_trainer`."""
    return InBatchNegativesLoss(name="in_batch_negatives")
