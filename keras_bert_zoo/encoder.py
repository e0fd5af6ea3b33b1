"""`build_encoder`: the BERT encoder as a functional Keras model.

Inputs are a dict of int32 `[batch, sequence]` tensors `token_ids`, `segment_ids`,
`padding_mask` (keras-hub's names); outputs are a dict with `sequence_output`
`[batch, sequence, hidden_dim]` and `pooled_output` `[batch, hidden_dim]` (tanh dense on the
first token, as the original BERT pooler). Any sequence length up to `max_sequence_length`.

Layer names are part of the weights contract (checkpoint converters are name tables over
them) and are tested: `token_embedding`, `position_embedding`, `segment_embedding`,
`embeddings_layer_norm`, `transformer_layer_{i}`, `pooled_dense`.
"""

import keras

from keras_bert_zoo.layers.attention import check_attention
from keras_bert_zoo.layers.common import (
    check_positive_int,
    check_rate,
    dense,
    initializer,
    layer_norm,
)
from keras_bert_zoo.layers.dropout import Dropout
from keras_bert_zoo.layers.embeddings import PositionEmbedding
from keras_bert_zoo.layers.encoder_block import FirstToken, TransformerEncoderBlock
from keras_bert_zoo.layers.input_checks import InputChecks
from keras_bert_zoo.model import BertModel


def build_encoder(
    vocabulary_size: int,
    num_layers: int,
    num_heads: int,
    hidden_dim: int,
    intermediate_dim: int,
    max_sequence_length: int = 512,
    num_segments: int = 2,
    dropout: float = 0.1,
    gelu_approximate: bool = False,
    attention_dropout: float | None = None,
    attention: str = "auto",
    dtype=None,
    name: str = "bert_encoder",
) -> keras.Model:
    """Builds a BERT encoder (embeddings, `num_layers` post-LN blocks, tanh pooler).

    Args:
        vocabulary_size: rows of the token embedding; must equal the vocabulary's size.
        num_layers: transformer blocks.
        num_heads: attention heads per block; must divide `hidden_dim`.
        hidden_dim: model width.
        intermediate_dim: feed-forward width (4 * hidden_dim in every BERT release).
        max_sequence_length: rows of the position embedding (512 in every BERT release).
        num_segments: rows of the segment embedding (2).
        dropout: dropout rate for embeddings, projections and (by default) attention
            probabilities.
        gelu_approximate: tanh-approximated GELU (Google's original checkpoints) instead of
            the exact erf GELU (Hugging Face "gelu").
        attention_dropout: dropout rate of the attention probabilities (Hugging Face's
            `attention_probs_dropout_prob`); None uses `dropout`, as BERT does.
        attention: how passes that drop no attention probability (prediction, evaluation,
            training with `attention_dropout` 0) compute attention: "fused"
            (`keras.ops.dot_product_attention`), "explicit" (softmax(QK^T) written out), or
            "auto" (the default): fused where the backend has a fused attention kernel
            (PyTorch, JAX on GPU and TPU), explicit elsewhere (TensorFlow, JAX on a CPU),
            `kbz.layers.attention.fused_kernel`. A pass that drops attention probabilities
            is explicit (the fused op cannot drop them). The same outputs within float32
            rounding; recorded in each block's config. `set_attention` changes it later.
        dtype: a dtype policy name such as "mixed_bfloat16"; None uses the global policy.
        name: the model's name.

    Example:
    >>> enc = kbz.build_encoder(vocabulary_size=100, num_layers=2, num_heads=2,
    ...                         hidden_dim=16, intermediate_dim=32)
    >>> ids = keras.ops.ones((3, 7), "int32")
    >>> out = enc({"token_ids": ids, "segment_ids": ids * 0, "padding_mask": ids})
    >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
    ((3, 7, 16), (3, 16))
    """
    for argument, value in dict(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        max_sequence_length=max_sequence_length,
        num_segments=num_segments,
    ).items():
        check_positive_int(argument, value)
    check_rate("dropout", dropout)
    if attention_dropout is not None:
        check_rate("attention_dropout", attention_dropout)
    check_attention(attention)
    if hidden_dim % num_heads:
        raise ValueError(
            "`num_heads` must divide `hidden_dim`. Received: "
            f"num_heads={num_heads}, hidden_dim={hidden_dim}"
        )
    inputs = {
        key: keras.Input(shape=(None,), dtype="int32", name=key)
        for key in ("token_ids", "segment_ids", "padding_mask")
    }
    token_ids, segment_ids, padding_mask = InputChecks(
        vocabulary_size, num_segments, max_sequence_length, name="input_checks"
    )([inputs["token_ids"], inputs["segment_ids"], inputs["padding_mask"]])

    # Reversible: the MLM decoder reuses this matrix (`token_embedding(h, reverse=True)`).
    token = keras.layers.ReversibleEmbedding(
        vocabulary_size,
        hidden_dim,
        embeddings_initializer=initializer(),
        dtype=dtype,
        name="token_embedding",
    )(token_ids)
    position = PositionEmbedding(
        max_sequence_length, hidden_dim, dtype=dtype, name="position_embedding"
    )(token)
    segment = keras.layers.Embedding(
        num_segments,
        hidden_dim,
        embeddings_initializer=initializer(),
        dtype=dtype,
        name="segment_embedding",
    )(segment_ids)
    x = keras.layers.Add(dtype=dtype, name="embeddings_add")([token, position, segment])
    x = layer_norm("embeddings_layer_norm", dtype)(x)
    x = Dropout(dropout, dtype=dtype, name="embeddings_dropout")(x)

    for i in range(num_layers):
        x = TransformerEncoderBlock(
            num_heads,
            hidden_dim,
            intermediate_dim,
            dropout=dropout,
            gelu_approximate=gelu_approximate,
            attention_dropout=attention_dropout,
            attention=attention,
            dtype=dtype,
            name=f"transformer_layer_{i}",
        )(x, padding_mask=padding_mask)

    first_token = FirstToken(name="first_token")(x)
    pooled = dense(hidden_dim, "pooled_dense", dtype, activation="tanh")(first_token)
    outputs = {"sequence_output": x, "pooled_output": pooled}
    return BertModel(inputs=inputs, outputs=outputs, name=name)


