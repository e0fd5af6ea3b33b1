"""Packed rows on PyTorch: outputs and gradients equal to unpacked (tests/packed_parity.py);
collected only when Keras runs on PyTorch (conftest.py)."""

import pytest
from conftest import TINY
from packed_parity import check_packed_parity


@pytest.mark.parametrize("attention", ["explicit", "fused"])
def test_packed_outputs_and_gradients_equal_unpacked(attention):
    check_packed_parity(attention, TINY)
