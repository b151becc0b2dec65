"""The autograd glue shared by the fused backends: ``log Z`` whose forward also returns the marginals.

A fused backend provides ``forward_backward(pot, marginals=..., edges=...) -> (log Z, node, edge,
first, last)`` (see :func:`crfhead.backends.cpu.forward_backward`); :func:`fused_log_partition` makes
``log Z`` differentiable from it: the gradient to the emissions is the node marginals, to the
transitions the edge marginals, to start/end the first/last tag marginals, all from the one forward
call. Double backward recomputes through the portable engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from crfhead.potentials import ChainPotentials

__all__ = ["ForwardBackward", "fused_log_partition", "scale_grads"]

ForwardBackward = Callable[
    ..., tuple[Tensor, Tensor | None, Tensor | None, Tensor | None, Tensor | None]
]


def scale_grads(
    grad: Tensor,
    node: Tensor,
    edge: Tensor | None,
    first: Tensor,
    last: Tensor,
    per_position: bool,
) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
    """Gradients of ``sum_b grad[b] * f_b`` from the per-sequence ones.

    Returns emissions ``(B, T, K)``, transitions (``(K, K)`` from ``edge`` ``(B, K, K)``, or
    ``(B, T-1, K, K)``), start and end ``(K,)``.
    """
    g_tr: Tensor | None = None
    if edge is not None:
        if per_position:
            g_tr = grad[:, None, None, None] * edge
        else:
            g_tr = torch.einsum("b,bij->ij", grad, edge)
    return grad[:, None, None] * node, g_tr, grad @ first, grad @ last


class _FusedLogPartition(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        forward_backward: ForwardBackward,
        emissions: Tensor,
        transitions: Tensor,
        start: Tensor,
        end: Tensor,
        mask: Tensor,
    ) -> Tensor:
        pot = ChainPotentials(emissions, transitions, start, end, mask)
        need_edges = bool(ctx.needs_input_grad[2])
        logz, node, edge, first, last = forward_backward(pot, marginals=True, edges=need_edges)
        ctx.per_position = pot.per_position
        ctx.save_for_backward(emissions, transitions, start, end, mask, node, edge, first, last)
        return logz

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        emissions, transitions, start, end, mask, node, edge, first, last = ctx.saved_tensors
        if torch.is_grad_enabled():
            # Double backward: recompute with the portable engine's differentiable operations.
            from crfhead.chain import log_partition_grads

            pot = ChainPotentials(emissions, transitions, start, end, mask)
            return (None, *log_partition_grads(pot, grad, bool(ctx.needs_input_grad[2]), None))
        return (None, *scale_grads(grad, node, edge, first, last, ctx.per_position), None)


def fused_log_partition(pot: ChainPotentials, forward_backward: ForwardBackward) -> Tensor:
    """``log Z`` ``(B,)`` by a fused backend's ``forward_backward``, differentiable."""
    tensors = (pot.emissions, pot.transitions, pot.start, pot.end)
    if torch.is_grad_enabled() and any(x.requires_grad for x in tensors):
        out: Tensor = _FusedLogPartition.apply(  # type: ignore[no-untyped-call]
            forward_backward, *tensors, pot.mask
        )
        return out
    return forward_backward(pot, marginals=False)[0]
