"""Task models: pretrainer (tied decoder, weighted losses), classifier, tagger, QA; presets."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import random_inputs

import keras_bert_zoo as kbz
from keras_bert_zoo.pretraining import MaskedLMPerplexity, compile_pretrainer
from keras_bert_zoo.tasks import (
    IGNORE_LABEL,
    TokenCrossentropy,
    classifier_loss,
    question_answerer_loss,
    tagger_loss,
)


@pytest.fixture
def encoder(tiny_architecture):
    keras.utils.set_random_seed(4)
    return kbz.build_encoder(**tiny_architecture, dropout=0.0)


def pretraining_batch(batch=4, length=16, predictions=5, seed=0):
    x = random_inputs(batch=batch, length=length, seed=seed, lengths=[length] * batch)
    rng = np.random.default_rng(seed)
    x["mask_positions"] = np.sort(rng.integers(1, length, (batch, predictions)), 1).astype("int32")
    y = {
        "mlm_logits": rng.integers(0, 1000, (batch, predictions)).astype("int32"),
        "nsp_logits": rng.integers(0, 2, (batch,)).astype("int32"),
    }
    weights = np.ones((batch, predictions), "float32")
    weights[:, -2:] = 0.0  # padded prediction slots
    return x, y, {"mlm_logits": weights, "nsp_logits": np.ones(batch, "float32")}


def test_pretrainer_outputs_and_tied_decoder(encoder):
    model = kbz.build_pretrainer(encoder, max_predictions=5)
    x, _, _ = pretraining_batch()
    out = model(x)
    assert tuple(out["mlm_logits"].shape) == (4, 5, 1000)
    assert tuple(out["nsp_logits"].shape) == (4, 2)
    # the decoder is the token embedding: no second [vocab, hidden] matrix
    big = [v.path for v in model.weights if tuple(v.shape) == (1000, 32)]
    assert big == ["token_embedding/embeddings"]
    # mlm logits = LN(gelu(dense(h[pos]))) @ E^T + b, computed by hand
    encoder_inputs = {k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    sequence = np.asarray(encoder(encoder_inputs)["sequence_output"])
    head = model.get_layer("mlm_head")
    gathered = np.take_along_axis(sequence, x["mask_positions"][..., None], axis=1)
    hidden = head.layer_norm(keras.activations.gelu(head.dense(gathered)))
    expected = np.asarray(hidden) @ np.asarray(
        encoder.get_layer("token_embedding").embeddings
    ).T + np.asarray(model.get_layer("mlm_output_bias").bias)
    np.testing.assert_allclose(out["mlm_logits"], expected, atol=1e-5)


def test_padded_prediction_slots_count_for_nothing(encoder):
    model = compile_pretrainer(kbz.build_pretrainer(encoder, max_predictions=5), "sgd")
    x, y, w = pretraining_batch()
    base = model.evaluate(x, y, sample_weight=w, verbose=0, return_dict=True)
    y["mlm_logits"][:, -2:] = 7  # change labels only where the weight is 0
    changed = model.evaluate(x, y, sample_weight=w, verbose=0, return_dict=True)
    for key in ("mlm_logits_loss", "mlm_logits_accuracy", "mlm_logits_perplexity"):
        assert base[key] == pytest.approx(changed[key], rel=1e-6), key
    assert np.exp(base["mlm_logits_loss"]) == pytest.approx(base["mlm_logits_perplexity"], rel=1e-4)


def test_perplexity_metric_known_value():
    metric = MaskedLMPerplexity()
    logits = np.log(np.array([[[0.5, 0.5], [0.25, 0.75]]], "float32"))
    metric.update_state(np.array([[0, 1]]), logits, sample_weight=np.array([[1.0, 0.0]]))
    assert float(metric.result()) == pytest.approx(2.0, rel=1e-5)


def test_pretrainer_trains_and_round_trips_keras_file(encoder, tmp_path):
    model = compile_pretrainer(
        kbz.build_pretrainer(encoder, max_predictions=5), keras.optimizers.Adam(1e-3)
    )
    x, y, w = pretraining_batch()
    history = model.fit(x, y, sample_weight=w, epochs=15, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    model.save(tmp_path / "p.keras")
    restored = keras.models.load_model(tmp_path / "p.keras", safe_mode=True)
    np.testing.assert_array_equal(model(x)["mlm_logits"], restored(x)["mlm_logits"])
    embedding = restored.get_layer("token_embedding")
    assert sum(v is embedding.embeddings for v in restored.weights) == 1  # still tied


@pytest.mark.parametrize("num_classes, multi_label", [(3, False), (1, False), (4, True)])
def test_classifier_fits(encoder, num_classes, multi_label):
    model = kbz.build_classifier(encoder, num_classes=num_classes, multi_label=multi_label)
    x = random_inputs(batch=8, length=10, seed=1, lengths=[10] * 8)
    rng = np.random.default_rng(0)
    y = (
        rng.normal(size=(8, 1)).astype("float32")
        if num_classes == 1
        else rng.integers(0, 2, (8, num_classes)).astype("float32")
        if multi_label
        else rng.integers(0, num_classes, (8,))
    )
    model.compile(
        keras.optimizers.Adam(1e-3), classifier_loss(num_classes, multi_label), jit_compile=False
    )
    history = model.fit(x, y, epochs=10, verbose=0)
    assert tuple(model(x).shape) == (8, num_classes)
    assert history.history["loss"][-1] < history.history["loss"][0]


def test_tagger_ignores_ignore_label_positions(encoder):
    model = kbz.build_tagger(encoder, num_tags=5)
    x = random_inputs(batch=2, length=8)
    labels = np.full((2, 8), IGNORE_LABEL)
    labels[:, 1:4] = [[1, 2, 0], [4, 0, 0]]
    loss = tagger_loss()
    logits = model(x)
    base = float(loss(labels, logits))
    other = labels.copy()
    other[:, 5:] = IGNORE_LABEL
    assert float(loss(other, logits)) == pytest.approx(base)
    manual = -np.mean(
        [
            tf.nn.log_softmax(logits[i, j])[labels[i, j]]
            for i in range(2)
            for j in range(8)
            if labels[i, j] != IGNORE_LABEL
        ]
    )
    assert base == pytest.approx(float(manual), rel=1e-5)


def test_token_crossentropy_divides_the_batch_sum_by_a_fixed_token_count(encoder):
    model = kbz.build_tagger(encoder, num_tags=5)
    x = random_inputs(batch=3, length=8)
    labels = np.full((3, 8), IGNORE_LABEL)
    labels[:, 1:6] = [[1, 2, 0, 3, 4], [4, 0, 0, 1, 1], [2, 2, 2, 2, 2]]
    labels[2, 3:] = IGNORE_LABEL  # sequences of 5, 5 and 2 labelled tokens
    logits = model(x)
    batch_mean = float(tagger_loss()(labels, logits))
    fixed = tagger_loss(labelled_per_sequence=4.0)
    assert isinstance(fixed, TokenCrossentropy)
    # the batch's sum over its 12 labelled tokens, over 3 sequences x 4 tokens
    assert float(fixed(labels, logits)) == pytest.approx(batch_mean * 12 / (3 * 4.0), rel=1e-5)
    restored = TokenCrossentropy.from_config(fixed.get_config())
    assert restored.labelled_per_sequence == 4.0
    with pytest.raises(ValueError, match="labelled_per_sequence"):
        tagger_loss(labelled_per_sequence=0)


def test_question_answerer_loss_is_the_mean_of_start_and_end_crossentropy():
    rng = np.random.default_rng(0)
    logits = {k: rng.normal(size=(4, 9)).astype("float32") for k in ("start_logits", "end_logits")}
    positions = {k: rng.integers(0, 9, (4,)) for k in logits}
    plain = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    losses = question_answerer_loss()
    total = sum(float(losses[k](positions[k], logits[k])) for k in logits)
    expected = np.mean([float(plain(positions[k], logits[k])) for k in logits])
    assert total == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(
    "task, kwargs, head",
    [
        ("classifier", {"num_classes": 2}, "classifier_head"),
        ("tagger", {"num_tags": 3}, "tagger_head"),
        ("question_answerer", {}, "span_head"),
    ],
)
def test_new_heads_start_as_transformers_heads(encoder, task, kwargs, head):
    """normal(0, 0.02) and a zero bias, as transformers' `_init_weights` (Keras'
    TruncatedNormal(0.02) would give a standard deviation of about 0.0176)."""
    layer = kbz.tasks.build_task(task, encoder, **kwargs).get_layer(head)
    assert isinstance(layer.kernel_initializer, keras.initializers.RandomNormal)
    assert layer.kernel_initializer.stddev == 0.02
    kernel = np.asarray(layer.kernel_initializer(shape=(256, 256)), np.float64)
    assert kernel.std() == pytest.approx(0.02, rel=0.03)
    assert not np.asarray(layer.bias).any()


def test_question_answerer_masks_padding(encoder):
    model = kbz.build_question_answerer(encoder)
    x = random_inputs(batch=2, length=10, lengths=[10, 6])
    out = model(x)
    assert tuple(out["start_logits"].shape) == (2, 10)
    assert np.all(np.asarray(out["end_logits"])[1, 6:] < -1e8)
    assert np.all(np.abs(np.asarray(out["start_logits"])[0]) < 1e3)


@pytest.mark.parametrize(
    "task, kwargs, output",
    [
        ("classifier", {"num_classes": 2}, None),
        ("tagger", {"num_tags": 3}, None),
        ("question_answerer", {}, "start_logits"),
        ("embedder", {"pooling": "cls"}, None),
        ("pretrainer", {"max_predictions": 4}, "nsp_logits"),
    ],
)
def test_task_presets_save_and_reload_with_their_heads(encoder, tmp_path, task, kwargs, output):
    model = kbz.tasks.build_task(task, encoder, **kwargs)
    vocabulary = ["[PAD]"] + [f"t{i}" for i in range(999)]
    directory = kbz.save_preset(model, tmp_path / task, vocabulary=vocabulary, lowercase=True)
    restored = kbz.from_preset(str(directory), task=task)
    x = random_inputs(batch=2, length=8)
    if task == "pretrainer":
        x["mask_positions"] = np.ones((2, 4), "int32")
    a, b = model(x), restored(x)
    a, b = (a[output], b[output]) if output else (a, b)
    np.testing.assert_array_equal(a, b)
    # without `task`, a fine-tuned preset gives its own task model (issue 30, 4); a
    # pretrainer preset (a checkpoint's MLM/NSP heads) gives the encoder
    default = kbz.from_preset(str(directory))
    if task == "pretrainer":
        assert default.task == "encoder"
    else:
        assert (default.task, default.task_config) == (task, restored.task_config)
        a, b = model(x), default(x)
        a, b = (a[output], b[output]) if output else (a, b)
        np.testing.assert_array_equal(a, b)
    # the same preset as a bare encoder on request: head weights are left unused, encoder
    # identical (tagger and QA graphs hold no pooler, so theirs is new)
    bare = kbz.from_preset(str(directory), task="encoder")
    keys = ["sequence_output"] + (["pooled_output"] if task in ("classifier", "pretrainer") else [])
    for key in keys:
        np.testing.assert_array_equal(
            bare(random_inputs(batch=2, length=8))[key],
            encoder(random_inputs(batch=2, length=8))[key],
        )


def test_new_head_on_encoder_preset(encoder, tmp_path):
    vocabulary = ["[PAD]"] + [f"t{i}" for i in range(999)]
    directory = kbz.save_preset(encoder, tmp_path / "enc", vocabulary=vocabulary, lowercase=True)
    model = kbz.from_preset(str(directory), task="classifier", num_classes=3)
    assert tuple(model(random_inputs()).shape) == (3, 3)


@pytest.mark.parametrize(
    "task, kwargs, message",
    [
        ("classifer", {}, "Unknown task 'classifer'"),
        ("classifier", {}, "Bad arguments for task 'classifier'"),
        ("classifier", {"num_classes": 2, "colour": 1}, "Bad arguments"),
        ("classifier", {"num_classes": 0}, "`num_classes` must be a positive integer"),
    ],
)
def test_bad_task_arguments(encoder, task, kwargs, message):
    with pytest.raises(ValueError, match=message):
        kbz.tasks.build_task(task, encoder, **kwargs)


@pytest.mark.parametrize(
    "task, kwargs",
    [
        ("classifier", {"num_classes": 2}),
        ("tagger", {"num_tags": 3}),
        ("question_answerer", {}),
        ("pretrainer", {"max_predictions": 4}),
    ],
)
def test_task_models_jit_compile_equals_eager(encoder, task, kwargs):
    model = kbz.tasks.build_task(task, encoder, **kwargs)
    x = random_inputs(batch=2, length=8)
    if task == "pretrainer":
        x["mask_positions"] = np.ones((2, 4), "int32")
    eager = tf.nest.flatten(model(x))
    compiled = tf.nest.flatten(tf.function(model, jit_compile=True)(x))
    for a, b in zip(eager, compiled, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4)


def test_block_first_token_only_equals_the_first_row_of_its_full_output(tiny_architecture):
    block = kbz.layers.TransformerEncoderBlock(
        num_heads=2, hidden_dim=tiny_architecture["hidden_dim"], intermediate_dim=64, dropout=0.0
    )
    rng = np.random.default_rng(2)
    hidden = rng.normal(size=(3, 7, tiny_architecture["hidden_dim"])).astype("float32")
    mask = random_inputs(batch=3, length=7, seed=2, lengths=[7, 4, 1])["padding_mask"]
    full = keras.ops.convert_to_numpy(block(hidden, padding_mask=mask))
    first = keras.ops.convert_to_numpy(block(hidden, padding_mask=mask, first_token_only=True))
    assert first.shape == (3, 1, tiny_architecture["hidden_dim"])
    np.testing.assert_allclose(first[:, 0], full[:, 0], atol=1e-6)


def test_classifier_computes_the_last_block_at_cls_only_with_the_full_results(encoder):
    """The classifier's graph calls the last block with `first_token_only`: logits and every
    weight's gradient equal those of the pooler read off the full sequence output."""
    classifier = kbz.build_classifier(encoder, num_classes=3, dropout=0.0)
    head = classifier.get_layer("classifier_head")
    full = kbz.BertModel(encoder.input, head(encoder.output["pooled_output"]))
    last = [layer for layer in classifier.layers if layer.name.startswith("transformer_layer_")][-1]
    calls = [node.arguments.kwargs.get("first_token_only") for node in last._inbound_nodes]
    assert calls == [None, True]  # the encoder's call, then the classifier's
    x = random_inputs(batch=4, length=9, seed=3, lengths=[9, 6, 2, 1])
    y = np.array([0, 1, 2, 1])
    loss = classifier_loss(3)

    def logits_and_gradients(model):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            value = loss(y, logits)
        return logits, tape.gradient(value, model.trainable_variables)

    ours, ours_gradients = logits_and_gradients(classifier)
    reference, reference_gradients = logits_and_gradients(full)
    np.testing.assert_allclose(ours, reference, atol=1e-6)
    assert [v.path for v in classifier.trainable_variables] == [
        v.path for v in full.trainable_variables
    ]
    for a, b in zip(ours_gradients, reference_gradients, strict=True):
        np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b), atol=1e-6)
