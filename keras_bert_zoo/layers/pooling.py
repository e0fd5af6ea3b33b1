"""Sentence pooling: token vectors `[batch, seq, hidden]` to one vector per sentence.

The modes are sentence-transformers' (`sentence_transformers.models.Pooling`), computed the
same way so converted sentence-embedding checkpoints (all-MiniLM-L6-v2, BGE, E5) give their
published vectors: "mean" is the sum of the real tokens' vectors divided by
`clamp(number of real tokens, 1e-9)`, "max" the maximum over real tokens (padding set to
-1e9 first), "cls" the first token. Optional L2 normalisation divides by
`max(norm, 1e-12)`, as `torch.nn.functional.normalize`. `keras.ops` only, computed in
float32 under mixed precision.
"""

import keras
from keras import ops

from keras_bert_zoo.choices import POOLING_MODES
from keras_bert_zoo.layers.common import MASK_BIAS

MASK_CLAMP = 1e-9  # sentence-transformers' clamp of the token count (all-padding rows: 0, not NaN)
NORM_EPSILON = 1e-12  # torch.nn.functional.normalize's default eps


def check_scale(scale) -> float:
    """`scale` as a float if it is a positive number, else a Keras-style error."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale <= 0:
        raise ValueError(f"`scale` must be a positive number. Received: scale={scale!r}")
    return float(scale)


def check_pooling(pooling) -> str:
    """Returns `pooling` if it is one of `POOLING_MODES`, else a Keras-style error."""
    if pooling not in POOLING_MODES:
        raise ValueError(
            f"`pooling` must be one of {list(POOLING_MODES)}. Received: pooling={pooling!r}"
        )
    return pooling


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SentencePooling(keras.layers.Layer):
    """Pools a sequence over its real tokens into `[batch, hidden]` float32 vectors.

    Args:
        pooling: "mean" (masked mean), "cls" (first token) or "max" (masked max).
        normalize: divide each vector by its L2 norm (cosine similarity = dot product).

    Call args:
        sequence_output: `[batch, seq, hidden]` float.
        padding_mask: `[batch, seq]` int, 1 for real tokens, 0 for padding.

    >>> pool = kbz.layers.SentencePooling("mean", normalize=True)
    >>> vectors = pool(encoder(inputs)["sequence_output"], inputs["padding_mask"])
    """

    def __init__(self, pooling: str = "mean", normalize: bool = True, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.pooling = check_pooling(pooling)
        if not isinstance(normalize, bool):
            raise ValueError(
                f"`normalize` must be True or False. Received: normalize={normalize!r}"
            )
        self.normalize = normalize

    def call(self, sequence_output, padding_mask):
        sequence = ops.cast(sequence_output, "float32")
        mask = ops.expand_dims(ops.cast(padding_mask, "float32"), -1)  # [batch, seq, 1]
        if self.pooling == "cls":
            pooled = sequence[:, 0, :]
        elif self.pooling == "max":
            pooled = ops.max(sequence * mask + (1.0 - mask) * MASK_BIAS, axis=1)
        else:
            total = ops.sum(sequence * mask, axis=1)
            pooled = total / ops.maximum(ops.sum(mask, axis=1), MASK_CLAMP)
        if self.normalize:
            norm = ops.sqrt(ops.sum(ops.square(pooled), axis=-1, keepdims=True))
            pooled = pooled / ops.maximum(norm, NORM_EPSILON)
        return pooled

    def compute_output_shape(self, sequence_output_shape, padding_mask_shape=None):
        return (sequence_output_shape[0], sequence_output_shape[2])

    def get_config(self):
        config = super().get_config()
        config.update(pooling=self.pooling, normalize=self.normalize)
        return config


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class InBatchSimilarity(keras.layers.Layer):
    """`scale * cos(query_i, positive_j)` for every pair of a batch: `[batch, batch]` logits.

    With labels `i` for row `i`, softmax cross-entropy on these logits is the in-batch
    negatives loss (sentence-transformers' MultipleNegativesRankingLoss, scale 20): each
    query's own positive against every other query's positive.
    """

    def __init__(self, scale: float = 20.0, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.scale = check_scale(scale)

    def call(self, queries, positives):
        return in_batch_similarity(queries, positives, self.scale)

    def compute_output_shape(self, queries_shape, positives_shape):
        return (queries_shape[0], positives_shape[0])

    def get_config(self):
        config = super().get_config()
        config.update(scale=self.scale)
        return config


def in_batch_similarity(queries, positives, scale: float):
    """`scale * cos(queries[i], positives[j])`: `InBatchSimilarity`'s `[batch, batch]`
    logits (also `packed_encoder.PackedPairSimilarity`'s)."""

    def unit(x):
        x = ops.cast(x, "float32")
        norm = ops.sqrt(ops.sum(ops.square(x), axis=-1, keepdims=True))
        return x / ops.maximum(norm, NORM_EPSILON)

    return scale * ops.matmul(unit(queries), ops.transpose(unit(positives)))
