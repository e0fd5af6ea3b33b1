"""Packed rows through a BERT encoder: several examples per row, attention kept to each.

`build_packed_encoder(encoder)` wires the layers (and weights) of a `kbz.build_encoder`
model into a second functional model that takes packed rows (`kbz.training.packing.pack`):
keras-hub's `token_ids`, `segment_ids`, `padding_mask`, plus `sequence_ids` (1, 2, ... per
example in the row, 0 for padding) and `position_ids` (restarting at 0 per example). Each
token attends only to tokens of its own example (a block-diagonal `[batch, queries, keys]`
mask, which the fused and explicit attention both take), so each example's outputs equal
its unpacked ones within float32 rounding. The encoder itself, its saved models, presets
and exports are unchanged; the packed model shares its weights, so training it trains them.

`packed_first_tokens` and `packed_mean_pooling` map the packed `sequence_output` back to one
vector per example (the classifier's `[CLS]`, the embedder's mean over real tokens); a
tagger reads it per token where it is (`build_packed_tagger`).
`build_packed_classifier` (also a reranker's pairs), `build_packed_group_scorer` (a
reranker's query groups), `build_packed_tagger` and `build_packed_contrastive_trainer` are
the task models' training models on packed rows.
"""

import keras
from keras import ops

from keras_bert_zoo.encoder import find_encoder
from keras_bert_zoo.group_scoring import SplitGroups
from keras_bert_zoo.layers.common import MASK_BIAS
from keras_bert_zoo.layers.pooling import (
    MASK_CLAMP,
    NORM_EPSILON,
    check_pooling,
    check_scale,
    in_batch_similarity,
)

PACKED_INPUTS = ("token_ids", "segment_ids", "padding_mask", "sequence_ids", "position_ids")


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class PackedAttentionMask(keras.layers.Layer):
    """`[batch, length]` sequence ids to a `[batch, length, length]` int mask: 1 where query
    and key belong to the same example. Padding (id 0) attends to padding only, so no query
    row is fully masked (a fully masked row makes fused kernels return NaN)."""

    def call(self, sequence_ids):
        same = ops.equal(ops.expand_dims(sequence_ids, 2), ops.expand_dims(sequence_ids, 1))
        return ops.cast(same, "int32")

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1], input_shape[1])


def build_packed_encoder(encoder: keras.Model, name: str = "packed_encoder") -> keras.Model:
    """A model over packed rows sharing `encoder`'s layers; outputs `sequence_output`.

    >>> enc = kbz.build_encoder(100, 1, 2, 16, 32)
    >>> packed = kbz.packed_encoder.build_packed_encoder(enc)
    >>> ids = keras.ops.convert_to_tensor([[2, 5, 3, 2, 3, 0]])
    >>> seq = keras.ops.convert_to_tensor([[1, 1, 1, 2, 2, 0]])
    >>> pos = keras.ops.convert_to_tensor([[0, 1, 2, 0, 1, 0]])
    >>> out = packed({"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": seq > 0,
    ...               "sequence_ids": seq, "position_ids": pos})
    >>> tuple(out["sequence_output"].shape)
    (1, 6, 16)
    """
    encoder = find_encoder(encoder)
    inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in PACKED_INPUTS}
    x = _packed_sequence_output(encoder, inputs)
    return keras.Model(inputs=inputs, outputs={"sequence_output": x}, name=name)


