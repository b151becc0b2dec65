"""The portable backend: the engine's PyTorch scans (:mod:`crfhead.engine.scan`) as a :class:`Kernel`.

Any device, always available, differentiable to any order; the reference the fused backends are
tested against. Its loss is composed from the forward-backward and the gold path's counts.
"""

from __future__ import annotations

from torch import Tensor

from crfhead.engine import decode, scan
from crfhead.engine.backends.autograd import compose_nll
from crfhead.engine.potentials import ChainPotentials
from crfhead.engine.scan import Moments, scale_grads

__all__ = ["forward_backward", "marginals", "nll", "scale_grads", "viterbi"]


def forward_backward(
    pot: ChainPotentials, *, marginals: bool = True, edges: bool = False
) -> Moments:
    """``log Z`` ``(B,)`` and, if asked, the marginals (see :class:`~crfhead.engine.scan.Moments`)."""
    if not (marginals or edges):
        return Moments(scan.log_partition(pot))
    return scan.moments(pot, edges)


def nll(pot: ChainPotentials, tags: Tensor, *, grads: bool, edges: bool) -> tuple[Moments, Tensor]:
    """The loss ``log Z - score(tags)`` with its gradient's parts, and the gold score ``(B,)``."""
    return compose_nll(forward_backward, pot, tags, grads=grads, edges=edges)


def marginals(pot: ChainPotentials) -> Tensor:
    """Node marginals ``(B, T, K)``."""
    return scan.marginals(pot)


def viterbi(pot: ChainPotentials) -> tuple[Tensor, Tensor]:
    """Best scores ``(B,)`` and paths ``(B, T)`` (``-1`` where masked); ties to the lowest tag."""
    return decode.viterbi(pot)
