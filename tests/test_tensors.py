"""crfhead.tensors.long_tensor against torch.tensor: same values, dtype and device; its errors."""

from __future__ import annotations

import pytest
import torch

from crfhead.tensors import long_tensor


@pytest.mark.parametrize(
    "values", [[], [0], [3, -1, 7], list(range(-500, 500)), [2**63 - 1, -(2**63)]]
)
def test_equals_torch_tensor(values: list[int]) -> None:
    got = long_tensor(values)
    want = torch.tensor(values, dtype=torch.long)
    assert got.dtype == torch.int64 and got.shape == want.shape
    assert torch.equal(got, want)


def test_outlives_its_buffer_and_is_writable() -> None:
    got = long_tensor([5] * 1000)
    _ = [bytearray(8000) for _ in range(100)]  # reuse freed memory, if the buffer were freed
    assert got.sum().item() == 5000
    got[0] = 1  # a tensor of its own, not a read-only view
    assert got[0].item() == 1


def test_refuses_what_is_not_an_int64() -> None:
    with pytest.raises(OverflowError):
        long_tensor([2**63])
    with pytest.raises(TypeError):
        long_tensor([1.5])  # type: ignore[list-item]
