"""Training on JAX (issue 16): BERT's optimizers and schedules, gradient accumulation, mixed
precision, exact resume, data parallel over two host devices, and BertPreprocessor + tf.data
feeding `model.fit` (docs/backends.md's example). Collected only with `KERAS_BACKEND=jax`.

Tests marked `tensorflow_data` use TensorFlow on purpose: a tf.data stream into
`fit_resumable`, and tf.data with BertPreprocessor (docs/backends.md's example); conftest.py runs
them last, with TensorFlow unblocked. The others, `kbz finetune` and `kbz pretrain
--text-file` among them (numpy batches), run with TensorFlow's import blocked.
"""

import json
from pathlib import Path

import jax
import keras
import numpy as np
import pytest
from conftest import TINY, Kill, save_tiny_preset

import keras_bert_zoo as kbz
from keras_bert_zoo.training.optimizers import create_optimizer

DATA = Path(__file__).parent / "data"
ONE_LAYER = {**TINY, "num_layers": 1}  # compiling dominates these tests: keep the graph small


def _batch(size=8, length=10, seed=0):
    rng = np.random.default_rng(seed)
    x = {
        "token_ids": rng.integers(1, 1000, (size, length)).astype("int32"),
        "segment_ids": np.zeros((size, length), "int32"),
        "padding_mask": np.ones((size, length), "int32"),
    }
    return x, rng.integers(0, 2, size).astype("int32")


def _classifier(dropout=0.0, seed=0, dtype=None):
    keras.utils.set_random_seed(seed)
    encoder = kbz.build_encoder(**ONE_LAYER, dropout=dropout, dtype=dtype)
    return kbz.build_classifier(encoder, 2, dropout=dropout)


def _kernel(model):
    return keras.ops.convert_to_numpy(model.get_layer("classifier_head").kernel)


def test_accumulated_jit_steps_with_bert_optimizer_equal_one_big_batch():
    x, y = _batch()
    kernels = []
    for batch_size, accumulation in ((8, None), (4, 2)):
        model = _classifier()
        optimizer = create_optimizer(
            1e-3, total_steps=10, warmup_fraction=0.2, gradient_accumulation_steps=accumulation
        )
        model.compile(optimizer, kbz.tasks.classifier_loss(2), jit_compile=True)
        model.fit(x, y, batch_size=batch_size, epochs=2, shuffle=False, verbose=0)
        kernels.append(_kernel(model))
    np.testing.assert_allclose(kernels[1], kernels[0], atol=1e-6)
    assert not np.allclose(kernels[0], _kernel(_classifier()))  # it did train


def test_mixed_bfloat16_jit_fit_with_lamb_stays_finite_and_learns():
    x, y = _batch(seed=1)
    model = _classifier(dropout=0.1, dtype="mixed_bfloat16")
    encoder = kbz.encoder.find_encoder(model)
    assert encoder.get_layer("transformer_layer_0").compute_dtype == "bfloat16"
    assert keras.backend.standardize_dtype(model(x).dtype) == "float32"  # logits in float32
    model.compile(
        create_optimizer(5e-3, total_steps=12, optimizer="lamb"),
        kbz.tasks.classifier_loss(2),
        jit_compile=True,
    )
    losses = model.fit(x, y, batch_size=8, epochs=12, verbose=0).history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


def _resumable_run(directory, callbacks=()):
    import tensorflow as tf  # a tensorflow_data test's pipeline

    from keras_bert_zoo.training.resume import fit_resumable

    x, y = _batch(size=32, seed=2)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(4, drop_remainder=True)
    model = _classifier(dropout=0.2, seed=5)  # dropout: its seed state must resume too
    model.compile(create_optimizer(1e-3, 6), kbz.tasks.classifier_loss(2), jit_compile=True)
    fit_resumable(model, dataset, 6, 2, directory, callbacks=list(callbacks), verbose=0)
    return model


@pytest.mark.e2e  # a kill, then the run again
@pytest.mark.tensorflow_data
def test_interrupted_jit_run_resumes_to_the_same_weights(tmp_path):
    straight = _resumable_run(tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        _resumable_run(tmp_path / "interrupted", [Kill(step=3)])
    resumed = _resumable_run(tmp_path / "interrupted")  # the same call again
    for a, b in zip(straight.weights, resumed.weights, strict=True):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(b), keras.ops.convert_to_numpy(a), atol=1e-6, err_msg=a.path
        )
    fresh = _classifier(dropout=0.2, seed=5)
    assert not np.allclose(_kernel(fresh), _kernel(resumed))


def test_data_parallel_on_two_host_devices_equals_one_device():
    devices = jax.devices("cpu")
    assert len(devices) == 2, "run with XLA_FLAGS=--xla_force_host_platform_device_count=2"
    x, y = _batch(seed=3)
    kernels = []
    for distribution in (None, keras.distribution.DataParallel(devices=devices)):
        keras.distribution.set_distribution(distribution)
        try:
            model = _classifier()
            model.compile(keras.optimizers.SGD(0.1), kbz.tasks.classifier_loss(2), jit_compile=True)
            model.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
            kernels.append(_kernel(model))
        finally:
            keras.distribution.set_distribution(None)
    np.testing.assert_allclose(kernels[1], kernels[0], atol=1e-5)


