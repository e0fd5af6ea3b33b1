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
"""

import keras
from keras import ops

from keras_bert_zoo.encoder import find_encoder

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


def build_packed_classifier(classifier: keras.Model, name: str = "packed_classifier"):
    """The training model of a classifier (`kbz.build_classifier`) on packed rows, sharing
    its layers: `PACKED_INPUTS` and `example_start` (`[rows, slots]`: each example's `[CLS]`
    in its row, `kbz.training.packed_batches`) to `[rows, slots, classes]` logits, each
    example's pooler and head as in the classifier (its last block run at every position
    here, where the classifier runs it at `[CLS]` only: equal values)."""
    encoder = find_encoder(classifier)
    inputs = {key: keras.Input(shape=(None,), dtype="int32", name=key) for key in PACKED_INPUTS}
    starts = keras.Input(shape=(None,), dtype="int32", name="example_start")
    x = _packed_sequence_output(encoder, inputs)
    x = PackedFirstTokens(name="packed_first_tokens")(x, starts)
    x = encoder.get_layer("pooled_dense")(x)
    logits = classifier.get_layer("classifier_head")(classifier.get_layer("classifier_dropout")(x))
    return keras.Model(inputs={**inputs, "example_start": starts}, outputs=logits, name=name)


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