def _packed_sequence_output(encoder, inputs):
    layer = encoder.get_layer
    token = layer("token_embedding")(inputs["token_ids"])
    position = layer("position_embedding")(token, position_ids=inputs["position_ids"])
    segment = layer("segment_embedding")(inputs["segment_ids"])
    x = layer("embeddings_add")([token, position, segment])
    x = layer("embeddings_dropout")(layer("embeddings_layer_norm")(x))
    mask = PackedAttentionMask(name="packed_attention_mask")(inputs["sequence_ids"])
    blocks = [b for b in encoder.layers if b.name.startswith("transformer_layer_")]
    for block in sorted(blocks, key=lambda b: int(b.name.rsplit("_", 1)[1])):
        x = block(x, padding_mask=mask)
    return x


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class PackedFirstTokens(keras.layers.Layer):
    """`[rows, length, hidden]` packed outputs and `[rows, slots]` `[CLS]` positions in each
    row to `[rows, slots, hidden]`: the first token of each example placed in the row."""

    def call(self, sequence_output, example_start):
        rows = ops.shape(sequence_output)[0]
        row = ops.broadcast_to(ops.arange(rows, dtype="int32")[:, None], ops.shape(example_start))
        first = packed_first_tokens(sequence_output, row, ops.cast(example_start, "int32"))
        return ops.reshape(first, (rows, -1, ops.shape(sequence_output)[2]))

    def compute_output_shape(self, sequence_output_shape, example_start_shape):
        return (sequence_output_shape[0], example_start_shape[1], sequence_output_shape[2])


def build_packed_classifier(
    classifier: keras.Model, name: str = "packed_classifier", head: str = "classifier_head"
):
    """The training model of a classifier (`kbz.build_classifier`) on packed rows, sharing
    its layers: `PACKED_INPUTS` and `example_start` (`[rows, slots]`: each example's `[CLS]`
    in its row, `kbz.training.packed_batches`) to `[rows, slots, classes]` logits, each
    example's pooler and head as in the classifier (its last block run at every position
    here, where the classifier runs it at `[CLS]` only: equal values). `head` names the
    head's dense layer (`<prefix>_head`, after `<prefix>_dropout`): a reranker's
    (`kbz.build_reranker`, "reranker_head") gives each pair's relevance logit, `[rows, slots,
    1]`."""
    encoder = find_encoder(classifier)
    inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in PACKED_INPUTS}
    starts = keras.Input(shape=(None,), dtype="int32", name="example_start")
    x = _packed_sequence_output(encoder, inputs)
    x = PackedFirstTokens(name="packed_first_tokens")(x, starts)
    x = encoder.get_layer("pooled_dense")(x)
    dropout = classifier.get_layer(head.removesuffix("_head") + "_dropout")
    logits = classifier.get_layer(head)(dropout(x))
    return keras.Model(inputs={**inputs, "example_start": starts}, outputs=logits, name=name)


def build_packed_group_scorer(
    reranker: keras.Model, group_size: int, name: str = "packed_group_scorer"
) -> keras.Model:
    """The training model of a reranker (`kbz.build_reranker`) on packed query groups,
    sharing its layers: `PACKED_INPUTS` and `example_start` (`[rows, slots * group_size]`,
    each pair's `[CLS]`; a group's pairs one after the other in one row) to `[rows, slots,
    group_size]` logits in each group's order, the packed counterpart of
    `kbz.tasks.build_group_scorer`; train it with `listwise_loss()` averaged over the
    groups (`sample_weight`)."""
    scorer = build_packed_classifier(reranker, name, head="reranker_head")
    logits = SplitGroups(group_size, name="group_logits", dtype="float32")(scorer.output)
    return keras.Model(scorer.input, logits, name=name)


def build_packed_tagger(tagger: keras.Model, name: str = "packed_tagger"):
    """The training model of a tagger (`kbz.build_tagger`) on packed rows, sharing its
    layers: `PACKED_INPUTS` to `[rows, length, tags]` logits, each token's as in the tagger
    (its example's tokens at their places in the row, `kbz.training.packed_batches`)."""
    encoder = find_encoder(tagger)
    inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in PACKED_INPUTS}
    x = _packed_sequence_output(encoder, inputs)
    logits = tagger.get_layer("tagger_head")(tagger.get_layer("tagger_dropout")(x))
    return keras.Model(inputs=inputs, outputs=logits, name=name)


def packed_first_tokens(sequence_output, example_row, example_start):
    """`[examples, hidden]`: each example's first token (`[CLS]`) from packed rows."""
    length, hidden = ops.shape(sequence_output)[1], ops.shape(sequence_output)[2]
    flat = ops.reshape(sequence_output, (-1, hidden))
    return ops.take(flat, example_row * length + example_start, axis=0)


