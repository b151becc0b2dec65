"""The uniform-threshold dropout: nn.Dropout's contract (rate, scale, modes, gradient) on the CPU."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from crfhead.encoders.dropout import Dropout, dropout


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_rate_and_scale(p: float) -> None:
    torch.manual_seed(0)
    x = torch.ones(200_000)
    y = dropout(x, p, True)
    kept = y != 0
    n = x.numel()
    sd = math.sqrt(n * p * (1 - p))
    assert abs(int(kept.sum()) - n * (1 - p)) < 5 * sd
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / (1 - p)))


def test_modes_and_limits() -> None:
    x = torch.randn(4, 5)
    assert dropout(x, 0.5, False) is x
    assert dropout(x, 0.0, True) is x
    assert torch.equal(dropout(x, 1.0, True), torch.zeros_like(x))
    module = Dropout(0.3)
    assert repr(module) == repr(nn.Dropout(0.3)) and module.state_dict() == {}
    module.eval()
    assert module(x) is x


def test_gradient_is_the_mask_times_the_scale() -> None:
    torch.manual_seed(1)
    x = torch.randn(50, 40, requires_grad=True)
    y = dropout(x, 0.25, True)
    (g,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(g, (y != 0).float() / 0.75)
    torch.testing.assert_close(y, x.detach() * g)


def test_seeded_and_dtypes_kept() -> None:
    x = torch.randn(30, 30)
    torch.manual_seed(5)
    a = dropout(x, 0.5, True)
    torch.manual_seed(5)
    assert torch.equal(a, dropout(x, 0.5, True))
    for dtype in (torch.bfloat16, torch.float16, torch.float64):
        y = dropout(x.to(dtype), 0.5, True)
        assert y.dtype == dtype
        kept = y != 0
        torch.testing.assert_close(y[kept], (x.to(dtype) * 2)[kept])


def test_inplace_module_is_nn_dropout() -> None:
    torch.manual_seed(2)
    x = torch.ones(1000)
    Dropout(0.5, inplace=True)(x)
    assert set(x.unique().tolist()) <= {0.0, 2.0}


def test_the_native_pass_runs_for_contiguous_float32_and_torch_elsewhere() -> None:
    from crfhead.encoders import dropout as module

    ok, why = module.native_status()
    if not ok:
        pytest.skip(f"the native pass does not build here: {why}")
    x = torch.randn(64, 70)
    assert module._native(x, 0.3) is not None
    assert module._native(x.t(), 0.3) is None  # not contiguous: torch's draw
    assert module._native(x.double(), 0.3) is None
    torch.manual_seed(3)
    y = dropout(x.t(), 0.3, True)  # the fallback keeps the same contract
    kept = y != 0
    torch.testing.assert_close(y[kept], x.t()[kept] / 0.7)


def test_masks_of_successive_calls_are_independent() -> None:
    torch.manual_seed(4)
    x = torch.ones(400_000)
    p = 0.5
    a, b = dropout(x, p, True) != 0, dropout(x, p, True) != 0
    n = x.numel()
    both = int((a & b).sum())
    sd = math.sqrt(n * 0.25 * 0.75)
    assert abs(both - n * 0.25) < 5 * sd  # two keys: no shared mask
    neighbours = int((a[1:] & a[:-1]).sum())
    assert abs(neighbours - (n - 1) * 0.25) < 5 * sd  # within a call: adjacent elements too


def test_gradient_of_a_non_contiguous_gradient_and_no_grad_input() -> None:
    torch.manual_seed(6)
    x = torch.randn(20, 30, requires_grad=True)
    y = dropout(x, 0.4, True)
    upstream = torch.randn(30, 20).t()  # a transposed gradient
    (g,) = torch.autograd.grad(y, x, upstream)
    torch.testing.assert_close(g, upstream * (y != 0) / 0.6)
    with torch.no_grad():
        z = dropout(x, 0.4, True)
    assert not z.requires_grad
    kept = z != 0
    torch.testing.assert_close(z[kept], x.detach()[kept] / 0.6)
