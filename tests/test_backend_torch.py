"""The model path on PyTorch (issue 16): run by `make test` as `KERAS_BACKEND=torch pytest`.

Only collected when Keras runs on PyTorch (conftest.py): forward passes, input checks,
`.keras` and preset round trips, a short eager fit, and the real MiniLM parity at 1e-4.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
from conftest import (
    TINY,
    attention_inputs,
    check_fused_prediction,
    check_fused_training_step,
    check_normalize_last,
    random_inputs,
    record_predict_shapes,
    save_tiny_preset,
)

import keras_bert_zoo as kbz
from keras_bert_zoo.layers.attention import explicit_attention, fused_attention, fused_kernel

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parent.parent
NAMES = ("token_ids", "segment_ids", "padding_mask")


def numpy(x):
    return keras.ops.convert_to_numpy(x)


@pytest.fixture
def encoder():
    keras.utils.set_random_seed(3)
    return kbz.build_encoder(**TINY)


def test_keras_runs_on_torch():
    assert keras.backend.backend() == "torch"


def test_forward_predict_and_padding_invariance(encoder):
    x = random_inputs(lengths=[12, 7, 3])
    eager = numpy(encoder(x)["sequence_output"])
    predicted = encoder.predict(x, verbose=0)["sequence_output"]
    np.testing.assert_allclose(eager, predicted, atol=1e-5)
    padded = {k: np.pad(v, [(0, 0), (0, 9)]) for k, v in x.items()}
    longer = encoder.predict(padded, verbose=0)["sequence_output"]
    real = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(longer[:, :12][real], predicted[real], atol=1e-5)


def test_eager_prediction_trims_to_steps_of_8_without_filler_rows(encoder, monkeypatch):
    from keras_bert_zoo.training import bucketed_prediction

    # no compile per shape when eager: every length and batch size is free
    model = keras.Model(encoder.input, encoder.output["sequence_output"])
    x = random_inputs(batch=11, length=40, lengths=[40, 3, 9, 17, 25, 33, 5, 12, 20, 28, 36])
    assert bucketed_prediction.predicts_any_shape(model) and not model.jit_compile
    buckets = bucketed_prediction.prediction_buckets(model, 40)
    assert buckets == [8, 16, 24, 32, 40]
    shapes, predict = record_predict_shapes(model, monkeypatch)
    trimmed = bucketed_prediction.predict(model, x, 4, buckets, sequence_outputs=True)
    assert sum(rows for rows, _ in shapes) == 11 and len(shapes) > 1, shapes
    full = predict(x, verbose=0)
    real = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(trimmed[real], full[real], atol=1e-5)
    model.jit_compile = True  # torch.compile: a program per shape, so whole batches again
    assert not bucketed_prediction.predicts_any_shape(model)
    assert bucketed_prediction.prediction_buckets(model, 40) == [16, 32, 40]


def test_input_check_messages(encoder):
    x = random_inputs()
    bad = {**x, "segment_ids": x["segment_ids"] + 2}
    with pytest.raises(ValueError, match=r"`segment_ids` must lie in \[0, 2\)"):
        encoder(bad)
    with pytest.raises(ValueError, match=r"`segment_ids` must lie in \[0, 2\)"):
        encoder.predict(bad, verbose=0)
    left = {**x, "padding_mask": x["padding_mask"][:, ::-1].copy()}
    with pytest.raises(ValueError, match="right padding"):
        encoder.predict(left, verbose=0)


def test_keras_file_and_preset_round_trips(encoder, tmp_path):
    tagger = kbz.build_tagger(encoder, num_tags=5)
    tagger.save(tmp_path / "tagger.keras")
    restored = kbz.load_model(tmp_path / "tagger.keras")
    x = random_inputs()
    np.testing.assert_array_equal(tagger.predict(x, verbose=0), restored.predict(x, verbose=0))
    assert restored.task == "tagger"
    vocabulary = ["[PAD]"] + [f"tok{i}" for i in range(1, 1000)]
    directory = kbz.save_preset(encoder, tmp_path / "tiny", vocabulary=vocabulary, lowercase=True)
    again = kbz.from_preset(str(directory)).predict(x, verbose=0)
    np.testing.assert_array_equal(
        again["pooled_output"], encoder.predict(x, verbose=0)["pooled_output"]
    )


def test_eager_fit_of_a_classifier_lowers_the_loss(encoder):
    x = random_inputs(batch=8, length=12, seed=1, lengths=[12, 11, 10, 9, 8, 7, 6, 5])
    y = np.array([0, 1, 1, 0, 1, 0, 0, 1], "int32")
    classifier = kbz.build_classifier(encoder, num_classes=2)
    classifier.compile(keras.optimizers.Adam(3e-3), kbz.tasks.classifier_loss(2))
    before = classifier.evaluate(x, y, verbose=0)
    # 15 epochs: 10 halved the loss on one dropout stream and not on another (0.36 vs 0.35)
    history = classifier.fit(x, y, batch_size=8, epochs=15, verbose=0)
    assert history.history["loss"][-1] < 0.5 * before


def test_dropout_draws_from_the_layer_seed_state():
    """Masks drop the rate and rescale the rest, advance every call, and are a function of
    the layer's seed state (which checkpoints save), not of torch's global generator."""
    import torch

    layer = kbz.layers.Dropout(0.1, seed=7)
    x = keras.ops.ones((64, 4096))
    state = numpy(layer.seed_generator.state)
    first, second = (numpy(layer(x, training=True)) for _ in range(2))
    for out in (first, second):
        assert abs(np.mean(out == 0) - 0.1) < 0.003  # standard error 5.9e-4
        np.testing.assert_allclose(out[out != 0], 1 / 0.9, rtol=1e-6)
    assert np.mean((first == 0) != (second == 0)) > 0.1
    layer.seed_generator.state.assign(state)  # as a restored checkpoint
    torch.manual_seed(123)  # the global generator plays no part
    np.testing.assert_array_equal(numpy(layer(x, training=True)), first)
    np.testing.assert_array_equal(numpy(layer(x, training=False)), numpy(x))


class _OneVariableAtATime(kbz.training.AdamW):
    """kbz's AdamW through Keras' per-variable loop (`update_step`), the reference."""

    def _backend_update_step(self, grads, variables, learning_rate):
        return super(kbz.training.AdamW, self)._backend_update_step(grads, variables, learning_rate)


def test_adamw_updates_all_variables_at_once_as_one_at_a_time():
    """On PyTorch kbz's AdamW steps every variable with torch's multi-tensor ops; the weights
    after six steps (warmup, decay, clipping, a bias without weight decay) equal the
    per-variable `update_step`'s."""
    rng = np.random.default_rng(0)
    shapes = {"kernel": (64, 32), "bias": (32,), "embeddings": (500, 16)}
    initial = {name: rng.normal(size=shape).astype("float32") for name, shape in shapes.items()}
    runs = []
    for optimizer_class in (kbz.training.AdamW, _OneVariableAtATime):
        variables = [keras.Variable(initial[name], name=name) for name in shapes]
        schedule = kbz.training.WarmupLinearDecay(1e-2, 2, 6)
        optimizer = optimizer_class(
            learning_rate=schedule, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0
        )
        optimizer.exclude_from_weight_decay(var_names=["bias"])
        calls = []
        optimizer.update_step = lambda *a, f=optimizer.update_step, c=calls: c.append(1) or f(*a)
        grads_rng = np.random.default_rng(1)
        for _ in range(6):
            grads = [keras.ops.convert_to_tensor(grads_rng.normal(size=shapes[n]).astype("float32"))
                     for n in shapes]  # fmt: skip
            optimizer.apply(grads, variables)
        runs.append(([numpy(v) for v in variables], len(calls)))
    (together, together_calls), (alone, alone_calls) = runs
    assert together_calls == 0 and alone_calls == 6 * len(shapes)
    for name, a, b in zip(shapes, together, alone, strict=True):
        assert not np.allclose(a, initial[name])
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)


