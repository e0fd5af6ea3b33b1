"""The bad-input catalogue: every public entry point answers bad input with a clear error
or a documented, tested behaviour, never silent garbage. (More cases live beside their
module: readers, SQuAD, presets, converters, tokenizer, pretraining data, export.)"""

import re
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pytest
import tensorflow as tf
from conftest import random_inputs
from hypothesis import HealthCheck, given, settings

import keras_bert_zoo as kbz

PACKAGE = Path(kbz.__file__).parent


@pytest.fixture(scope="module")
def encoder():
    return kbz.build_encoder(
        vocabulary_size=1000,
        num_layers=1,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=64,
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda x: {**x, "token_ids": x["token_ids"].astype("float32") + 0.4},
            "`token_ids` must hold integer ids",
        ),
        (
            lambda x: {**x, "segment_ids": np.full(x["segment_ids"].shape, "a")},
            "Tokenize text first",
        ),
        (
            lambda x: {k: v for k, v in x.items() if k != "padding_mask"},
            r"missing input\(s\) \['padding_mask'\]",
        ),
        (lambda x: [x["token_ids"], x["segment_ids"], x["padding_mask"]], "takes a dict with keys"),
        (lambda x: {**x, "padding_mask": x["padding_mask"][:, ::-1].copy()}, "right padding"),
        (lambda x: {**x, "token_ids": x["token_ids"][:2]}, "same shape"),  # batch sizes differ
    ],
)
def test_bad_encoder_inputs_are_clear_errors(encoder, change, message):
    with pytest.raises(ValueError, match=message):
        encoder(change(random_inputs(lengths=[12, 9, 5])))


def test_extra_keys_are_ignored_not_misaligned(encoder):
    inputs = random_inputs()
    extra = {
        **inputs,
        "labels": np.ones_like(inputs["token_ids"]),
        "a_first_key": np.zeros_like(inputs["token_ids"]),
    }
    np.testing.assert_array_equal(encoder(extra)["pooled_output"], encoder(inputs)["pooled_output"])


@pytest.mark.parametrize("method", ["predict", "predict_on_batch"])
def test_string_ids_in_predict_are_clear_errors(encoder, method):
    inputs = {**random_inputs(), "token_ids": np.full((2, 8), "hello")}
    with pytest.raises(ValueError, match="`token_ids` must hold integer ids.*BertPreprocessor"):
        getattr(encoder, method)(inputs)


def test_datasets_of_text_or_missing_keys_are_clear_errors():
    classifier = kbz.build_classifier(
        kbz.build_encoder(
            vocabulary_size=100,
            num_layers=1,
            num_heads=2,
            hidden_dim=16,
            intermediate_dim=32,
            max_sequence_length=16,
        ),
        num_classes=2,
    )
    classifier.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    texts = tf.data.Dataset.from_tensor_slices(
        ({"token_ids": ["a b", "c"], "segment_ids": [[0], [0]], "padding_mask": [[1], [1]]}, [0, 1])
    ).batch(2)
    with pytest.raises(ValueError, match=r"non-integer dtypes: \{'token_ids': 'string'\}"):
        classifier.fit(texts, verbose=0)
    inputs = random_inputs(vocabulary_size=100)
    partial = tf.data.Dataset.from_tensor_slices(
        {k: v for k, v in inputs.items() if k != "segment_ids"}
    ).batch(2)
    with pytest.raises(ValueError, match=r"Missing: \['segment_ids'\]"):
        classifier.predict(partial, verbose=0)
    extra = {**inputs, "labels": np.zeros(len(inputs["token_ids"]), "int32")}
    np.testing.assert_allclose(
        classifier.predict(extra, verbose=0), classifier.predict(inputs, verbose=0), atol=1e-6
    )


def test_int64_ids_are_accepted(encoder):
    inputs = random_inputs()
    wide = {k: v.astype("int64") for k, v in inputs.items()}
    np.testing.assert_allclose(encoder(wide)["pooled_output"], encoder(inputs)["pooled_output"])


def test_left_padding_fails_in_graph_mode_too(encoder):
    inputs = random_inputs(lengths=[12, 9, 5])
    inputs["padding_mask"] = inputs["padding_mask"][:, ::-1].copy()
    with pytest.raises(tf.errors.InvalidArgumentError, match="right padding"):
        encoder.predict(inputs, verbose=0)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    batch=st.integers(1, 3),
    length=st.integers(1, 70),
    low=st.integers(-5, 999),
    high=st.integers(0, 1100),
    segment=st.integers(-1, 2),
    real=st.integers(0, 70),
)
def test_fuzzed_ids_give_finite_outputs_or_value_errors(
    encoder, batch, length, low, high, segment, real
):
    rng = np.random.default_rng(length)
    token_ids = rng.integers(min(low, high), max(low, high) + 1, (batch, length)).astype("int32")
    mask = (np.arange(length)[None] < min(real, length)).repeat(batch, 0).astype("int32")
    inputs = {
        "token_ids": token_ids,
        "segment_ids": np.full((batch, length), segment, "int32"),
        "padding_mask": mask,
    }
    try:
        out = encoder(inputs)
    except ValueError as error:
        assert re.search(r"must lie in|at most max_sequence_length", str(error))
        return
    assert np.isfinite(np.asarray(out["sequence_output"])).all()


@settings(max_examples=30, deadline=None)
@given(texts=st.lists(st.text(max_size=60), min_size=1, max_size=4))
def test_fuzzed_text_through_preprocessor_and_classifier(texts):
    preprocessor = _preprocessor()
    inputs = preprocessor(tf.constant(texts))
    assert all(tuple(v.shape) == (len(texts), 16) for v in inputs.values())
    out = _classifier()(inputs)
    assert np.isfinite(np.asarray(out)).all()


_CACHE = {}


def _preprocessor():
    if "pre" not in _CACHE:
        _CACHE["pre"] = kbz.BertPreprocessor.from_preset("bert_tiny_en_uncased", sequence_length=16)
    return _CACHE["pre"]


def _classifier():
    if "model" not in _CACHE:
        encoder = kbz.build_encoder(30522, 1, 2, 32, 64, max_sequence_length=64)
        _CACHE["model"] = kbz.build_classifier(encoder, num_classes=2)
    return _CACHE["model"]


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: kbz.from_preset("bert_tiny_en_uncased", task="summarizer", load_weights=False),
            "Unknown task 'summarizer'",
        ),
        (
            lambda: kbz.from_preset("bert_tinny_en_uncased", load_weights=False),
            "Did you mean 'bert_tiny_en_uncased'",
        ),
        (
            lambda: kbz.BertPreprocessor.from_preset("bert_tiny_en_uncased", sequence_length=513),
            "at most the preset's max_sequence_length",
        ),
    ],
)
def test_bad_names_and_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_no_eval_exec_or_pickle_in_the_package():
    # the one pickle reader is the user's explicit opt-in, and even it refuses code objects
    pattern = re.compile(
        r"\b(eval|exec)\s*\(|^\s*(import|from) (pickle|marshal|dill)\b|"
        r"\bpickle\.loads?\(|np\.load\(.*allow_pickle\s*=\s*True|"
        r"torch\.load\((?!.*weights_only=True)|\bsafe_mode\s*=\s*False"
    )
    offenders = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line) and not line.lstrip().startswith("#")
    ]
    assert offenders == []
