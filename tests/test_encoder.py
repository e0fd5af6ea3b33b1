"""The encoder: layer names, shapes, invariants (padding, batching, save/load, XLA, bf16)."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import random_inputs

import keras_bert_zoo as kbz

EXPECTED_LAYER_NAMES = [
    "token_embedding",
    "position_embedding",
    "segment_embedding",
    "embeddings_layer_norm",
    "transformer_layer_0",
    "transformer_layer_1",
    "pooled_dense",
]


@pytest.fixture
def encoder(tiny_architecture):
    keras.utils.set_random_seed(1)
    return kbz.build_encoder(**tiny_architecture, dropout=0.0)


def test_layer_and_variable_names_are_stable(encoder):
    names = [layer.name for layer in encoder.layers]
    for expected in EXPECTED_LAYER_NAMES:
        assert expected in names
    paths = {v.path for v in encoder.weights}
    assert "transformer_layer_1/attention_qkv/kernel" in paths
    assert "transformer_layer_0/output_layer_norm/gamma" in paths
    assert "pooled_dense/kernel" in paths


@pytest.mark.parametrize("length", [1, 7, 64])
def test_output_shapes_any_length_up_to_maximum(encoder, length):
    out = encoder(random_inputs(batch=2, length=length, lengths=[length, length]))
    assert tuple(out["sequence_output"].shape) == (2, length, 32)
    assert tuple(out["pooled_output"].shape) == (2, 32)
    assert out["sequence_output"].dtype == "float32"


def test_padding_invariance(encoder):
    inputs = random_inputs(batch=2, length=10, lengths=[10, 6])
    short = {k: v[:, :10] for k, v in inputs.items()}
    padded = {k: np.pad(v, ((0, 0), (0, 15))) for k, v in short.items()}
    a, b = encoder(short), encoder(padded)
    mask = short["padding_mask"].astype(bool)
    np.testing.assert_allclose(
        np.asarray(a["sequence_output"])[mask],
        np.asarray(b["sequence_output"])[:, :10][mask],
        atol=1e-5,
    )
    np.testing.assert_allclose(a["pooled_output"], b["pooled_output"], atol=1e-5)


def test_batch_invariance(encoder):
    inputs = random_inputs(batch=4, length=12)
    batched = encoder(inputs)
    for i in range(4):
        row = encoder({k: v[i : i + 1] for k, v in inputs.items()})
        mask = inputs["padding_mask"][i].astype(bool)
        np.testing.assert_allclose(
            np.asarray(row["sequence_output"])[0][mask],
            np.asarray(batched["sequence_output"])[i][mask],
            atol=1e-5,
        )


def test_keras_save_load_round_trip_is_identical(encoder, tmp_path):
    inputs = random_inputs()
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    restored = keras.models.load_model(path, safe_mode=True)
    before, after = encoder(inputs), restored(inputs)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(before[key], after[key])


def test_jit_compile_equals_eager(encoder):
    inputs = random_inputs()
    compiled = tf.function(lambda x: encoder(x), jit_compile=True)(inputs)
    eager = encoder(inputs)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(compiled[key], eager[key], atol=1e-5)


def test_predict_graph_mode_equals_eager(encoder):
    inputs = random_inputs()
    np.testing.assert_allclose(
        encoder.predict(inputs, verbose=0)["pooled_output"],
        encoder(inputs)["pooled_output"],
        atol=1e-6,
    )


@pytest.mark.parametrize("policy, tolerance", [("float32", 1e-5), ("mixed_bfloat16", 2e-2)])
def test_layer_norm_equals_keras_layer_normalization(policy, tolerance):
    """`kbz.layers.LayerNorm` runs `(x - mean) * inv + beta` on TensorFlow without XLA where
    Keras runs `x * inv + (beta - mean * inv)`: with the same weights, the same outputs
    eagerly, in a graph and under XLA (which takes Keras' own call)."""
    rng = np.random.default_rng(0)
    x = rng.normal(2.0, 3.0, size=(4, 7, 16)).astype("float32")
    ours = kbz.layers.LayerNorm(epsilon=1e-12, dtype=policy)
    keras_own = keras.layers.LayerNormalization(epsilon=1e-12, dtype=policy)
    weights = [rng.normal(size=16).astype("float32") for _ in range(2)]  # gamma, beta
    for layer in (ours, keras_own):
        layer.build(x.shape)
        layer.set_weights(weights)
    expected = np.asarray(keras_own(x), np.float32)
    for run in (ours, tf.function(ours), tf.function(ours, jit_compile=True)):
        out = run(x)
        assert out.dtype == ours.compute_dtype
        np.testing.assert_allclose(
            np.asarray(out, np.float32), expected, rtol=tolerance, atol=tolerance
        )
    assert type(ours.from_config(ours.get_config())) is kbz.layers.LayerNorm


def test_mixed_bfloat16_runs_and_stays_finite(tiny_architecture):
    encoder = kbz.build_encoder(**tiny_architecture, dtype="mixed_bfloat16")
    out = encoder(random_inputs())
    assert out["sequence_output"].dtype == "bfloat16"
    assert np.isfinite(np.asarray(out["sequence_output"], np.float32)).all()
    assert encoder.get_layer("token_embedding").embeddings.dtype == "float32"


def test_all_padding_row_is_finite(encoder):
    inputs = random_inputs(batch=2, length=8, lengths=[8, 0])
    out = encoder(inputs)
    assert np.isfinite(np.asarray(out["sequence_output"])).all()


def test_gelu_variant_changes_outputs(tiny_architecture):
    inputs = random_inputs()
    outs = []
    for approximate in (False, True):
        keras.utils.set_random_seed(3)
        enc = kbz.build_encoder(**tiny_architecture, gelu_approximate=approximate, dropout=0.0)
        for i in range(2):  # pre-activations of order 1, where the two GELUs differ
            kernel = enc.get_layer(f"transformer_layer_{i}").intermediate.kernel
            kernel.assign(kernel * 50.0)
        outs.append(np.asarray(enc(inputs)["sequence_output"]))
    assert 1e-6 < np.abs(outs[0] - outs[1]).max() < 1e-1


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(token_ids=1000), "`token_ids` must lie in [0, 1000)"),
        (dict(token_ids=-1), "`token_ids` must lie in [0, 1000)"),
        (dict(segment_ids=2), "`segment_ids` must lie in [0, 2)"),
    ],
)
def test_out_of_range_ids_are_clear_errors(encoder, change, message):
    inputs = random_inputs()
    key, value = next(iter(change.items()))
    inputs[key][0, 0] = value
    with pytest.raises(ValueError, match=re.escape(message)):
        encoder(inputs)
    with pytest.raises(tf.errors.InvalidArgumentError, match=key):
        encoder.predict(inputs, verbose=0)


