"""The Triton backend: fused GPU kernels (:mod:`crfhead.engine.backends.triton_kernels`), one launch per op.

Runs on CUDA tensors; with ``TRITON_INTERPRET=1`` also on CPU tensors through Triton's interpreter
(slow: for the tests). ``triton`` is imported on first use. Same semantics as the other backends, a
:class:`~crfhead.engine.backends.autograd.Kernel` whose loss is composed from the forward-backward:
``-inf`` scores are forbidden and nothing is clamped; a row with no valid path has ``log Z = -inf``,
marginals 0, Viterbi score ``-inf`` and path ``-1``.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import Tensor

from crfhead.engine.backends.autograd import compose_nll

# No Triton kernels yet for the per-edge marginals, max-sums, k-best and sampling: the portable scans
# (same semantics) run on the device, and torch's operations need no context (glue). The entropy is
# fused: it needs only forward_backward's parts.
from crfhead.engine.backends.portable import edge_marginals, glue, max_sums, sample, topk
from crfhead.engine.potentials import ChainPotentials
from crfhead.engine.scan import Moments, scale_grads

__all__ = [
    "MAX_TAGS",
    "edge_marginals",
    "forward_backward",
    "glue",
    "marginals",
    "max_sums",
    "nll",
    "sample",
    "scale_grads",
    "status",
    "topk",
    "viterbi",
]

MAX_TAGS = 256
"""Largest ``K`` the kernels take (the ``K x K`` tile of a program)."""


def status() -> tuple[bool, str]:
    """Whether the Triton kernels can run here, and if not, why."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False, "triton is not installed"
    if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        return False, "no CUDA device (set TRITON_INTERPRET=1 to run the kernels on the CPU)"
    return True, ""


def _kernels() -> Any:
    from crfhead.engine.backends import triton_kernels

    return triton_kernels


def _prepare(pot: ChainPotentials) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, int]:
    em = pot.emissions.detach().contiguous()
    if em.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"the triton backend computes in float32 or float64, got {em.dtype}")
    K = em.shape[2]
    if K > MAX_TAGS:
        raise ValueError(f"the triton backend takes K <= {MAX_TAGS} tags, got K = {K}")
    trans = pot.transitions.detach().to(em.dtype).contiguous()
    start = pot.start.detach().to(em.dtype).contiguous()
    end = pot.end.detach().to(em.dtype).contiguous()
    mask = pot.mask.contiguous().to(torch.uint8)
    block = max(triton_next_power_of_2(K), 2)
    return em, trans, start, end, mask, block


def triton_next_power_of_2(n: int) -> int:
    """The smallest power of two ``>= n``."""
    return 1 << max(n - 1, 0).bit_length()


def _warps(block: int) -> int:
    return 4 if block <= 32 else 8


def forward_backward(
    pot: ChainPotentials, *, marginals: bool = True, edges: bool = False
) -> Moments:
    """One launch: ``log Z`` ``(B,)`` and, if asked, its gradient's parts.

    See :class:`~crfhead.engine.scan.Moments`; no autograd history. A row with no valid path: ``log Z``
    ``-inf``, every marginal 0; an empty row: ``log Z`` 0, marginals 0.
    """
    em, trans, start, end, mask, block = _prepare(pot)
    B, T, K = em.shape
    dev, dt = em.device, em.dtype
    alphas = torch.empty(B, T, K, device=dev, dtype=dt)
    logz = torch.empty(B, device=dev, dtype=dt)
    want_node = marginals or edges
    node = torch.zeros(B, T, K, device=dev, dtype=dt) if want_node else alphas
    if edges:
        shape = (B, max(T - 1, 0), K, K) if pot.per_position else (B, K, K)
        edge = torch.zeros(shape, device=dev, dtype=dt)
    else:
        edge = logz
    first = torch.zeros(B, K, device=dev, dtype=dt)
    last = torch.zeros(B, K, device=dev, dtype=dt)
    if B > 0:
        _kernels().forward_backward_kernel[(B,)](
            em,
            trans,
            start,
            end,
            mask,
            alphas,
            logz,
            node,
            edge,
            first,
            last,
            T,
            K,
            PER_POSITION=pot.per_position,
            WANT_NODE=want_node,
            WANT_EDGE=edges,
            BLOCK_K=block,
            num_warps=_warps(block),
        )
    return Moments(
        logz,
        node if want_node else None,
        edge if edges else None,
        first if want_node else None,
        last if want_node else None,
    )


def nll(pot: ChainPotentials, tags: Tensor, *, grads: bool, edges: bool) -> tuple[Moments, Tensor]:
    """The loss ``log Z - score(tags)`` with its gradient's parts, and the gold score ``(B,)``."""
    return compose_nll(forward_backward, pot, tags, grads=grads, edges=edges)


def marginals(pot: ChainPotentials) -> Tensor:
    """Node marginals ``(B, T, K)`` (no autograd history)."""
    node = forward_backward(pot, marginals=True).node
    assert node is not None
    return node


def viterbi(pot: ChainPotentials) -> tuple[Tensor, Tensor]:
    """Best scores ``(B,)`` and paths ``(B, T)`` int64 (``-1`` where masked); ties to the lowest tag.

    A row with no valid path: score ``-inf``, path ``-1`` everywhere; an empty row: score 0.
    """
    em, trans, start, end, mask, block = _prepare(pot)
    B, T, K = em.shape
    scores = torch.zeros(B, device=em.device, dtype=em.dtype)
    paths = torch.full((B, T), -1, device=em.device, dtype=torch.long)
    back = torch.empty(B, T, K, device=em.device, dtype=torch.int32)
    if B > 0:
        _kernels().viterbi_kernel[(B,)](
            em,
            trans,
            start,
            end,
            mask,
            back,
            scores,
            paths,
            T,
            K,
            PER_POSITION=pot.per_position,
            BLOCK_K=block,
            num_warps=_warps(block),
        )
    return scores, paths
