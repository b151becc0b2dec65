"""The Triton backend: fused GPU kernels (:mod:`crfhead.backends._triton_kernels`), one launch per op.

Runs on CUDA tensors; with ``TRITON_INTERPRET=1`` also on CPU tensors through Triton's interpreter
(slow: for the tests). ``triton`` is imported on first use. Same semantics and autograd contract as
:mod:`crfhead.backends.cpu`; double backward recomputes with the portable engine.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import Tensor

from crfhead.backends.fused import fused_log_partition
from crfhead.potentials import ChainPotentials

__all__ = ["MAX_TAGS", "forward_backward", "log_partition", "marginals", "status", "viterbi"]

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
    from crfhead.backends import _triton_kernels

    return _triton_kernels


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
) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
    """One launch: ``(log Z (B,), node (B, T, K), edge, first (B, K), last (B, K))``.

    ``edge`` is ``(B, K, K)`` summed over edges (shared transitions) or ``(B, T-1, K, K)``; entries not
    asked for are ``None``. No autograd history.
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
    return (
        logz,
        node if want_node else None,
        edge if edges else None,
        first if want_node else None,
        last if want_node else None,
    )


def log_partition(pot: ChainPotentials) -> Tensor:
    """``log Z`` ``(B,)``, differentiable (gradient = marginals from the same fused call)."""
    return fused_log_partition(pot, forward_backward)


def marginals(pot: ChainPotentials) -> Tensor:
    """Node marginals ``(B, T, K)`` (no autograd history)."""
    node = forward_backward(pot, marginals=True)[1]
    assert node is not None
    return node


def viterbi(pot: ChainPotentials) -> tuple[Tensor, Tensor]:
    """Best scores ``(B,)`` and paths ``(B, T)`` int64 (``-1`` where masked); ties to the lowest tag."""
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