def test_real_minilm_matches_huggingface_within_1e4(minilm_preset):
    reference = dict(np.load(FIXTURES / "minilm_hf_reference.npz", allow_pickle=False))
    encoder = kbz.from_preset(str(minilm_preset))
    out = encoder({k: reference[k] for k in NAMES})
    real = reference["padding_mask"].astype(bool)
    error = np.abs(numpy(out["sequence_output"]) - reference["sequence_output"])[real]
    assert error.max() < 1e-4


# --- fused attention (keras.ops.dot_product_attention) against the explicit softmax ----------


@pytest.mark.parametrize("queries", [9, 1])  # 1: the `[CLS]`-only last block's query
def test_fused_equals_explicit_attention(queries):
    assert fused_kernel()  # PyTorch's SDPA kernel: the default ("auto") path of every block
    query, key, value, mask = attention_inputs(queries)
    explicit = numpy(explicit_attention(query, key, value, mask))
    fused = numpy(fused_attention(query, key, value, mask))
    np.testing.assert_allclose(fused, explicit, atol=1e-5)
    assert np.isfinite(fused).all()  # the all-padding row too


@pytest.mark.parametrize("queries", [9, 1])
def test_normalizing_after_the_values_equals_the_softmax_first(queries):
    check_normalize_last(queries)


@pytest.mark.parametrize("task", ["encoder", "classifier"])
def test_prediction_is_fused_and_equals_the_explicit_path(task, fused_calls):
    check_fused_prediction(task, fused_calls)


def test_training_with_attention_dropout_0_is_fused_and_equals_the_explicit_path(fused_calls):
    check_fused_training_step(fused_calls)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_attention_stays_finite(policy):
    encoder = kbz.build_encoder(**TINY, dtype=policy)
    out = encoder.predict(random_inputs(batch=2, length=8, lengths=[8, 0]), verbose=0)
    assert np.isfinite(np.asarray(out["sequence_output"], np.float32)).all()


def test_kbz_jobs_run_eagerly_on_torch_unless_asked():
    # torch.compile (Keras' jit_compile here) compiled C++ for minutes per batch shape on CPU.
    from keras_bert_zoo.cli import build_parser
    from keras_bert_zoo.cli.compile_flags import resolve_jit_compile

    base = ["finetune", "classify", "--preset", "p", "--train", "t", "--validation", "v"]
    for flags, expected in (([], False), (["--jit-compile"], True)):
        args = build_parser().parse_args([*base, "--output", "o", *flags])
        resolve_jit_compile(args)
        assert args.jit_compile is expected


@pytest.mark.e2e  # a fresh interpreter
def test_kbz_finetune_on_torch_exits_by_itself(tmp_path):
    # It used to write every output, then wait forever for idle executor workers (issue 28).
    preset = save_tiny_preset(tmp_path / "tiny", max_sequence_length=64)
    train = ROOT / "tests" / "data" / "finetune" / "sst2_train_head.tsv"
    argv = ["finetune", "classify", "--preset", str(preset), "--train", str(train)]
    argv += ["--validation", str(train), "--output", str(tmp_path / "run"), "--epochs", "1"]
    argv += ["--batch-size", "16", "--sequence-length", "32"]  # eager: torch's default
    env = {**os.environ, "KERAS_BACKEND": "torch", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "keras_bert_zoo.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,  # a hang raises TimeoutExpired; the run itself takes about a minute
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert 0.0 <= json.loads((tmp_path / "run" / "metrics.json").read_text())["accuracy"] <= 1.0
