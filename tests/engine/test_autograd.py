"""The ``fused`` gradient rule: gold counts, the composed loss, the autograd function on every backend.

Oracles: the gold path's counts are the autograd gradient of its score; the composed loss and its
gradient's parts are ``log Z - score`` and its autograd gradient; every backend's ``ChainFunction``
passes ``gradcheck`` and ``gradgradcheck`` in float64.
"""

from __future__ import annotations

import pytest
import torch
from helpers import Chain, chains, random_chain
from hypothesis import given
from hypothesis import strategies as st

from crfhead.engine import make_potentials, nll, scan
from crfhead.engine.backends import available, portable
from crfhead.engine.backends.autograd import gold_counts
from crfhead.engine.potentials import ChainPotentials
from crfhead.engine.table import run

BACKENDS = [b for b in ("portable", "cpu") if available(b)[0]]


def _pot(c: Chain, grad: bool = False) -> ChainPotentials:
    tensors = [x.clone().requires_grad_(grad) for x in (c.emissions, c.transitions, c.start, c.end)]
    return make_potentials(*tensors, c.mask)


def _tags(c: Chain, seed: int) -> torch.Tensor:
    B, T, K = c.emissions.shape
    g = torch.Generator().manual_seed(seed)
    tags = torch.randint(0, K, (B, T), generator=g)
    return torch.where(c.mask, tags, torch.full_like(tags, -100))


@given(chains())
def test_gold_counts_are_the_gradient_of_the_gold_score(c: Chain) -> None:
    pot = _pot(c, grad=True)
    tags = _tags(c, 0)
    score = scan.score(pot, tags)
    grads = torch.autograd.grad(
        score.sum(), (pot.emissions, pot.transitions, pot.start, pot.end), allow_unused=True
    )
    counts = gold_counts(pot, tags, edges=True)
    assert torch.allclose(counts.value, score.detach())
    B = c.emissions.shape[0]
    edge = counts.edge if pot.per_position else counts.edge.sum(0)  # type: ignore[union-attr]
    for got, want in zip(
        (counts.node, edge, counts.first.sum(0), counts.last.sum(0)),  # type: ignore[union-attr]
        grads,
        strict=True,
    ):
        want = torch.zeros_like(got) if want is None else want
        assert torch.allclose(got, want.reshape(got.shape)), (B, got, want)


@given(chains(), st.integers(0, 3), st.integers(0, 2**31 - 1))
def test_weighted_path_counts_are_the_gradient_of_the_paths_scores(
    c: Chain, R: int, seed: int
) -> None:
    """``score_grads``, without autograd, for ``(B, T)`` tags (R = 0) and ``(B, R, T)`` ones, with
    any weights (zero and negative too)."""
    pot = _pot(c, grad=True)
    B, T, K = c.emissions.shape
    g = torch.Generator().manual_seed(seed)
    shape = (B, R, T) if R else (B, T)
    tags = torch.randint(0, K, shape, generator=g)
    tags = torch.where(c.mask.unsqueeze(1) if R else c.mask, tags, torch.full_like(tags, -100))
    weights = torch.randn(shape[:-1], generator=g, dtype=c.emissions.dtype)
    weights.view(-1)[::3] = 0.0
    leaves = (pot.emissions, pot.transitions, pot.start, pot.end)
    want = torch.autograd.grad((weights * scan.score(pot, tags)).sum(), leaves, allow_unused=True)
    got = scan.score_grads(pot, tags, weights)
    for x, g_got, g_want in zip(leaves, got, want, strict=True):
        assert g_got.shape == x.shape and g_got.dtype == x.dtype
        g_want = torch.zeros_like(x) if g_want is None else g_want
        torch.testing.assert_close(g_got, g_want, rtol=0, atol=1e-12)


@given(chains())
def test_composed_nll_is_log_z_minus_score_with_its_gradient(c: Chain) -> None:
    pot = _pot(c, grad=True)
    tags = _tags(c, 1)
    leaves = (pot.emissions, pot.transitions, pot.start, pot.end)
    want = scan.log_partition(pot) - scan.score(pot, tags)
    want_grads = torch.autograd.grad(want.sum(), leaves, allow_unused=True)
    with torch.no_grad():
        m, gold = portable.nll(pot, tags, grads=True, edges=True)
    assert torch.allclose(m.value, want.detach())
    assert torch.allclose(gold, scan.score(pot, tags).detach())
    got = scan.scale_grads(torch.ones_like(m.value), m, pot.per_position)
    for g, w in zip(got, want_grads, strict=True):
        assert g is not None
        assert torch.allclose(g, torch.zeros_like(g) if w is None else w, atol=1e-10)


def test_the_portable_loss_refuses_an_out_of_range_tag_naming_it() -> None:
    c = random_chain(0, 2, 4, 3, holes=False)
    tags = torch.zeros(2, 4, dtype=torch.long)
    tags[1, 2] = 3
    with pytest.raises(ValueError, match=r"tag 3 at unmasked position \(batch 1, time 2\)"):
        nll(_pot(c), tags, backend="portable")


def _eager_ops(backend: str, eager: bool) -> bool:
    """Whether the cpu backend's eager ops run (switched for the test by the caller)."""
    if backend != "cpu" or not eager:
        return False
    from crfhead.engine.backends.cpu import dispatcher as eager_ops

    return eager_ops.status()[0]


@pytest.mark.parametrize(("backend", "eager"), [(b, False) for b in BACKENDS] + [("cpu", True)])
@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("with_tags", [False, True])
def test_chain_function_gradcheck_and_gradgradcheck_for_every_backend(
    backend: str, eager: bool, per_position: bool, with_tags: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fused rule, by the Python autograd function and by the eager ops' C++ one."""
    from crfhead.engine.backends.cpu import dispatcher as eager_ops

    monkeypatch.setattr(eager_ops, "_enabled", eager)
    if eager and not _eager_ops(backend, eager):
        pytest.skip("the cpu backend's eager ops do not build here")
    node = "CppNode<crfhead::FusedChain>" if eager else "ChainFunctionBackward"
    c = random_chain(3, 3, 5, 3, per_position=per_position)
    tags = torch.where(c.mask, _tags(c, 2), 0) if with_tags else None

    def f(em: torch.Tensor, tr: torch.Tensor, st: torch.Tensor, en: torch.Tensor) -> torch.Tensor:
        pot = ChainPotentials(em, tr, st, en, c.mask)
        if tags is None:
            value: torch.Tensor = run("log_partition", pot, backend=backend)
        else:
            value = run("nll", pot, tags, backend=backend)[0]
        assert node in value.grad_fn.name()
        return value

    inputs = tuple(
        x.clone().requires_grad_(True) for x in (c.emissions, c.transitions, c.start, c.end)
    )
    assert torch.autograd.gradcheck(f, inputs)
    assert torch.autograd.gradgradcheck(f, inputs)