def packed_mean_pooling(sequence_output, sequence_ids, example_row, example_sequence):
    """`[examples, hidden]`: each example's mean over its real tokens (the embedder's
    pooling), in the order `kbz.training.packing.pack` was given the examples."""
    rows, length, hidden = (ops.shape(sequence_output)[i] for i in range(3))
    # one segment per (row, sequence id); at most `length` examples (and padding) per row
    segment = ops.reshape(ops.arange(rows, dtype="int32")[:, None] * (length + 1), (-1, 1))
    segment = ops.reshape(segment + sequence_ids, (-1,))
    total = rows * (length + 1)
    flat = ops.reshape(sequence_output, (-1, hidden))
    sums = ops.segment_sum(flat, segment, num_segments=total)
    counts = ops.segment_sum(ops.ones_like(segment, flat.dtype), segment, num_segments=total)
    wanted = example_row * (length + 1) + example_sequence
    return ops.take(sums, wanted, axis=0) / ops.take(counts, wanted, axis=0)[:, None]


def packed_pooling(sequence_output, sequence_ids, example_start, pooling: str = "mean"):
    """`([rows, places, hidden] float32 vectors, [rows, places] token counts)`: each text of
    packed rows (`[rows, length, hidden]` outputs, `[rows, length]` sequence ids, `[rows,
    places]` first tokens; place p is sequence p + 1) pooled over its own tokens as
    `layers.SentencePooling` pools ("mean", "cls" or "max"), through a one-hot `[rows,
    length, places]` membership (static shapes). An unused place counts 0 tokens."""
    places = ops.shape(example_start)[1]
    ids = ops.expand_dims(ops.cast(sequence_ids, "int32"), -1)
    member = ops.equal(ids, ops.arange(1, places + 1, dtype="int32"))  # [rows, length, places]
    counts = ops.sum(ops.cast(member, "float32"), axis=1)  # [rows, places]
    if pooling == "cls":  # each text's first token
        at = ops.arange(ops.shape(sequence_ids)[1], dtype="int32")[None, :, None]
        starts = ops.cast(example_start, "int32")[:, None, :]
        member = ops.logical_and(member, ops.equal(at, starts))
    sequence = ops.cast(sequence_output, "float32")
    if pooling == "max":  # [rows, length, places, hidden]: padding at MASK_BIAS
        inside = ops.expand_dims(member, -1)
        pooled = ops.max(ops.where(inside, ops.expand_dims(sequence, 2), MASK_BIAS), axis=1)
    else:
        pooled = ops.einsum("rlp,rlh->rph", ops.cast(member, "float32"), sequence)
        if pooling == "mean":
            pooled = pooled / ops.maximum(ops.expand_dims(counts, -1), MASK_CLAMP)
    return pooled, counts


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class PackedSentencePooling(keras.layers.Layer):
    """`layers.SentencePooling` of packed rows: `[rows, length, hidden]` outputs, their
    sequence ids and `[rows, slots]` first tokens to `[rows, slots, hidden]` vectors, each
    text's pooled over its own tokens (`packed_pooling`) and L2-normalised if `normalize`
    (an unused place's vector is 0)."""

    def __init__(self, pooling: str = "mean", normalize: bool = True, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.pooling, self.normalize = check_pooling(pooling), bool(normalize)

    def call(self, sequence_output, sequence_ids, example_start):
        pooled, _ = packed_pooling(sequence_output, sequence_ids, example_start, self.pooling)
        if self.normalize:
            norm = ops.sqrt(ops.sum(ops.square(pooled), axis=-1, keepdims=True))
            pooled = pooled / ops.maximum(norm, NORM_EPSILON)
        return pooled

    def compute_output_shape(self, sequence_output_shape, sequence_ids_shape, example_start_shape):
        return (*example_start_shape, sequence_output_shape[-1])

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling, "normalize": self.normalize}


