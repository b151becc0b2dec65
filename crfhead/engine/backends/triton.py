"""The Triton backend: fused GPU kernels (:mod:`crfhead.engine.backends.triton_kernels`), one launch per op.

Runs on CUDA tensors; with ``TRITON_INTERPRET=1`` also on CPU tensors through Triton's interpreter
(slow: for the tests). ``triton`` is imported on first use. Same semantics as the other backends:
``-inf`` scores are forbidden and nothing is clamped; a row with no valid path has ``log Z = -inf``,
marginals 0, Viterbi score ``-inf`` and path ``-1``.

Fused (:data:`FUSED`): every op of the table, on shared or per-edge transitions. ``log Z`` and the loss (composed from the forward-backward and the gold counts), the
node and per-edge marginals, the entropy, Viterbi, the max-marginals (a max-sum forward-backward
carrying ``log Z``), the k-best (the R-max recursion, the CPU kernel's tie order) and sampling
(one forward launch, then backward sampling from uniforms the caller's generator draws). A k-best
whose ``k x K`` state passes :data:`TOPK_TILE` runs the portable scan on the device.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from crfhead.engine import decode, scan
from crfhead.engine.backends.autograd import compose_nll
from crfhead.engine.backends.portable import glue
from crfhead.engine.potentials import Chain, ChainPotentials
from crfhead.engine.scan import Moments, scale_grads

__all__ = [
    "CHECKED",
    "FUSED",
    "MAX_TAGS",
    "TOPK_TILE",
    "edge_marginals",
    "entropy",
    "glue",
    "log_partition",
    "marginals",
    "max_marginals",
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


def _prepare(chain: Chain) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, int]:
    em = chain[0].detach().contiguous()
    if em.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"the triton backend computes in float32 or float64, got {em.dtype}")
    K = em.shape[2]
    if K > MAX_TAGS:
        raise ValueError(f"the triton backend takes K <= {MAX_TAGS} tags, got K = {K}")
    trans = chain[1].detach().to(em.dtype).contiguous()
    start = chain[2].detach().to(em.dtype).contiguous()
    end = chain[3].detach().to(em.dtype).contiguous()
    mask = chain[4].contiguous().to(torch.uint8)
    block = max(triton_next_power_of_2(K), 2)
    return em, trans, start, end, mask, block


def triton_next_power_of_2(n: int) -> int:
    """The smallest power of two ``>= n``."""
    return 1 << max(n - 1, 0).bit_length()


def _warps(block: int) -> int:
    return 4 if block <= 32 else 8


def forward_backward(
    chain: Chain, *, marginals: bool = True, edges: bool = False, per_edge: bool = False
) -> Moments:
    """One launch: ``log Z`` ``(B,)`` and, if asked, its gradient's parts.

    See :class:`~crfhead.engine.scan.Moments`; no autograd history. A row with no valid path: ``log Z``
    ``-inf``, every marginal 0; an empty row: ``log Z`` 0, marginals 0. ``per_edge``: the edge
    marginals ``(B, T-1, K, K)`` per edge even for shared transitions (with ``edges``).
    """
    return _forward_backward(chain, marginals, edges, per_edge)[0]


def _forward_backward(
    chain: Chain, marginals: bool, edges: bool, per_edge: bool
) -> tuple[Moments, Tensor]:
    """:func:`forward_backward` and the forward states ``(B, T, K)`` (each position shifted by its max)."""
    em, trans, start, end, mask, block = _prepare(chain)
    per_position = trans.dim() == 4
    per_step = per_position or per_edge
    B, T, K = em.shape
    dev, dt = em.device, em.dtype
    alphas = torch.empty(B, T, K, device=dev, dtype=dt)
    logz = torch.empty(B, device=dev, dtype=dt)
    want_node = marginals or edges
    node = torch.zeros(B, T, K, device=dev, dtype=dt) if want_node else alphas
    if edges:
        shape = (B, max(T - 1, 0), K, K) if per_step else (B, K, K)
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
            PER_POSITION=per_position,
            WANT_NODE=want_node,
            WANT_EDGE=edges,
            EDGE_PER_STEP=per_step,
            BLOCK_K=block,
            num_warps=_warps(block),
        )
    moments = Moments(
        logz,
        node if want_node else None,
        edge if edges else None,
        first if want_node else None,
        last if want_node else None,
    )
    return moments, alphas


def log_partition(chain: Chain, *, grads: bool, edges: bool) -> tuple[Moments, Tensor]:
    """``log Z`` with its gradient's parts if ``grads``; no second output (empty)."""
    m = forward_backward(chain, marginals=grads, edges=grads and edges)
    return m, m.value.new_zeros(0)


def nll(chain: Chain, tags: Tensor, *, grads: bool, edges: bool) -> tuple[Moments, Tensor]:
    """The loss ``log Z - score(tags)`` with its gradient's parts, and the gold score ``(B,)``."""
    m = forward_backward(chain, marginals=grads, edges=grads and edges)
    return compose_nll(m, ChainPotentials(*chain), tags, grads=grads, edges=edges)


def marginals(chain: Chain) -> Tensor:
    """Node marginals ``(B, T, K)`` (no autograd history)."""
    node = forward_backward(chain, marginals=True).node
    assert node is not None
    return node


