"""Every probability-like result stays in its range in float32 at extreme score scales, on every backend.

Max-marginals and marginals are in ``[0, 1]``, the entropy and the loss of any allowed path (the
Viterbi path's included) are ``>= 0``. The max-marginals, the entropy and the loss are differences
of two numbers of the size of ``log Z`` (``best - log Z``, ``log Z - E[score]``, ``log Z - score``):
random scores scaled to 1e4..1e7 (``log Z`` up to ~1e9) once took them to 54.6 or 7.9e13, -128, -7.
On the cpu backend they are also exact (against float64 on the same float32 scores); the gradients
of the clamped values stay the quantities' own.
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from crfhead import CRF, engine, make_potentials
from crfhead.engine.backends.select import available, use_backend
from crfhead.engine.potentials import ChainPotentials, constrain
from crfhead.heads.base import ChainHead
from crfhead.schemes import allowed_transitions

BACKENDS = [b for b in ("portable", "cpu") if available(b)[0]]
SCALES = [1e4, 1e6, 1e7]
BIOES = ["O"] + [f"{p}-{t}" for t in "ABCD" for p in "BIES"]  # K = 17


def _chain(scale: float, constrained: bool, dtype: torch.dtype = torch.float32) -> ChainPotentials:
    g = torch.Generator().manual_seed(int(scale) % 1000 + constrained)
    K = len(BIOES) if constrained else 5
    em = torch.randn(3, 40, K, generator=g, dtype=torch.float64) * scale
    tr = torch.randn(K, K, generator=g, dtype=torch.float64) * scale
    start, end = torch.zeros(K, dtype=torch.float64), torch.zeros(K, dtype=torch.float64)
    if constrained:
        allowed, first, last = allowed_transitions(BIOES, "BIOES")
        tr, start, end = constrain(tr, allowed), constrain(start, first), constrain(end, last)
    # The float32 scores, and float64 copies of exactly those values: the reference.
    em, tr = em.float(), tr.float()
    return make_potentials(*(x.to(dtype) for x in (em, tr, start, end)))


def _wide(pot: ChainPotentials) -> ChainPotentials:
    return make_potentials(*(x.double() for x in pot.chain[:4]), pot.mask)


CASES = [(s, c) for s in SCALES for c in (False, True)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("scale", "constrained"), CASES)
def test_max_marginals_and_marginals_are_probabilities(
    backend: str, scale: float, constrained: bool
) -> None:
    pot = _chain(scale, constrained)
    for result in (
        engine.max_marginals(pot, backend=backend),
        engine.marginals(pot, backend=backend),
    ):
        assert result.dtype == torch.float32
        assert bool(((result >= 0) & (result <= 1)).all()), float(result.max())
    # Along the Viterbi path the max-marginal is p(best path), the largest of its position.
    mu = engine.max_marginals(pot, backend=backend)
    path = engine.viterbi(pot, backend=backend)[1]
    on_path = mu.gather(2, path[..., None])[..., 0]
    torch.testing.assert_close(on_path, mu.amax(-1))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("scale", "constrained"), CASES)
def test_entropy_and_the_loss_of_the_viterbi_path_are_not_negative(
    backend: str, scale: float, constrained: bool
) -> None:
    pot = _chain(scale, constrained)
    assert bool((engine.entropy(pot, backend=backend) >= 0).all())
    path = engine.viterbi(pot, backend=backend)[1]
    loss = engine.nll(pot, path, backend=backend)[0]
    assert bool((loss >= 0).all()), loss.tolist()


@pytest.mark.skipif("cpu" not in BACKENDS, reason="no C++ compiler")
@pytest.mark.parametrize(("scale", "constrained"), CASES)
def test_the_cpu_backend_is_exact_at_extreme_scales(scale: float, constrained: bool) -> None:
    pot = _chain(scale, constrained)
    ref = _wide(pot)
    path = engine.viterbi(ref, backend="portable")[1]

    def close(got: Tensor, want: Tensor) -> None:
        torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-4)

    close(engine.max_marginals(pot, backend="cpu"), engine.max_marginals(ref, backend="portable"))
    close(engine.entropy(pot, backend="cpu"), engine.entropy(ref, backend="portable"))
    close(engine.nll(pot, path, backend="cpu")[0], engine.nll(ref, path, backend="portable")[0])


def test_a_moderate_scale_keeps_fractional_max_marginals_exact_on_cpu() -> None:
    if "cpu" not in BACKENDS:
        pytest.skip("no C++ compiler")
    # Two nearly tied paths at log Z ~ 4e6: p(best) is a fraction that float32 log Z cannot resolve.
    g = torch.Generator().manual_seed(3)
    em = (torch.randn(2, 40, 5, generator=g) * 1e5).float()
    em[:, :, 1] = em[:, :, 0] + 0.5  # tag 1 beats tag 0 by 0.5 everywhere: many near-ties
    tr = torch.zeros(5, 5)
    pot = make_potentials(em, tr)
    want = engine.max_marginals(_wide(pot), backend="portable")
    torch.testing.assert_close(
        engine.max_marginals(pot, backend="cpu").double(), want, rtol=0, atol=1e-5
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_gradient_of_a_clamped_loss_is_the_marginals_minus_the_gold_counts(
    backend: str,
) -> None:
    pot = _chain(1e6, False)
    em = pot.emissions.clone().requires_grad_(True)
    pot = make_potentials(em, pot.transitions, pot.start, pot.end)
    path = engine.viterbi(pot, backend=backend)[1]
    loss = engine.nll(pot, path, backend=backend)[0]
    (grad,) = torch.autograd.grad(loss.sum(), em)
    gold = torch.nn.functional.one_hot(path, em.shape[-1]).float()
    want = engine.marginals(make_potentials(em.detach(), pot.transitions), backend=backend) - gold
    torch.testing.assert_close(grad, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_heads_nll_of_the_viterbi_path_is_not_negative(backend: str) -> None:
    crf = CRF(len(BIOES), labels=BIOES, scheme="BIOES")
    with torch.no_grad():
        crf.transitions.mul_(1e8)
    em = _chain(1e7, True).emissions
    with use_backend(backend):
        path = crf.decode(em)
        assert bool((crf.nll(em, path, reduction="none") >= 0).all())
        # The shared head contract's log Z - score (the MEMM's, the perceptron's, the HMM's).
        losses, _ = ChainHead.sequence_nll(crf, em, path, None)
        assert bool((losses >= 0).all()), losses.tolist()