def build_packed_embedder(embedder: keras.Model, name: str = "packed_embedder") -> keras.Model:
    """An embedder (`kbz.build_embedder`) on packed rows, sharing its layers: `PACKED_INPUTS`
    and `example_start` (`[rows, slots]`, each text's first token) to `[rows, slots,
    hidden]` vectors, each text's as the embedder gives it (its pooling and normalisation)."""
    pooling = embedder.get_layer("sentence_pooling")
    encoder = find_encoder(embedder)
    inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in PACKED_INPUTS}
    starts = keras.Input(shape=(None,), dtype="int32", name="example_start")
    x = _packed_sequence_output(encoder, inputs)
    vectors = PackedSentencePooling(pooling.pooling, pooling.normalize, name="packed_pooling")(
        x, inputs["sequence_ids"], starts
    )
    return keras.Model(inputs={**inputs, "example_start": starts}, outputs=vectors, name=name)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class PackedPairSimilarity(keras.layers.Layer):
    """In-batch logits of (query, positive) pairs packed into rows: `[rows, length, hidden]`
    packed outputs, their `[rows, length]` sequence ids and `[rows, 2 * slots]` first
    tokens (`example_start`; pair p of a row is its sequences 2p + 1, the query, and
    2p + 2, the positive) to `[rows, slots, rows * slots]` logits: `scale` x the cosine of
    each place's query and every place's positive (`layers.InBatchSimilarity`), each text
    pooled over its own tokens as `layers.SentencePooling` pools (`pooling` "mean", "cls"
    or "max"), through a one-hot `[rows, length, places]` membership (static shapes). The
    columns of unused places are masked, so a pair's softmax runs over the batch's
    positives as unpacked."""

    def __init__(self, scale: float = 20.0, pooling: str = "mean", **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.scale, self.pooling = check_scale(scale), check_pooling(pooling)

    def call(self, sequence_output, sequence_ids, example_start):
        rows, places = ops.shape(example_start)[0], ops.shape(example_start)[1]
        pooled, counts = packed_pooling(sequence_output, sequence_ids, example_start, self.pooling)
        empty = ops.expand_dims(counts == 0, -1)
        # an unused place's vector is a constant 1s: the norm's gradient at 0 is NaN
        pooled = ops.where(empty, 1.0, pooled)
        pairs = ops.reshape(pooled, (-1, 2, ops.shape(pooled)[-1]))  # [rows * slots, 2, hidden]
        logits = in_batch_similarity(pairs[:, 0], pairs[:, 1], self.scale)
        used = ops.reshape(counts[:, 1::2] > 0, (1, -1))  # the places holding a pair
        logits = ops.where(used, logits, MASK_BIAS)
        return ops.reshape(logits, (rows, places // 2, -1))

    def compute_output_shape(self, sequence_output_shape, sequence_ids_shape, example_start_shape):
        rows, places = example_start_shape[0], example_start_shape[1]
        slots = None if places is None else places // 2
        total = None if None in (rows, slots) else rows * slots
        return (rows, slots, total)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale, "pooling": self.pooling}


def build_packed_contrastive_trainer(
    embedder: keras.Model, scale: float = 20.0, name: str = "packed_contrastive_trainer"
) -> keras.Model:
    """The training model of an embedder (`kbz.build_embedder`) on packed (query, positive)
    pairs, sharing its layers: `PACKED_INPUTS` and `example_start` to `[rows, slots, rows *
    slots]` in-batch logits (`PackedPairSimilarity`, the embedder's pooling), the packed
    counterpart of `kbz.tasks.build_contrastive_trainer`; train it with
    `in_batch_negatives_loss()` averaged over the pairs (`sample_weight`)."""
    pooling = embedder.get_layer("sentence_pooling").pooling
    encoder = find_encoder(embedder)
    inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in PACKED_INPUTS}
    starts = keras.Input(shape=(None,), dtype="int32", name="example_start")
    x = _packed_sequence_output(encoder, inputs)
    logits = PackedPairSimilarity(scale, pooling, name="packed_pair_similarity")(
        x, inputs["sequence_ids"], starts
    )
    return keras.Model(inputs={**inputs, "example_start": starts}, outputs=logits, name=name)
