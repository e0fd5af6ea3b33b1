"""The model path on JAX (issue 16): run by `make test` as `KERAS_BACKEND=jax pytest`.

Only collected when Keras runs on JAX (conftest.py). Tiny configurations, so the whole
process stays short; the real MiniLM checkpoint checks parity with Hugging Face at 1e-4.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
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
)

import keras_bert_zoo as kbz
from keras_bert_zoo.layers.attention import explicit_attention, fused_attention, fused_kernel
from keras_bert_zoo.pretraining import compile_pretrainer

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures"
NAMES = ("token_ids", "segment_ids", "padding_mask")


def numpy(x):
    return keras.ops.convert_to_numpy(x)


@pytest.fixture
def encoder():
    keras.utils.set_random_seed(3)
    return kbz.build_encoder(**TINY)


def test_keras_runs_on_jax():
    assert keras.backend.backend() == "jax"


def test_prediction_on_a_cpu_takes_finer_buckets_and_equals_full_padding(monkeypatch):
    from keras_bert_zoo.training import bucketed_prediction

    keras.utils.set_random_seed(3)
    encoder = kbz.build_encoder(**{**TINY, "max_sequence_length": 128})
    model = keras.Model(encoder.input, encoder.output["pooled_output"])
    assert not bucketed_prediction.predicts_any_shape(model)  # XLA: one program per bucket
    buckets = bucketed_prediction.prediction_buckets(model, 128)
    assert buckets == bucketed_prediction.cpu_bucket_lengths(128) == [16, 32, 64, 96, 128]
    x = random_inputs(batch=9, length=128, lengths=[128, 3, 90, 70, 20, 100, 40, 66, 97])
    shapes, predict = record_predict_shapes(model, monkeypatch)
    trimmed = bucketed_prediction.predict(model, x, 2, buckets, sequence_outputs=False)
    assert {width for _, width in shapes} == {16, 64, 96, 128}  # 96: not a power of two
    assert all(rows % 2 == 0 for rows, _ in shapes)  # whole batches only
    np.testing.assert_allclose(trimmed, predict(x, verbose=0), atol=1e-5)


@pytest.mark.e2e  # a fresh interpreter
def test_model_work_imports_no_tensorflow(tmp_path):
    # Then `.keras` saving with TensorFlow blocked: Keras' own serializer imports TensorFlow
    # whenever it is installed (serialization_lib.py checks for tf.TensorShape), on every
    # backend, and does without it when it is not.
    code = f"""
import sys
import keras_bert_zoo as kbz
import numpy as np
encoder = kbz.build_encoder(**{TINY!r})
x = {{k: np.ones((2, 8), "int32") for k in ("token_ids", "segment_ids", "padding_mask")}}
encoder.predict(x, verbose=0)
vocabulary = ["[PAD]"] + [f"t{{i}}" for i in range(1, 1000)]
kbz.save_preset(encoder, {str(tmp_path / "p")!r}, vocabulary=vocabulary, lowercase=True)
classifier = kbz.from_preset({str(tmp_path / "p")!r}, task="classifier", num_classes=2)
classifier.predict(x, verbose=0)
kbz.checkpoints.read_huggingface
classifier.compile(optimizer=kbz.training.create_optimizer(1e-4, total_steps=4), loss="mse")
print(sorted(m for m in ("tensorflow", "tensorflow_text") if m in sys.modules))

class NoTensorFlow:  # as if TensorFlow were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_text"):
            raise ImportError(f"No module named {{name!r}} (blocked by the test)")

