"""Agreement with pytorch-crf 0.7.2 and the drop-in ``crfhead.compat.torchcrf.CRF``."""

from __future__ import annotations

import pytest
import torch

from crfhead import CRF
from crfhead.compat import torchcrf as compat

torchcrf = pytest.importorskip("torchcrf")


def _left_aligned(
    seed: int, B: int, T: int, K: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    E = torch.randn(B, T, K, generator=g)
    tags = torch.randint(0, K, (B, T), generator=g)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0] = T
    mask = torch.arange(T)[None] < lengths[:, None]
    return E, tags, mask


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("reduction", ["none", "sum", "mean", "token_mean"])
def test_log_likelihood_and_decode_agree_with_pytorch_crf(seed: int, reduction: str) -> None:
    E, tags, mask = _left_aligned(seed, B=6, T=12, K=7)
    theirs = torchcrf.CRF(7, batch_first=True)
    ours = CRF(7)
    ours.load_state_dict(theirs.state_dict())
    want = theirs(E, tags, mask, reduction=reduction)
    torch.testing.assert_close(
        -ours.nll(E, tags, mask, reduction=reduction), want, rtol=1e-5, atol=1e-5
    )
    decoded = ours.decode(E, mask)
    assert [[t for t in row if t >= 0] for row in decoded.tolist()] == theirs.decode(E, mask)


@pytest.mark.parametrize("batch_first", [False, True])
def test_compat_layer_is_a_drop_in_replacement(batch_first: bool) -> None:
    E, tags, mask = _left_aligned(7, B=4, T=9, K=5)
    if not batch_first:
        E, tags, mask = E.transpose(0, 1), tags.transpose(0, 1), mask.transpose(0, 1)
    theirs = torchcrf.CRF(5, batch_first=batch_first)
    ours = compat.CRF(5, batch_first=batch_first)
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(
        ours(E, tags, mask.byte()), theirs(E, tags, mask.byte()), rtol=1e-5, atol=1e-5
    )
    torch.testing.assert_close(ours(E, tags), theirs(E, tags), rtol=1e-5, atol=1e-5)
    assert ours.decode(E, mask) == theirs.decode(E, mask)
    assert ours.decode(E) == theirs.decode(E)


def test_compat_gradients_match_pytorch_crf() -> None:
    E, tags, mask = _left_aligned(3, B=5, T=10, K=4)
    theirs = torchcrf.CRF(4, batch_first=True)
    ours = compat.CRF(4, batch_first=True)
    ours.load_state_dict(theirs.state_dict())
    theirs(E, tags, mask).backward()
    ours(E, tags, mask).backward()
    for name in ("transitions", "start_transitions", "end_transitions"):
        torch.testing.assert_close(
            getattr(ours, name).grad, getattr(theirs, name).grad, rtol=1e-4, atol=1e-5
        )


def test_compat_accepts_left_padding_that_pytorch_crf_rejects() -> None:
    E, tags, mask = _left_aligned(1, B=3, T=6, K=4)
    shifts = [int(s) for s in mask.shape[1] - mask.sum(1)]

    def left_pad(x: torch.Tensor) -> torch.Tensor:
        return torch.stack([row.roll(s, dims=0) for row, s in zip(x, shifts, strict=True)])

    left = left_pad(mask)
    assert not left[:, 0].all()
    ours = compat.CRF(4, batch_first=True)
    with pytest.raises(ValueError):
        torchcrf.CRF(4, batch_first=True)(E, tags, left)
    llh = ours(left_pad(E), left_pad(tags), left, reduction="none")
    torch.testing.assert_close(llh, ours(E, tags, mask, reduction="none"), rtol=1e-5, atol=1e-5)


def test_compat_rejects_float_mask() -> None:
    with pytest.raises(ValueError, match=r"mask must be bool or uint8, got torch\.float32"):
        compat.CRF(3).decode(torch.zeros(2, 1, 3), torch.ones(2, 1))
