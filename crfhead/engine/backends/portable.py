"""The portable backend: the engine's PyTorch scans (:mod:`crfhead.engine.scan`) as a :class:`Kernel`.

Any device, always available, differentiable to any order; the reference the fused backends are
tested against. Its loss is composed from the forward-backward and the gold path's counts.
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor

from crfhead.engine import decode, scan
from crfhead.engine.backends.autograd import compose_nll
from crfhead.engine.potentials import ChainPotentials
from crfhead.engine.scan import Moments, scale_grads

__all__ = [
    "edge_marginals",
    "forward_backward",
    "glue",
    "marginals",
    "max_sums",
    "nll",
    "sample",
    "scale_grads",
    "topk",
    "viterbi",
]


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


def edge_marginals(pot: ChainPotentials) -> Tensor:
    """Edge marginals ``(B, T-1, K, K)``."""
    return scan.edge_marginals(pot)


def max_sums(pot: ChainPotentials) -> tuple[Tensor, Tensor]:
    """The max-product ``alpha + beta`` ``(B, T, K)`` and the best score ``(B,)``."""
    return scan.max_sums(pot)


def topk(pot: ChainPotentials, k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` best paths: scores ``(B, k)``, paths ``(B, k, T)``."""
    return decode.topk(pot, k)


def sample(pot: ChainPotentials, num_samples: int, generator: torch.Generator | None) -> Tensor:
    """``(S, B, T)`` exact samples by forward filtering, backward sampling."""
    return decode.sample(pot, num_samples, generator)


def glue(pot: ChainPotentials) -> contextlib.AbstractContextManager[None]:
    """No context: the portable scans are torch operations throughout."""
    return contextlib.nullcontext()