def test_too_long_sequence_is_a_clear_error(encoder):
    with pytest.raises(ValueError, match="at most max_sequence_length=64"):
        encoder(random_inputs(batch=1, length=65, lengths=[65]))


def test_mismatched_shapes_are_a_clear_error(encoder):
    inputs = random_inputs(batch=2, length=8)
    inputs["segment_ids"] = inputs["segment_ids"][:, :6]
    with pytest.raises(ValueError, match="same shape"):
        encoder(inputs)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(num_heads=3), "`num_heads` must divide `hidden_dim`"),
        (dict(num_layers=0), "`num_layers` must be a positive integer"),
        (dict(vocabulary_size=12.5), "`vocabulary_size` must be a positive integer"),
    ],
)
def test_bad_architecture_arguments(tiny_architecture, change, message):
    with pytest.raises(ValueError, match=message):
        kbz.build_encoder(**{**tiny_architecture, **change})


def test_layers_check_their_arguments_and_input_width():
    with pytest.raises(ValueError, match="`intermediate_dim` must be a positive integer"):
        kbz.layers.TransformerEncoderBlock(num_heads=2, hidden_dim=8, intermediate_dim=0)
    with pytest.raises(ValueError, match=r"`dropout` must be a number in \[0, 1\)"):
        kbz.layers.TransformerEncoderBlock(
            num_heads=2, hidden_dim=8, intermediate_dim=16, dropout=1.5
        )
    block = kbz.layers.TransformerEncoderBlock(num_heads=2, hidden_dim=8, intermediate_dim=16)
    with pytest.raises(
        ValueError,
        match="expects inputs of width hidden_dim=8. Received: "
        r"input shape \(2, 3, 6\)",
    ):
        block(np.zeros((2, 3, 6), "float32"), padding_mask=np.ones((2, 3), "int32"))
    head = kbz.layers.MaskedLMHead(hidden_dim=8)
    with pytest.raises(ValueError, match="expects a sequence of width hidden_dim=8"):
        head(np.zeros((2, 3, 6), "float32"), np.zeros((2, 1), "int32"))
