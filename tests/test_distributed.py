"""tf.distribute for real: MirroredStrategy on the two logical CPUs set up in conftest, and
MultiWorkerMirroredStrategy with two local worker processes on loopback. Each must give the
weights of single-device training on the same global batch."""

import json
import socket
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_zoo as kbz
from keras_bert_zoo.training.distributed import StrategyTrainer, get_strategy

GLOBAL_BATCH = 8


def _model(strategy):
    with strategy.scope():
        keras.utils.set_random_seed(0)
        encoder = kbz.build_encoder(
            vocabulary_size=1000,
            num_layers=2,
            num_heads=2,
            hidden_dim=32,
            intermediate_dim=64,
            max_sequence_length=64,
            dropout=0.0,
        )
        model = kbz.build_classifier(encoder, num_classes=2, dropout=0.0)
        model.compile(
            optimizer=kbz.training.create_optimizer(1e-2, total_steps=4),
            loss=kbz.tasks.classifier_loss(2),
        )
    return model


def _dataset():
    rng = np.random.default_rng(0)
    x = {
        "token_ids": rng.integers(1, 1000, (32, 12)).astype("int32"),
        "segment_ids": np.zeros((32, 12), "int32"),
        "padding_mask": (np.arange(12)[None] < rng.integers(4, 13, (32, 1))).astype("int32"),
    }
    y = rng.integers(0, 2, 32)
    return (
        tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH, drop_remainder=True)
    )


def _weights(model):
    return {v.path: v.numpy() for v in model.trainable_weights}


@pytest.fixture(scope="module")
def single_device():
    model = _model(tf.distribute.get_strategy())
    history = StrategyTrainer(model, tf.distribute.get_strategy(), jit_compile=True).fit(
        _dataset(), epochs=2, steps_per_epoch=2, verbose=0
    )
    return _weights(model), history.history["loss"]


@pytest.fixture(scope="module")
def mirrored(mirrored_strategy):
    return mirrored_strategy  # conftest's one instance per session


def _assert_same(weights, reference):
    assert weights.keys() == reference.keys()
    for name in reference:
        np.testing.assert_allclose(weights[name], reference[name], atol=1e-5, err_msg=name)


@pytest.mark.e2e
def test_mirrored_xla_per_replica_equals_single_device(single_device, mirrored):
    model = _model(mirrored)
    history = StrategyTrainer(model, mirrored, jit_compile=True).fit(
        _dataset(), epochs=2, steps_per_epoch=2, verbose=0
    )
    _assert_same(_weights(model), single_device[0])
    np.testing.assert_allclose(history.history["loss"], single_device[1], rtol=1e-5)


@pytest.mark.e2e  # two replicas, and its reference is the XLA run of `single_device`
def test_mirrored_fit_without_xla_equals_single_device(single_device, mirrored):
    model = _model(mirrored)
    model.fit(_dataset(), epochs=2, steps_per_epoch=2, verbose=0)
    _assert_same(_weights(model), single_device[0])


def test_trainer_requires_a_compiled_model(mirrored):
    with mirrored.scope():
        model = kbz.build_classifier(kbz.build_encoder(1000, 1, 2, 32, 64), num_classes=2)
    with pytest.raises(ValueError, match="Compile the model"):
        StrategyTrainer(model, mirrored)


PAIRS = 16  # (query, positive) rows of the contrastive test, batches of GLOBAL_BATCH


def _contrastive_trainer(strategy, loss):
    with strategy.scope():
        keras.utils.set_random_seed(0)
        encoder = kbz.build_encoder(1000, 2, 2, 32, 64, max_sequence_length=64, dropout=0.0)
        trainer = kbz.tasks.build_contrastive_trainer(kbz.build_embedder(encoder))
        trainer.compile(optimizer=kbz.training.create_optimizer(1e-2, total_steps=4), loss=loss)
    return trainer


def _pair_dataset():
    rng = np.random.default_rng(1)
    lengths = rng.integers(3, 11, (PAIRS, 2, 1))
    x = {
        "token_ids": rng.integers(1, 1000, (PAIRS, 2, 10)).astype("int32"),
        "segment_ids": np.zeros((PAIRS, 2, 10), "int32"),
        "padding_mask": (np.arange(10) < lengths).astype("int32"),
    }
    y = np.zeros(PAIRS, "int32")  # unused: the loss makes its targets from row positions
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH, drop_remainder=True)