def _sst2_head(count=64):
    lines = (DATA / "sst2_train_subset.tsv").read_text().splitlines()[1 : count + 1]
    texts = [line.rsplit("\t", 1)[0] for line in lines]
    return texts, np.array([int(line.rsplit("\t", 1)[1]) for line in lines], "int32")


def test_preprocessor_gives_numpy_that_fit_takes_without_tensorflow():
    texts, labels = _sst2_head()
    preprocessor = kbz.BertPreprocessor.from_preset("bert_tiny_en_uncased", sequence_length=32)
    x = preprocessor(texts)  # tokenizers + numpy: TensorFlow's import is blocked here
    assert x["token_ids"].dtype == np.int32 and x["token_ids"].shape == (64, 32)
    assert x["token_ids"][0, 0] == 101 and (x["padding_mask"].sum(1) > 2).all()
    keras.utils.set_random_seed(0)
    model = kbz.from_preset(
        "bert_tiny_en_uncased", task="classifier", num_classes=2, load_weights=False
    )
    model.compile(keras.optimizers.Adam(1e-3), kbz.tasks.classifier_loss(2), jit_compile=True)
    # Unshuffled: the batches of the tf.data test below, whose loss falls over 4 epochs.
    losses = model.fit(x, labels, batch_size=16, epochs=4, shuffle=False, verbose=0)
    losses = losses.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


@pytest.mark.tensorflow_data
def test_preprocessor_and_tf_data_feed_fit_on_jax():
    # docs/backends.md's example: tokenization in tf.data (TensorFlow); the model runs on JAX.
    import tensorflow as tf  # the point of this test

    lines = (DATA / "sst2_train_subset.tsv").read_text().splitlines()[1:65]
    texts = [line.rsplit("\t", 1)[0] for line in lines]
    labels = np.array([int(line.rsplit("\t", 1)[1]) for line in lines], "int32")

    preprocessor = kbz.BertPreprocessor.from_preset("bert_tiny_en_uncased", sequence_length=32)
    dataset = (
        tf.data.Dataset.from_tensor_slices((texts, labels))
        .batch(16, drop_remainder=True)
        .map(lambda text, label: (preprocessor(text), label))
    )
    keras.utils.set_random_seed(0)
    model = kbz.from_preset(
        "bert_tiny_en_uncased", task="classifier", num_classes=2, load_weights=False
    )
    model.compile(keras.optimizers.Adam(1e-3), kbz.tasks.classifier_loss(2), jit_compile=True)
    losses = model.fit(dataset, epochs=4, verbose=0).history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    first = next(iter(dataset))[0]
    assert first["token_ids"].shape == (16, 32) and int(first["token_ids"][0, 0]) == 101  # [CLS]


def test_kbz_pretrain_runs_on_jax_and_tf_distribute_is_a_clear_error(tmp_path):
    from keras_bert_zoo.cli import main
    from keras_bert_zoo.training.distributed import get_strategy

    with pytest.raises(ValueError, match="needs KERAS_BACKEND=tensorflow. Received: KERAS_B"):
        get_strategy("mirrored")
    argv = ["pretrain", "--preset", "bert_tiny_en_uncased", "--from-scratch", "--text-file"]
    argv += [str(DATA / "pretraining" / "sentences.txt"), "--output", str(tmp_path / "run")]
    argv += ["--num-train-steps", "2", "--checkpoint-every", "2", "--batch-size", "4"]
    argv += ["--max-seq-length", "32", "--max-predictions-per-seq", "5"]
    assert main(argv) == 0
    pretrained = kbz.from_preset(str(tmp_path / "run" / "preset"), task="pretrainer")
    assert pretrained.count_params() > 4_000_000  # bert_tiny with its MLM and NSP heads


def test_kbz_finetune_runs_on_jax_with_its_defaults(tmp_path, caplog):
    # Defaults: XLA, length bucketing, validation, preset; the string-in SavedModel (TensorFlow
    # ops) is skipped with a warning that says how to export, not a failure after training.
    from keras_bert_zoo.cli import main

    preset = save_tiny_preset(tmp_path / "tiny", num_layers=2, max_sequence_length=64)
    train = DATA / "finetune" / "sst2_train_head.tsv"
    argv = ["finetune", "classify", "--preset", str(preset), "--train", str(train)]
    argv += ["--validation", str(train), "--output", str(tmp_path / "run"), "--epochs", "1"]
    argv += ["--batch-size", "8", "--sequence-length", "64"]
    assert main(argv) == 0
    assert "needs KERAS_BACKEND=tensorflow" in caplog.text
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert 0.0 <= metrics["accuracy"] <= 1.0 and not (tmp_path / "run" / "export").exists()
    assert kbz.load_model(tmp_path / "run" / "model.keras").task == "classifier"
