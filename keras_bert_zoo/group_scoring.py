"""Training a reranker on query groups: `build_group_scorer` scores each group's pairs with
the reranker's own weights, `listwise_loss` is the softmax cross-entropy of the relevant pair
(first) against its group. Exported from `kbz.tasks` beside `build_reranker`.
"""

import keras

from keras_bert_zoo.layers.common import check_positive_int


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
    """`[groups * group_size, 1]` logits -> `[groups, group_size]`: `MergeGroups` undone."""

    def __init__(self, group_size: int, **kwargs):
        super().__init__(**kwargs)
        self.group_size = check_positive_int("group_size", group_size)

    def call(self, x):
        return keras.ops.reshape(x, (-1, self.group_size))

    def compute_output_shape(self, shape):
        groups = None if shape[0] is None else shape[0] // self.group_size
        return (groups, self.group_size)

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