class _EachHalfItsOwnNegatives(keras.losses.Loss):
    """One device's loss of what two replicas compute: each half of the global batch is a
    replica's batch, its queries scored against its own positives only."""

    def call(self, y_true, y_pred):
        half = GLOBAL_BATCH // 2
        blocks = [y_pred[:half, :half], y_pred[half:, half:]]
        targets = keras.ops.arange(half, dtype="int32")
        return keras.ops.concatenate(
            [keras.losses.sparse_categorical_crossentropy(targets, b, True) for b in blocks]
        )


@pytest.mark.e2e  # two mirrored replicas
def test_mirrored_in_batch_negatives_are_each_replica_s_own_batch(mirrored):
    # What `kbz finetune embed --strategy mirrored` trains: each replica's queries against its
    # own positives (as sentence-transformers under DDP without gathering), the gradients
    # averaged over replicas. One device with that loss must reach the same weights; with the
    # whole batch's negatives it must not (the check can fail).
    runs = {}
    for name, strategy, loss in (
        ("mirrored", mirrored, kbz.tasks.in_batch_negatives_loss()),
        ("halves", tf.distribute.get_strategy(), _EachHalfItsOwnNegatives()),
        ("whole batch", tf.distribute.get_strategy(), kbz.tasks.in_batch_negatives_loss()),
    ):
        trainer = _contrastive_trainer(strategy, loss)
        history = trainer.fit(_pair_dataset(), epochs=2, verbose=0)
        runs[name] = _weights(trainer), history.history["loss"]
    _assert_same(runs["mirrored"][0], runs["halves"][0])
    np.testing.assert_allclose(runs["mirrored"][1], runs["halves"][1], rtol=1e-5)
    assert not np.allclose(runs["mirrored"][1], runs["whole batch"][1], rtol=1e-3)


WORKER = textwrap.dedent("""
    import json, os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    sys.path.insert(0, sys.argv[2])
    import numpy as np
    import tensorflow as tf
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    import test_distributed as t
    from keras_bert_zoo.training.distributed import StrategyTrainer, get_strategy
    model = t._model(strategy)
    StrategyTrainer(model, strategy, jit_compile=True).fit(
        t._dataset(), epochs=2, steps_per_epoch=2, verbose=0)
    np.savez(sys.argv[1], **{k.replace("/", "|"): v for k, v in t._weights(model).items()})
""")


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.e2e
def test_multi_worker_two_local_processes_equal_single_device(single_device, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    workers = [f"127.0.0.1:{_free_port()}" for _ in range(2)]
    processes = []
    for index in range(2):
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = {**__import__("os").environ, "TF_CONFIG": json.dumps(config)}
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(script),
                    str(tmp_path / f"w{index}.npz"),
                    str(__import__("pathlib").Path(__file__).parent),
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    try:
        outputs = [p.communicate(timeout=240)[0] for p in processes]
    finally:
        for p in processes:
            p.kill()
    for p, output in zip(processes, outputs, strict=True):
        assert p.returncode == 0, output[-3000:]
    for index in range(2):
        with np.load(tmp_path / f"w{index}.npz") as saved:
            _assert_same({k.replace("|", "/"): saved[k] for k in saved.files}, single_device[0])


def _all_reduce(strategy, width):
    def replica():
        return tf.distribute.get_replica_context().all_reduce("sum", tf.ones([width]))

    @tf.function
    def step():
        return strategy.run(replica)

    return strategy.experimental_local_results(step())[0].numpy()


def test_one_mirrored_strategy_per_process(mirrored):
    # Two MirroredStrategy instances in one process number their all-reduces alike: the
    # second run of another shape then fails with "Shape mismatch in the collective
    # instance". Runs one after another (a sweep, a notebook) must share one strategy.
    assert get_strategy("mirrored") is mirrored
    for width in (3, 5):
        np.testing.assert_array_equal(_all_reduce(get_strategy("mirrored"), width), [2.0] * width)


def test_data_parallel_is_a_clear_error_on_tensorflow():
    with pytest.raises(ValueError, match=r"data-parallel` is Keras' DataParallel, which kbz runs"):
        get_strategy("data-parallel")