def first_token_pooled_output(encoder: keras.Model):
    """`encoder`'s `pooled_output` tensor with its last block computed at `[CLS]` only.

    The same layers (and weights) as `encoder.output["pooled_output"]`, wired as a second
    call of the last block with `first_token_only=True`: equal values, but the last block's
    feed-forward, attention output and attention scores run for one position instead of
    every token (about 12% of MiniLM-L6's encoder multiply-adds, for a classifier that reads
    only the pooler). Built on the block's first call (the encoder's own graph), so any encoder
    from `build_encoder`, `from_preset` or a `.keras` file works.
    """
    blocks = [layer for layer in encoder.layers if layer.name.startswith("transformer_layer_")]
    last = max(blocks, key=lambda layer: int(layer.name.rsplit("_", 1)[1]))
    # the block's first call is the encoder's: (hidden states, padding_mask=...)
    arguments = last._inbound_nodes[0].arguments  # Keras has no public accessor for them
    hidden, padding_mask = arguments.args[0], arguments.kwargs["padding_mask"]
    first = last(hidden, padding_mask=padding_mask, first_token_only=True)
    return encoder.get_layer("pooled_dense")(encoder.get_layer("first_token")(first))


def find_encoder(model: keras.Model) -> keras.Model:
    """The BERT encoder inside `model` (the model itself if it is one)."""
    names = {layer.name for layer in model.layers}
    if "token_embedding" in names:
        return model
    for layer in model.layers:
        if isinstance(layer, keras.Model) and any(
            sub.name == "token_embedding" for sub in layer.layers
        ):
            return layer
    raise ValueError(
        f"Model '{model.name}' holds no BERT encoder (no layer named 'token_embedding'). "
        "Pass a model built by kbz.build_encoder / kbz.from_preset or a task built on one."
    )


def architecture_of(encoder: keras.Model) -> dict:
    """The `build_encoder` keyword arguments that rebuild `encoder`, read off its layers."""
    blocks = [layer for layer in encoder.layers if layer.name.startswith("transformer_layer_")]
    first = blocks[0]
    return {
        "vocabulary_size": encoder.get_layer("token_embedding").input_dim,
        "num_layers": len(blocks),
        "num_heads": first.num_heads,
        "hidden_dim": first.hidden_dim,
        "intermediate_dim": first.intermediate_dim,
        "max_sequence_length": encoder.get_layer("position_embedding").max_sequence_length,
        "num_segments": encoder.get_layer("segment_embedding").input_dim,
        "dropout": first.dropout,
        "gelu_approximate": first.gelu_approximate,
        "attention_dropout": first.attention_dropout_rate,
    }


def set_attention(model: keras.Model, attention: str) -> keras.Model:
    """Sets the `attention` option ("auto", "fused", "explicit"; see `build_encoder`) of
    every encoder block of `model`; returns `model`. Takes effect from the next trace: call it
    before the first `predict`/`fit` (or `compile` again). Saved with the model.

    >>> enc = kbz.build_encoder(100, 1, 2, 16, 32)
    >>> kbz.encoder.set_attention(enc, "explicit").get_layer("transformer_layer_0").attention
    'explicit'
    """
    check_attention(attention)
    for layer in find_encoder(model).layers:
        if isinstance(layer, TransformerEncoderBlock):
            layer.attention = attention
    return model
