"""Packed rows on PyTorch: outputs, gradients and a classifier's, a tagger's, an embedder's and a
reranker's fit step equal to unpacked (tests/packed_parity.py); collected only when Keras runs on
PyTorch (conftest.py)."""

import pytest
from conftest import TINY
from packed_parity import (
    check_packed_embedder_fit_step,
    check_packed_fit_step,
    check_packed_parity,
    check_packed_reranker_fit_step,
    check_packed_tagger_fit_step,
)
from packed_prediction_parity import check_packed_prediction


@pytest.mark.parametrize("attention", ["explicit", "fused"])
def test_packed_outputs_and_gradients_equal_unpacked(attention):
    check_packed_parity(attention, TINY)


@pytest.mark.parametrize("num_classes", [3, 1])
def test_a_packed_fit_step_equals_the_unpacked_one(num_classes):
    check_packed_fit_step(TINY, num_classes)


@pytest.mark.parametrize("empty_rows", [0])
def test_a_packed_tagger_fit_step_equals_the_unpacked_one(empty_rows):
    check_packed_tagger_fit_step(TINY, empty_rows)


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_a_packed_embedder_fit_step_equals_the_unpacked_one(pooling):
    check_packed_embedder_fit_step(TINY, empty_rows=1, pooling=pooling)


@pytest.mark.parametrize(
    ("ranking_loss", "empty_rows"), [("listwise", 0), ("listwise", 2), ("pointwise", 2)]
)
def test_a_packed_reranker_fit_step_equals_the_unpacked_one(ranking_loss, empty_rows):
    check_packed_reranker_fit_step(TINY, ranking_loss, empty_rows)


@pytest.mark.parametrize("head", [3, "reranker", "mean"])
def test_packed_prediction_equals_bucketed_in_the_order_given(head):
    check_packed_prediction(TINY, head, jit_compile=False)  # eager: PyTorch's default