sys.meta_path.insert(0, NoTensorFlow())
classifier.save({str(tmp_path / "m.keras")!r})
restored = kbz.load_model({str(tmp_path / "m.keras")!r})
print(float(np.abs(restored.predict(x, verbose=0) - classifier.predict(x, verbose=0)).max()))
"""
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[-2] == "[]"
    assert float(lines[-1]) == 0.0


def test_forward_predict_and_padding_invariance(encoder):
    x = random_inputs(lengths=[12, 7, 3])
    eager = encoder(x)
    predicted = encoder.predict(x, verbose=0)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(numpy(eager[key]), predicted[key], atol=1e-5)
    # extra padding must not change the outputs of real tokens
    padded = {k: np.pad(v, [(0, 0), (0, 9)]) for k, v in x.items()}
    longer = encoder.predict(padded, verbose=0)
    real = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(
        longer["sequence_output"][:, :12][real], predicted["sequence_output"][real], atol=1e-5
    )


@pytest.mark.parametrize(
    ("task", "kwargs", "shapes"),
    [
        ("classifier", {"num_classes": 3}, {None: (3, 3)}),
        ("tagger", {"num_tags": 5}, {None: (3, 12, 5)}),
        ("question_answerer", {}, {"start_logits": (3, 12), "end_logits": (3, 12)}),
    ],
)
def test_task_forward_shapes(encoder, task, kwargs, shapes):
    out = kbz.tasks.build_task(task, encoder, **kwargs).predict(random_inputs(), verbose=0)
    for key, shape in shapes.items():
        value = out if key is None else out[key]
        assert value.shape == shape and np.isfinite(value).all()


def test_input_check_messages_eagerly_in_predict_and_under_jit(encoder):
    x = random_inputs()
    bad = {**x, "token_ids": x["token_ids"] + 1000}
    with pytest.raises(ValueError, match=r"`token_ids` must lie in \[0, 1000\)"):
        encoder(bad)
    with pytest.raises(ValueError, match=r"`token_ids` must lie in \[0, 1000\)"):
        encoder.predict(bad, verbose=0)  # read before the compiled step, which has no assertion
    left = {**x, "padding_mask": x["padding_mask"][:, ::-1].copy()}
    with pytest.raises(ValueError, match="right padding"):
        encoder.predict(left, verbose=0)

    # a stateless call under jax.jit: shapes and dtypes are checked while tracing
    variables = (
        [v.value for v in encoder.trainable_variables],
        [v.value for v in encoder.non_trainable_variables],
    )

    @jax.jit
    def forward(variables, inputs):
        return encoder.stateless_call(*variables, inputs)[0]["pooled_output"]

    short = {**x, "segment_ids": x["segment_ids"][:, :5]}
    with pytest.raises(ValueError, match="must all be \\[batch, sequence\\] with the same shape"):
        forward(variables, short)
    long = {k: np.zeros((2, 70), "int32") for k in NAMES}
    with pytest.raises(ValueError, match="at most max_sequence_length=64 tokens"):
        forward(variables, long)
    # a failed trace leaves nothing broken: the same function and predict work afterwards
    np.testing.assert_allclose(
        numpy(forward(variables, x)), encoder.predict(x, verbose=0)["pooled_output"], atol=1e-5
    )
    encoder.predict(x, verbose=0)


def _sst2(count=64, length=16):
    lines = (Path(__file__).parent / "data" / "sst2_train_subset.tsv").read_text().splitlines()
    rows = [line.rsplit("\t", 1) for line in lines[1 : count + 1]]
    return [text for text, _ in rows], np.array([int(label) for _, label in rows], "int32")


def test_jit_fit_of_a_classifier_lowers_the_loss(encoder):
    x = random_inputs(batch=8, length=12, seed=1, lengths=[12, 11, 10, 9, 8, 7, 6, 5])
    y = np.array([0, 1, 1, 0, 1, 0, 0, 1], "int32")
    classifier = kbz.build_classifier(encoder, num_classes=2)
    classifier.compile(keras.optimizers.Adam(3e-3), kbz.tasks.classifier_loss(2), jit_compile=True)
    before = classifier.evaluate(x, y, verbose=0)
    history = classifier.fit(x, y, batch_size=8, epochs=10, verbose=0)
    assert history.history["loss"][-1] < 0.5 * before
    assert classifier.train_on_batch(x, y) < before  # the failing call


def test_lora_trains_only_adapters_and_head_under_jit_and_merges(encoder, tmp_path):
    x = random_inputs(batch=8, length=12, seed=1, lengths=[12, 11, 10, 9, 8, 7, 6, 5])
    y = np.array([0, 1, 1, 0, 1, 0, 0, 1], "int32")
    classifier = kbz.enable_lora(kbz.build_classifier(encoder, num_classes=2), rank=4)
    frozen = [numpy(v).copy() for v in kbz.lora.base_kernels(classifier)]
    classifier.compile(keras.optimizers.Adam(1e-2), kbz.tasks.classifier_loss(2), jit_compile=True)
    before = classifier.evaluate(x, y, verbose=0)
    classifier.fit(x, y, batch_size=8, epochs=5, verbose=0)
    assert classifier.evaluate(x, y, verbose=0) < before
    for value, variable in zip(frozen, kbz.lora.base_kernels(classifier), strict=True):
        np.testing.assert_array_equal(numpy(variable), value)
    np.testing.assert_allclose(
        numpy(kbz.merge_lora(classifier)(x)), numpy(classifier(x)), atol=1e-5
    )
    path = kbz.save_lora_weights(classifier, tmp_path / "adapter.safetensors")
    keras.utils.set_random_seed(3)  # the fixture's base weights again, a new head
    fresh = kbz.build_classifier(kbz.build_encoder(**TINY), num_classes=2)
    kbz.load_lora_weights(fresh, path)
    np.testing.assert_allclose(numpy(fresh(x)), numpy(classifier(x)), atol=1e-6)


def test_jit_fit_of_a_pretrainer_lowers_the_loss(encoder):
    rng = np.random.default_rng(0)
    x = random_inputs(batch=4, length=16, lengths=[16] * 4)
    x["mask_positions"] = np.sort(rng.integers(1, 16, (4, 5)), 1).astype("int32")
    y = {
        "mlm_logits": rng.integers(0, 1000, (4, 5)).astype("int32"),
        "nsp_logits": np.array([0, 1, 0, 1], "int32"),
    }
    model = compile_pretrainer(
        kbz.build_pretrainer(encoder, max_predictions=5), keras.optimizers.Adam(2e-3), True
    )
    before = model.evaluate(x, y, verbose=0, return_dict=True)["loss"]
    history = model.fit(x, y, epochs=20, verbose=0)
    assert history.history["loss"][-1] < 0.7 * before


def test_keras_file_round_trip_gives_equal_outputs(encoder, tmp_path):
    classifier = kbz.build_classifier(encoder, num_classes=3, label_names=["a", "b", "c"])
    path = tmp_path / "classifier.keras"
    classifier.save(path)
    restored = kbz.load_model(path)
    x = random_inputs()
    np.testing.assert_array_equal(classifier.predict(x, verbose=0), restored.predict(x, verbose=0))
    assert restored.task == "classifier" and restored.task_config["label_names"] == ["a", "b", "c"]


def test_preset_round_trip_gives_equal_outputs(encoder, tmp_path):
    vocabulary = ["[PAD]"] + [f"tok{i}" for i in range(1, 1000)]
    directory = kbz.save_preset(encoder, tmp_path / "tiny", vocabulary=vocabulary, lowercase=True)
    restored = kbz.from_preset(str(directory))
    x = random_inputs()
    np.testing.assert_array_equal(
        encoder.predict(x, verbose=0)["sequence_output"],
        restored.predict(x, verbose=0)["sequence_output"],
    )


def test_real_minilm_matches_huggingface_within_1e4(minilm_preset):
    reference = dict(np.load(FIXTURES / "minilm_hf_reference.npz", allow_pickle=False))
    provenance = json.loads((FIXTURES / "minilm_hf_reference.json").read_text())
    assert provenance["tolerance"].startswith("1e-4")
    encoder = kbz.from_preset(str(minilm_preset))
    out = encoder({k: reference[k] for k in NAMES})
    real = reference["padding_mask"].astype(bool)
    error = np.abs(numpy(out["sequence_output"]) - reference["sequence_output"])[real]
    assert error.max() < 1e-4
    pooled = np.abs(numpy(out["pooled_output"]) - reference["pooled_output"])
    assert pooled.max() < 1e-4


# --- fused attention (keras.ops.dot_product_attention) against the explicit softmax ----------


@pytest.mark.parametrize("queries", [9, 1])  # 1: the `[CLS]`-only last block's query
def test_fused_equals_explicit_attention(queries):
    query, key, value, mask = attention_inputs(queries)
    explicit = numpy(explicit_attention(query, key, value, mask))
    fused = numpy(fused_attention(query, key, value, mask))
    np.testing.assert_allclose(fused, explicit, atol=1e-5)
    assert np.isfinite(fused).all()  # the all-padding row too


@pytest.mark.parametrize("queries", [9, 1])
def test_normalizing_after_the_values_equals_the_softmax_first(queries):
    check_normalize_last(queries)


def test_by_default_jax_normalizes_after_the_values_unless_dropping():
    """Under JAX the explicit path divides the `[.., queries, head_dim]` context by the
    softmax's sums, not the `[.., queries, keys]` probabilities, except where probabilities
    are dropped. Read from the traced program's divisions."""
    query, key, value, mask = attention_inputs(queries=9, keys=9)  # head_dim 8

    def divided_widths(**kwargs):
        program = jax.make_jaxpr(lambda q, k, v: explicit_attention(q, k, v, mask, **kwargs))
        return set(re.findall(r"f32\[3,2,9,(\d+)\] = div", str(program(query, key, value))))

    assert divided_widths() == {"8"}
    assert divided_widths(normalize_last=False) == {"9"}
    dropout = kbz.layers.Dropout(0.1, seed=1)
    assert divided_widths(dropout=dropout, training=True) == {"9"}
    assert divided_widths(dropout=dropout, training=False) == {"8"}


def test_by_default_jax_on_a_cpu_predicts_with_the_explicit_softmax(fused_calls):
    """JAX on a CPU has no fused attention kernel (XLA:CPU writes the fused op out as einsums,
    `fused_kernel`): "auto" takes the explicit softmax there, with the same outputs."""
    assert not fused_kernel()  # this tier runs on the CPU
    keras.utils.set_random_seed(4)
    default = kbz.build_encoder(**TINY)
    fused = kbz.build_encoder(**TINY)
    fused.set_weights(default.get_weights())
    kbz.encoder.set_attention(fused, "fused")
    x = random_inputs(batch=4, length=10, lengths=[10, 7, 2, 1])
    fused_calls.clear()
    a = default.predict(x, verbose=0)["sequence_output"]
    assert not fused_calls
    b = fused.predict(x, verbose=0)["sequence_output"]
    assert fused_calls
    real = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(a[real], b[real], atol=1e-5)


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
