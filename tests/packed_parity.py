"""Packed vs unpacked encoder parity, shared by the TensorFlow, JAX and PyTorch test files.

Examples of mixed lengths run once unpacked (one padded row each, `kbz.build_encoder`) and
once packed (`kbz.training.packing.pack` into 16-token rows, `build_packed_encoder`); each
example's `[CLS]` pooled output, its mean over real tokens, and the gradients of a loss over
both must agree within float32 rounding.
"""

import keras
import numpy as np
from keras import ops

import keras_bert_zoo as kbz
from keras_bert_zoo.packed_encoder import (
    build_packed_encoder,
    packed_first_tokens,
    packed_mean_pooling,
)
from keras_bert_zoo.training.packing import pack

LENGTHS = (5, 9, 3, 7, 2, 11, 4, 6)
ROW_LENGTH = 16


def unpacked_examples(vocabulary_size: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    width = max(LENGTHS)
    mask = (np.arange(width)[None] < np.array(LENGTHS)[:, None]).astype("int32")
    ids = rng.integers(1, vocabulary_size, (len(LENGTHS), width)) * mask
    segments = (rng.random((len(LENGTHS), width)) < 0.5).astype("int32") * mask
    return {"token_ids": ids.astype("int32"), "segment_ids": segments, "padding_mask": mask}


def _losses(encoder, packed_model, unpacked, packed, mask):
    """Per-example pooled and mean vectors, unpacked then packed; and a scalar loss of each."""
    out = encoder(unpacked)
    pooled = out["pooled_output"]
    real = ops.cast(mask, "float32")[:, :, None]
    mean = ops.sum(out["sequence_output"] * real, axis=1) / ops.sum(real, axis=1)
    sequence = packed_model({k: packed[k] for k in packed_model.input})["sequence_output"]
    cls = packed_first_tokens(sequence, packed["example_row"], packed["example_start"])
    packed_pooled = encoder.get_layer("pooled_dense")(cls)
    packed_mean = packed_mean_pooling(
        sequence, packed["sequence_ids"], packed["example_row"], packed["example_sequence"]
    )
    weights = ops.convert_to_tensor(np.linspace(-1, 1, pooled.shape[-1]), "float32")
    loss = lambda a, b: ops.sum(ops.tanh(a) * weights) + ops.sum(ops.square(b) * weights)  # noqa: E731
    return (
        (pooled, mean, packed_pooled, packed_mean),
        loss(pooled, mean),
        loss(packed_pooled, packed_mean),
    )


def _gradients(loss_fn, variables):
    """Gradients of `loss_fn()` with respect to `variables`, on the running backend."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = loss_fn()
        grads = tape.gradient(loss, [v.value for v in variables])
        return [np.asarray(tf.convert_to_tensor(g)) for g in grads]  # embeddings: sparse
    if backend == "jax":
        import jax

        def stateless(values):
            with keras.StatelessScope(state_mapping=list(zip(variables, values, strict=True))):
                return loss_fn()

        return [np.asarray(g) for g in jax.grad(stateless)([v.value for v in variables])]
    for v in variables:
        v.value.grad = None
    loss_fn().backward()
    return [v.value.grad.detach().cpu().numpy() for v in variables]


def check_packed_parity(attention: str, tiny: dict):
    """Outputs and gradients of packed rows equal the unpacked ones (float32 rounding)."""
    keras.utils.set_random_seed(0)
    encoder = kbz.build_encoder(**tiny, dropout=0.0, attention=attention)
    unpacked = unpacked_examples(tiny["vocabulary_size"])
    packed = pack(unpacked, ROW_LENGTH)
    assert len(packed["token_ids"]) < len(LENGTHS)  # several examples share a row
    packed_model = build_packed_encoder(encoder)
    outputs, _, _ = _losses(encoder, packed_model, unpacked, packed, unpacked["padding_mask"])
    pooled, mean, packed_pooled, packed_mean = (ops.convert_to_numpy(x) for x in outputs)
    np.testing.assert_allclose(packed_pooled, pooled, atol=2e-5)
    np.testing.assert_allclose(packed_mean, mean, atol=2e-5)
    variables = list(encoder.trainable_variables)

    def loss(which):
        return lambda: _losses(encoder, packed_model, unpacked, packed, unpacked["padding_mask"])[
            which
        ]

    expected, got = _gradients(loss(1), variables), _gradients(loss(2), variables)
    for variable, want, have in zip(variables, expected, got, strict=True):
        np.testing.assert_allclose(have, want, atol=2e-5, rtol=1e-4, err_msg=variable.path)


def check_packed_fit_step(tiny: dict, num_classes: int, empty_rows: int = 0):
    """One SGD fit step of a classifier on packed rows (`build_packed_classifier`,
    `packed_batches.packed_batch`, the loss averaged over the examples) moves every weight as
    the unpacked step on the same examples does, and reports the same loss; `empty_rows`
    more rows (a batch filled up for the devices it is split over) change neither."""
    from keras_bert_zoo.finetuning.packed_training import packed_loss
    from keras_bert_zoo.packed_encoder import build_packed_classifier
    from keras_bert_zoo.training.packed_batches import packed_batch
    from keras_bert_zoo.training.packing import pack_rows

    def classifier(seed):
        keras.utils.set_random_seed(seed)
        encoder = kbz.build_encoder(**tiny, dropout=0.0)
        return kbz.build_classifier(encoder, num_classes=num_classes, dropout=0.0)

    unpacked_model, model = classifier(0), classifier(1)
    model.set_weights(unpacked_model.get_weights())
    before = [np.array(w) for w in unpacked_model.get_weights()]
    x = unpacked_examples(tiny["vocabulary_size"])
    rng = np.random.default_rng(1)
    if num_classes == 1:
        y = rng.normal(size=len(LENGTHS)).astype("float32")
    else:
        y = rng.integers(0, num_classes, len(LENGTHS)).astype("int32")
    loss = kbz.tasks.classifier_loss(num_classes)
    unpacked_model.compile(keras.optimizers.SGD(1.0), loss=loss, jit_compile=False)
    unpacked_loss = unpacked_model.train_on_batch(x, y)

    packed_model = build_packed_classifier(model)
    packed_model.compile(keras.optimizers.SGD(1.0), loss=packed_loss(loss), jit_compile=False)
    rows = pack_rows(LENGTHS, ROW_LENGTH)
    size = len(rows) + empty_rows
    inputs, targets, weights = packed_batch(
        x, y, rows, ROW_LENGTH // min(LENGTHS), ROW_LENGTH, size
    )
    assert len(rows) < len(LENGTHS) and weights.sum() == len(LENGTHS) < weights.size
    assert len(weights) == size
    packed_step_loss = packed_model.train_on_batch(inputs, targets, sample_weight=weights)
    np.testing.assert_allclose(packed_step_loss, unpacked_loss, rtol=1e-5)
    _assert_same_step(before, unpacked_model, model)


def _assert_same_step(before, unpacked_model, model, atol=2e-6, unmoved=2):
    """Every weight of `model` moved as `unpacked_model`'s did from `before` (SGD(1.0): the
    step is minus the gradient), and all but `unmoved` weights moved."""
    moved = 0
    for start, want, have in zip(before, unpacked_model.weights, model.weights, strict=True):
        np.testing.assert_allclose(
            start - np.asarray(have), start - np.asarray(want), atol=atol, rtol=1e-4,
            err_msg=have.path,
        )  # fmt: skip
        moved += bool(np.abs(start - np.asarray(want)).max() > 0)
    assert moved >= len(before) - unmoved  # all but the unused embedding rows' untouched tables


def check_packed_tagger_fit_step(tiny: dict, empty_rows: int = 0):
    """One SGD fit step of a tagger on packed rows (`build_packed_tagger`, each token's label
    at its place in the row, `packed_batch(token_fill=IGNORE_LABEL)`, the task's token loss
    averaged over the examples) moves every weight as the unpacked step on the same examples
    does, and reports the same loss; `empty_rows` more rows change neither."""
    from keras_bert_zoo.finetuning.packed_training import packed_loss
    from keras_bert_zoo.packed_encoder import build_packed_tagger
    from keras_bert_zoo.task_graphs import IGNORE_LABEL
    from keras_bert_zoo.training.packed_batches import packed_batch
    from keras_bert_zoo.training.packing import pack_rows

    def tagger(seed):
        keras.utils.set_random_seed(seed)
        encoder = kbz.build_encoder(**tiny, dropout=0.0)
        return kbz.build_tagger(encoder, num_tags=5, dropout=0.0)

    unpacked_model, model = tagger(0), tagger(1)
    model.set_weights(unpacked_model.get_weights())
    before = [np.array(w) for w in unpacked_model.get_weights()]
    x = unpacked_examples(tiny["vocabulary_size"])
    rng = np.random.default_rng(2)
    y = rng.integers(0, 5, x["token_ids"].shape).astype("int32")
    # as the tagger's labels: [CLS], padding and some sub-words (here: a third) count for nothing
    ignored = (x["padding_mask"] == 0) | (rng.random(y.shape) < 0.3)
    ignored[:, 0] = True
    y[ignored] = IGNORE_LABEL
    loss = kbz.tasks.tagger_loss(labelled_per_sequence=3.5)
    unpacked_model.compile(keras.optimizers.SGD(1.0), loss=loss, jit_compile=False)
    unpacked_loss = unpacked_model.train_on_batch(x, y)

    packed_model = build_packed_tagger(model)
    packed_model.compile(keras.optimizers.SGD(1.0), loss=packed_loss(loss, True), jit_compile=False)
    rows = pack_rows(LENGTHS, ROW_LENGTH)
    size = len(rows) + empty_rows
    slots = ROW_LENGTH // min(LENGTHS)
    inputs, targets, weights = packed_batch(x, y, rows, slots, ROW_LENGTH, size, IGNORE_LABEL)
    assert targets.shape == (size, ROW_LENGTH) and weights.shape == (size, 1)
    assert (targets != IGNORE_LABEL).sum() == (y != IGNORE_LABEL).sum()  # each label once
    assert len(rows) < len(LENGTHS) and set(inputs) == set(packed_model.input)
    packed_step_loss = packed_model.train_on_batch(inputs, targets, sample_weight=weights)
    np.testing.assert_allclose(packed_step_loss, unpacked_loss, rtol=1e-5)
    _assert_same_step(before, unpacked_model, model)


def check_packed_embedder_fit_step(tiny: dict, empty_rows: int = 0, pooling: str = "mean"):
    """One SGD fit step of an embedder on packed (query, positive) pairs
    (`build_packed_contrastive_trainer`, `packed_batch` of `[pairs, 2, length]` arrays, the
    in-batch loss averaged over the pairs) equals the unpacked step
    (`build_contrastive_trainer`) on the same pairs, for each `pooling`: its loss and
    every weight's move."""
    from keras_bert_zoo.finetuning.packed_training import packed_loss
    from keras_bert_zoo.packed_encoder import build_packed_contrastive_trainer
    from keras_bert_zoo.training.packed_batches import packed_batch
    from keras_bert_zoo.training.packing import pack_rows

    def embedder(seed):
        keras.utils.set_random_seed(seed)
        return kbz.build_embedder(kbz.build_encoder(**tiny, dropout=0.0), pooling=pooling)

    unpacked_model, model = embedder(0), embedder(1)
    model.set_weights(unpacked_model.get_weights())
    before = [np.array(w) for w in unpacked_model.get_weights()]
    texts = unpacked_examples(tiny["vocabulary_size"])  # pair i: texts 2i (query), 2i + 1
    x = {key: value.reshape(len(LENGTHS) // 2, 2, -1) for key, value in texts.items()}
    y = np.arange(1, len(LENGTHS) + 1, dtype="int32").reshape(-1, 2)  # the texts' ids
    loss = kbz.tasks.in_batch_negatives_loss()
    trainer = kbz.tasks.build_contrastive_trainer(unpacked_model, scale=20.0)
    trainer.compile(keras.optimizers.SGD(1.0), loss=loss, jit_compile=False)
    unpacked_loss = trainer.train_on_batch(x, y)

    packed_model = build_packed_contrastive_trainer(model, scale=20.0)
    packed_model.compile(keras.optimizers.SGD(1.0), loss=packed_loss(loss), jit_compile=False)
    pair_lengths = np.asarray(LENGTHS).reshape(-1, 2).sum(-1)
    row_length = 2 * ROW_LENGTH  # a row holds up to two texts' sequence length
    rows = pack_rows(pair_lengths, row_length)
    slots = row_length // pair_lengths.min()
    size = len(rows) + empty_rows
    inputs, targets, weights = packed_batch(x, y, rows, slots, row_length, size)
    assert len(rows) < len(pair_lengths) and weights.sum() == len(pair_lengths) < weights.size
    assert inputs["example_start"].shape == (size, 2 * slots)
    packed_step_loss = packed_model.train_on_batch(inputs, targets, sample_weight=weights)
    np.testing.assert_allclose(packed_step_loss, unpacked_loss, rtol=1e-5)

    # atol: the loss's scale of 20 magnifies float32 rounding of the cosines; the pooler
    # is not in the embedder's graph
    _assert_same_step(before, unpacked_model, model, atol=1e-5, unmoved=4)


def check_packed_reranker_fit_step(tiny: dict, ranking_loss: str, empty_rows: int = 0):
    """One SGD fit step of a reranker on packed rows equals the unpacked step on the same
    examples, its loss and every weight's move. Pointwise: pairs read at their `[CLS]` as
    the classifier's (`build_packed_classifier(head="reranker_head")`, sigmoid cross-entropy);
    listwise: query groups of 2 pairs packed whole into rows of twice `ROW_LENGTH`
    (`build_packed_group_scorer` against `kbz.tasks.build_group_scorer`, the softmax
    cross-entropy of each group's relevant pair, here the first or the second)."""
    from keras_bert_zoo.finetuning.packed_training import packed_loss
    from keras_bert_zoo.packed_encoder import build_packed_classifier, build_packed_group_scorer
    from keras_bert_zoo.training.packed_batches import packed_batch
    from keras_bert_zoo.training.packing import pack_rows

    def reranker(seed):
        keras.utils.set_random_seed(seed)
        return kbz.build_reranker(kbz.build_encoder(**tiny, dropout=0.0), dropout=0.0)

    unpacked_model, model = reranker(0), reranker(1)
    model.set_weights(unpacked_model.get_weights())
    before = [np.array(w) for w in unpacked_model.get_weights()]
    x = unpacked_examples(tiny["vocabulary_size"])
    lengths, group = np.asarray(LENGTHS), 2 if ranking_loss == "listwise" else 1
    if group > 1:  # group g: pairs 2g and 2g + 1
        x = {key: value.reshape(len(LENGTHS) // group, group, -1) for key, value in x.items()}
        lengths = lengths.reshape(-1, group).sum(-1)
        y = np.array([0, 1, 1, 0], "int32")  # the relevant pair's place in its group
        loss, unpacked = kbz.tasks.listwise_loss(), kbz.tasks.build_group_scorer(unpacked_model, 2)
        packed_model = build_packed_group_scorer(model, group)
    else:
        y = np.random.default_rng(3).integers(0, 2, len(LENGTHS)).astype("float32")
        loss, unpacked = kbz.tasks.reranker_loss(), unpacked_model
        packed_model = build_packed_classifier(model, head="reranker_head")
    unpacked.compile(keras.optimizers.SGD(1.0), loss=loss, jit_compile=False)
    unpacked_loss = unpacked.train_on_batch(x, y)

    packed_model.compile(keras.optimizers.SGD(1.0), loss=packed_loss(loss), jit_compile=False)
    row_length = group * ROW_LENGTH  # a row holds up to a group's sequence lengths
    rows = pack_rows(lengths, row_length)
    slots, size = row_length // lengths.min(), len(rows) + empty_rows
    inputs, targets, weights = packed_batch(x, y, rows, slots, row_length, size)
    assert len(rows) < len(lengths) and weights.sum() == len(lengths) < weights.size
    assert inputs["example_start"].shape == (size, group * slots)
    packed_step_loss = packed_model.train_on_batch(inputs, targets, sample_weight=weights)
    assert packed_model.output.shape[1:] == ((None, group) if group > 1 else (None, 1))
    np.testing.assert_allclose(packed_step_loss, unpacked_loss, rtol=1e-5)
    _assert_same_step(before, unpacked_model, model)
