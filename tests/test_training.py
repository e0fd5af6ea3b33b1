"""Optimizer and schedule as BERT trains: warmup/decay values, decay exclusions, clipping."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import random_inputs

import keras_bert_zoo as kbz
from keras_bert_zoo.training import WarmupLinearDecay, create_optimizer


def test_warmup_linear_decay_values():
    schedule = WarmupLinearDecay(1e-3, warmup_steps=10, total_steps=110)
    values = [float(schedule(s)) for s in (0, 5, 10, 60, 110, 200)]
    np.testing.assert_allclose(values, [0.0, 5e-4, 1e-3, 5e-4, 0.0, 0.0], atol=1e-9)
    restored = WarmupLinearDecay.from_config(schedule.get_config())
    assert float(restored(60)) == pytest.approx(5e-4)


def test_bad_schedule_is_a_clear_error():
    with pytest.raises(ValueError, match="warmup_steps <= total_steps"):
        WarmupLinearDecay(1e-3, warmup_steps=20, total_steps=10)


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_weight_decay_skips_layer_norm_and_bias(name, tiny_architecture):
    encoder = kbz.build_encoder(**tiny_architecture)
    optimizer = create_optimizer(1e-3, total_steps=10, optimizer=name)
    optimizer.build(encoder.trainable_variables)
    decayed = {v.path for v in encoder.trainable_variables if optimizer._use_weight_decay(v)}
    assert "transformer_layer_0/intermediate/kernel" in decayed
    assert "token_embedding/embeddings" in decayed
    assert not any("layer_norm" in p or p.endswith("/bias") for p in decayed)


def test_zero_gradient_step_only_decays_kernels():
    kernel = keras.Variable(np.ones((2, 2), "float32"), name="kernel")
    bias = keras.Variable(np.ones((2,), "float32"), name="bias")
    optimizer = create_optimizer(0.1, total_steps=10, warmup_fraction=0.0, weight_decay=0.5)
    optimizer.apply_gradients(
        [(np.zeros((2, 2), "float32"), kernel), (np.zeros(2, "float32"), bias)]
    )
    np.testing.assert_allclose(bias.numpy(), 1.0)
    np.testing.assert_allclose(kernel.numpy(), 1.0 - 0.1 * 0.5, rtol=1e-6)


def test_global_norm_clipping():
    optimizer = create_optimizer(
        1.0, total_steps=10, warmup_fraction=0.0, weight_decay=0.0, optimizer="adamw"
    )
    clipped = optimizer._clip_gradients([np.full((4,), 10.0, "float32")])
    assert float(np.linalg.norm(clipped[0])) == pytest.approx(1.0, rel=1e-5)


def test_global_norm_counts_an_embedding_row_once_however_often_its_id_repeats():
    """TensorFlow's gradient of a lookup holds one row per lookup; the clip takes the norm of
    the gradient itself (torch's `clip_grad_norm_`), the rows of a repeated id summed."""
    tf = pytest.importorskip("tensorflow")
    table = keras.Variable(np.ones((5, 3), "float32"), name="embeddings")
    with tf.GradientTape() as tape:
        loss = keras.ops.sum(keras.ops.take(table, [1, 1, 1, 1, 2], axis=0))
    gradient = tape.gradient(loss, table)
    assert isinstance(gradient, tf.IndexedSlices)  # 5 rows of ones: Keras' norm sqrt(15)
    dense = tf.convert_to_tensor(gradient).numpy()  # row 1 all 4, row 2 all 1: sqrt(51)
    optimizer = create_optimizer(1.0, total_steps=10, warmup_fraction=0.0, weight_decay=0.0)
    clipped = optimizer._clip_gradients([gradient])[0]
    np.testing.assert_allclose(clipped, dense / np.sqrt(51.0), rtol=1e-6)


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_mirrored_replicas_clip_the_global_batch_gradient(name, mirrored_strategy):
    """Two replicas, each holding half of a batch's gradient, step as one device does with the
    whole gradient once the clip bites (Keras clips each replica's half before summing)."""
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(0)
    halves = rng.normal(size=(2, 3, 4)).astype("float32")  # one replica's gradient each
    whole = halves.sum(0)
    assert np.linalg.norm(whole) > 0.5 and np.linalg.norm(halves[0]) > 0.5  # both clipped

    def optimizer():
        return create_optimizer(
            0.1, total_steps=10, warmup_fraction=0.0, weight_decay=0.0, clipnorm=0.5, optimizer=name
        )

    one = keras.Variable(np.ones((3, 4), "float32"))
    optimizer().apply_gradients([(whole, one)])
    with mirrored_strategy.scope():
        two = keras.Variable(np.ones((3, 4), "float32"))
        mirrored_optimizer = optimizer()
        mirrored_optimizer.build([two])

    @tf.function
    def step():
        def replica(gradients):
            index = tf.distribute.get_replica_context().replica_id_in_sync_group
            mirrored_optimizer.apply_gradients([(tf.gather(gradients, index), two)])

        mirrored_strategy.run(replica, args=(tf.constant(halves),))

    step()
    np.testing.assert_allclose(two.numpy(), one.numpy(), rtol=1e-6)
    assert not np.allclose(one.numpy(), 1.0)


def test_adamw_steps_equal_torch_adamw_where_epsilon_matters():
    """Gradients near epsilon (1e-6), where Keras' placement of epsilon differs most."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    start = rng.normal(size=(3, 4)).astype("float32")
    gradients = rng.normal(size=(6, 3, 4)) * 10.0 ** rng.integers(-7, -2, (6, 3, 4))
    gradients = gradients.astype("float32")

    def run(optimizer):
        variable = keras.Variable(start, name="kernel")
        for gradient in gradients:
            optimizer.apply_gradients([(gradient, variable)])
        return variable.numpy()

    reference = torch.tensor(start, requires_grad=True)
    torch_optimizer = torch.optim.AdamW([reference], lr=1e-3, eps=1e-6, weight_decay=0.01)
    for gradient in gradients:
        reference.grad = torch.tensor(gradient)
        torch_optimizer.step()
    expected = reference.detach().numpy()
    ours = run(kbz.training.AdamW(1e-3, weight_decay=0.01, epsilon=1e-6))
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-6)
    keras_form = run(keras.optimizers.AdamW(1e-3, weight_decay=0.01, epsilon=1e-6))
    assert np.abs(keras_form - expected).max() > 1e-4  # what the subclass exists for
    with pytest.raises(ValueError, match="amsgrad"):  # at construction, before any step
        kbz.training.AdamW(1e-3, amsgrad=True)


def test_unknown_optimizer_is_a_clear_error():
    with pytest.raises(ValueError, match="'adamw' or 'lamb'"):
        create_optimizer(1e-3, total_steps=10, optimizer="sgd")


def test_gradient_accumulation_equals_one_big_batch(tiny_architecture):
    """Two accumulated batches of 4 take the step of one batch of 8 (BERT-large recipes
    rely on this to fit a large global batch)."""
    rng = np.random.default_rng(0)
    x = {
        "token_ids": rng.integers(1, 1000, (8, 10)).astype("int32"),
        "segment_ids": np.zeros((8, 10), "int32"),
        "padding_mask": np.ones((8, 10), "int32"),
    }
    y = rng.integers(0, 2, 8)
    weights = []
    for batch_size, accumulation in ((8, None), (4, 2)):
        keras.utils.set_random_seed(0)
        model = kbz.build_classifier(
            kbz.build_encoder(**tiny_architecture, dropout=0.0), 2, dropout=0.0
        )
        model.compile(
            create_optimizer(
                1e-3, total_steps=10, warmup_fraction=0.0, gradient_accumulation_steps=accumulation
            ),
            kbz.tasks.classifier_loss(2),
        )
        model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=False, verbose=0)
        weights.append(model.get_layer("classifier_head").kernel.numpy())
    np.testing.assert_allclose(weights[1], weights[0], atol=1e-6)


@pytest.mark.parametrize("data", ["arrays", "tf.data"])
def test_a_two_output_model_s_train_step_is_traced_once(data, tiny_architecture):
    """`BertModel.fit` builds the compiled loss's per-output trackers before the first trace:
    Keras (TensorFlow, no strategy) otherwise creates them inside it, and TF traced the train
    step of every two-output model (question answerer, pretrainer) a second time."""
    model = kbz.build_question_answerer(kbz.build_encoder(**tiny_architecture))
    model.compile(create_optimizer(1e-3, total_steps=4), kbz.tasks.question_answerer_loss())
    traces = []
    step = model.train_step
    model.train_step = lambda batch: traces.append(1) or step(batch)  # only while traced
    x = random_inputs(batch=4, length=8)
    y = {"start_logits": np.array([1, 2, 1, 3]), "end_logits": np.array([2, 3, 1, 4])}
    if data == "arrays":
        history = model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    else:
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(2)
        history = model.fit(dataset, epochs=1, verbose=0)
    assert int(model.optimizer.iterations) == 2 and len(traces) == 1
    losses = history.history
    assert np.isfinite(losses["loss"][0]) and losses["start_logits_loss"][0] > 0


@pytest.mark.parametrize("entry", ["fit", "train_on_batch"])
def test_the_train_step_is_traced_once(entry, tiny_architecture):
    """`BertModel` builds the optimizer's slots before the first trace: Keras (TensorFlow, no
    strategy) otherwise creates them inside it, and TF traces a function that created
    variables a second time (about 4 s per run for MiniLM)."""
    model = kbz.build_classifier(kbz.build_encoder(**tiny_architecture), num_classes=2)
    model.compile(
        optimizer=create_optimizer(1e-3, total_steps=4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    traces = []
    step = model.train_step

    def counted(data):
        traces.append(1)  # runs only while a step function is traced
        return step(data)

    model.train_step = counted
    x, y = random_inputs(batch=4, length=8), np.array([0, 1, 0, 1])
    if entry == "fit":
        model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    else:
        model.train_on_batch(x, y)
        model.train_on_batch(x, y)
    assert int(model.optimizer.iterations) == 2
    assert len(traces) == 1