def edge_marginals(chain: Chain) -> Tensor:
    """Edge marginals ``(B, T-1, K, K)`` (entry ``t-1``: the edge entering ``t``), one launch.

    0 where ``t`` is masked or has no unmasked predecessor, and in a row with no valid path.
    """
    edge = forward_backward(chain, edges=True, per_edge=True).edge
    assert edge is not None
    return edge


def entropy(chain: Chain) -> Tensor:
    """The entropy ``(B,)`` from one launch's marginals (:func:`~crfhead.engine.scan.entropy_from`)."""
    return scan.entropy_from(ChainPotentials(*chain), forward_backward(chain, edges=True))


def max_marginals(chain: Chain) -> Tensor:
    """Max-marginals ``(B, T, K)`` (0 at masked positions and in rows with no valid path), one launch.

    The fused max-sum forward/backward with ``log Z`` from the same forward pass.
    """
    em, trans, start, end, mask, block = _prepare(chain)
    B, T, K = em.shape
    out = torch.zeros(B, T, K, device=em.device, dtype=em.dtype)
    delta = torch.empty(B, T, K, device=em.device, dtype=em.dtype)
    if B > 0:
        _kernels().max_marginals_kernel[(B,)](
            em,
            trans,
            start,
            end,
            mask,
            delta,
            out,
            T,
            K,
            PER_POSITION=trans.dim() == 4,
            BLOCK_K=block,
            num_warps=_warps(block),
        )
    return out


def viterbi(chain: Chain) -> tuple[Tensor, Tensor]:
    """Best scores ``(B,)`` and paths ``(B, T)`` int64 (``-1`` where masked); ties to the lowest tag.

    A row with no valid path: score ``-inf``, path ``-1`` everywhere; an empty row: score 0.
    """
    em, trans, start, end, mask, block = _prepare(chain)
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
            PER_POSITION=trans.dim() == 4,
            BLOCK_K=block,
            num_warps=_warps(block),
        )
    return scores, paths


TOPK_TILE = 4096
"""Largest ``R x K`` state (both rounded up to powers of two) the k-best kernel keeps in registers;
a larger k-best runs the portable scan on the device."""
_CANDIDATES = 8192  # the (R, K, J) candidate tile of a k-best step, J next tags at a time


def topk(chain: Chain, k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` best paths: scores ``(B, k)`` and paths ``(B, k, T)`` (missing: ``-inf``, ``-1``).

    Ties go to the lowest previous tag, then the lower rank (the CPU kernel's order).
    """
    em, trans, start, end, mask, block = _prepare(chain)
    B, T, K = em.shape
    block_r = triton_next_power_of_2(max(k, 2))
    if block_r * block > TOPK_TILE:
        return decode.topk(ChainPotentials(*chain), k)
    block_j = max(2, min(block, _CANDIDATES // (block_r * block)))
    dev, dt = em.device, em.dtype
    scores = torch.empty(B, k, device=dev, dtype=dt)
    paths = torch.full((B, k, T), -1, device=dev, dtype=torch.long)
    val = torch.empty(B, T, k, K, device=dev, dtype=dt)
    back = torch.empty(B, T, k, K, device=dev, dtype=torch.int32)
    if B > 0:
        _kernels().topk_kernel[(B,)](
            em,
            trans,
            start,
            end,
            mask,
            val,
            back,
            scores,
            paths,
            T,
            K,
            k,
            PER_POSITION=trans.dim() == 4,
            BLOCK_K=block,
            BLOCK_R=block_r,
            BLOCK_J=block_j,
            num_warps=_warps(block_r * block_j),
        )
    return scores, paths


def sample(chain: Chain, num_samples: int, generator: torch.Generator | None) -> Tensor:
    """``(S, B, T)`` exact samples (``-1`` at masked positions and in rows with no valid path).

    One forward launch, then backward sampling from uniforms drawn by ``generator`` on the device.
    """
    em, trans, _, end, mask, block = _prepare(chain)
    B, T, K = em.shape
    S = num_samples
    paths = torch.full((S, B, T), -1, device=em.device, dtype=torch.long)
    if B == 0 or T == 0:
        return paths
    moments, alphas = _forward_backward(chain, False, False, False)
    u = torch.rand((S, B, T), generator=generator, device=em.device, dtype=em.dtype)
    block_s = max(16, min(256, 4096 // block))
    _kernels().sample_kernel[(B, (S + block_s - 1) // block_s)](
        trans,
        end,
        mask,
        alphas,
        moments.value,
        u,
        paths,
        S,
        B,
        T,
        K,
        PER_POSITION=trans.dim() == 4,
        BLOCK_K=block,
        BLOCK_S=block_s,
        num_warps=_warps(block),
    )
    return paths


FUSED: Mapping[str, Callable[..., Any]] = {
    "log_partition": log_partition,
    "nll": nll,
    "marginals": marginals,
    "edge_marginals": edge_marginals,
    "max_marginals": max_marginals,
    "entropy": entropy,
    "viterbi": viterbi,
    "topk": topk,
    "sample": sample,
}
"""The ops of :mod:`crfhead.engine.table` this backend fuses; the others run portable."""
CHECKED: frozenset[str] = frozenset()
"""No op checks its arguments in a kernel: the table checks the loss's tags."""
