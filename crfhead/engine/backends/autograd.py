"""The engine's one autograd function: ``log Z`` or the CRF loss, its gradient computed with the forward.

Every backend is a :class:`Kernel`: its ``forward_backward`` returns ``log Z`` with the parts of its
gradient (:class:`~crfhead.engine.scan.Moments`: node, edge, first and last marginals), its ``nll`` the
loss ``log Z - score(tags)`` with the marginals minus the gold path's counts, and its ``scale_grads``
multiplies those parts by the upstream gradient. :class:`ChainFunction` wraps any kernel: the forward
is one kernel call, the backward one more (a scaling), so a fused backend never re-runs the chain.
Double backward (Hessian-vector products) recomputes the forward-backward with the portable scan's
differentiable operations, for every backend alike.

:func:`compose_nll` builds a kernel's ``nll`` from its ``forward_backward`` and the gold path's counts,
for backends (portable, triton) without a fused loss.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

import torch
from torch import Tensor

from crfhead.engine import scan
from crfhead.engine.potentials import ChainPotentials, check_tag_range
from crfhead.engine.scan import Moments, double_backward
from crfhead.numerics import is_tracing

__all__ = [
    "ChainFunction",
    "Kernel",
    "Recomputed",
    "compose_nll",
    "double_backward",
    "gold_counts",
    "log_partition",
    "nll",
    "recomputed",
]

Grads = tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]


class Kernel(Protocol):
    """What a backend module provides (:mod:`~crfhead.engine.backends.portable`, ``cpu``, ``triton``)."""

    def forward_backward(
        self, pot: ChainPotentials, *, marginals: bool = True, edges: bool = False
    ) -> Moments:
        """``log Z`` ``(B,)`` and, if asked, its gradient's parts; no autograd history."""
        ...

    def nll(
        self, pot: ChainPotentials, tags: Tensor, *, grads: bool, edges: bool
    ) -> tuple[Moments, Tensor]:
        """The loss ``log Z - score(tags)`` with its gradient's parts, and the gold score ``(B,)``.

        Raises:
            ValueError: an unmasked tag outside ``[0, K)``.
        """
        ...

    def scale_grads(
        self, grad: Tensor, m: Moments, per_position: bool, need: tuple[bool, ...]
    ) -> Grads:
        """Gradients to (emissions, transitions, start, end) of ``sum_b grad[b] * m.value[b]``.

        ``need`` says which of the four are wanted; the others may be ``None``.
        """
        ...

    def marginals(self, pot: ChainPotentials) -> Tensor:
        """Node marginals ``(B, T, K)``; no autograd history."""
        ...

    def viterbi(self, pot: ChainPotentials) -> tuple[Tensor, Tensor]:
        """Best scores ``(B,)`` and paths ``(B, T)`` (``-1`` where masked); ties to the lowest tag."""
        ...

    def glue(self, pot: ChainPotentials) -> contextlib.AbstractContextManager[None]:
        """The context for the torch operations that combine this kernel's results on ``pot``.

        The cpu kernel keeps them on one thread where its own call does (see ``serial_torch``).
        """
        ...

    def edge_marginals(self, pot: ChainPotentials) -> Tensor:
        """Edge marginals ``(B, T-1, K, K)``, entry ``t-1`` the edge entering ``t``; no autograd history."""
        ...

    def max_sums(self, pot: ChainPotentials) -> tuple[Tensor, Tensor]:
        """The best score through each ``(t, k)`` ``(B, T, K)`` and the best score ``(B,)``.

        The first may be shifted per ``(b, t)``.
        """
        ...

    def topk(self, pot: ChainPotentials, k: int) -> tuple[Tensor, Tensor]:
        """The ``k`` best paths: scores ``(B, k)`` and paths ``(B, k, T)``, missing ones ``-inf``, ``-1``."""
        ...

    def sample(
        self, pot: ChainPotentials, num_samples: int, generator: torch.Generator | None
    ) -> Tensor:
        """``(S, B, T)`` exact samples of ``p(z | x)``, ``-1`` at masked positions."""
        ...


def gold_counts(pot: ChainPotentials, tags: Tensor, edges: bool) -> Moments:
    """The gold path's indicator counts, shaped like :class:`Moments` (``value`` is its score).

    ``node`` ``(B, T, K)`` is 1 at ``(t, tags[t])`` for unmasked ``t``; ``edge`` counts the path's
    transitions (``(B, K, K)``, or ``(B, T-1, K, K)`` per edge); ``first``/``last`` ``(B, K)`` are
    one-hot at the first/last unmasked tag.
    """
    B, T, K = pot.shape
    safe = torch.where(pot.mask, tags, torch.zeros_like(tags))
    dtype = pot.emissions.dtype
    onehot = torch.nn.functional.one_hot(safe, K).to(dtype) * pot.mask[..., None]  # (B, T, K)
    first = (onehot * pot.is_first[..., None]).sum(1)
    last = (onehot * pot.is_last[..., None]).sum(1)
    edge: Tensor | None = None
    if edges:
        if T > 1:
            prev = onehot.gather(
                1, pot.prev_index.clamp(min=0)[..., None].expand(B, T, K)
            )  # (B, T, K)
            on = (pot.mask & pot.has_prev)[:, 1:, None, None]
            pairs = torch.where(on, prev[:, 1:, :, None] * onehot[:, 1:, None, :], 0.0)
        else:
            pairs = onehot.new_zeros(B, 0, K, K)
        edge = pairs if pot.per_position else pairs.sum(1)
    return Moments(scan.score(pot, tags), onehot, edge, first, last)


def compose_nll(
    forward_backward: Any, pot: ChainPotentials, tags: Tensor, *, grads: bool, edges: bool
) -> tuple[Moments, Tensor]:
    """A kernel's ``nll`` from its ``forward_backward``: ``(loss moments, gold score (B,))``.

    The loss is ``log Z - score(tags)`` (``+inf`` for a forbidden gold path), its gradient's parts the
    marginals minus :func:`gold_counts`.

    Raises:
        ValueError: an unmasked tag outside ``[0, K)`` (not checked while tracing).
    """
    if not is_tracing():
        check_tag_range(tags, pot.mask, pot.shape[2])
    m: Moments = forward_backward(pot, marginals=grads, edges=grads and edges)
    gold = gold_counts(pot, tags, grads and edges)
    # A forbidden gold path (score -inf) has an infinite loss, also where log Z is -inf too.
    value = torch.where(gold.value == float("-inf"), float("inf"), m.value - gold.value)
    if not grads:
        return Moments(value), gold.value

    def minus(a: Tensor | None, b: Tensor | None) -> Tensor | None:
        return None if a is None or b is None else a - b

    loss = Moments(
        value,
        minus(m.node, gold.node),
        minus(m.edge, gold.edge),
        minus(m.first, gold.first),
        minus(m.last, gold.last),
    )
    return loss, gold.value


class ChainFunction(torch.autograd.Function):
    """``log Z`` (``tags`` is ``None``) or ``(log Z - score(tags), score(tags))`` by one kernel call.

    The forward computes the gradient's parts too; the backward scales them by the incoming gradient
    (one more kernel call). The gold score is not differentiable.
    """

    @staticmethod
    def forward(
        ctx: Any,
        kernel: Kernel,
        emissions: Tensor,
        transitions: Tensor,
        start: Tensor,
        end: Tensor,
        mask: Tensor,
        tags: Tensor | None,
    ) -> tuple[Tensor, Tensor]:
        """One kernel call: the value and the gold score; the gradient's parts are saved."""
        pot = ChainPotentials(emissions, transitions, start, end, mask)
        need = ctx.needs_input_grad
        grads, edges = any(need[1:5]), bool(need[2])
        if tags is None:
            m = kernel.forward_backward(pot, marginals=grads, edges=grads and edges)
            gold = m.value.new_zeros(0)
        else:
            m, gold = kernel.nll(pot, tags, grads=grads, edges=edges)
        ctx.kernel = kernel
        ctx.per_position = pot.per_position
        ctx.save_for_backward(
            emissions, transitions, start, end, mask, tags, m.node, m.edge, m.first, m.last
        )
        ctx.mark_non_differentiable(gold)
        return m.value, gold

    @staticmethod
    def backward(ctx: Any, grad: Tensor, _gold: Tensor | None) -> tuple[Tensor | None, ...]:
        """The saved parts scaled by ``grad`` (differentiably, by recomputation, for double backward)."""
        emissions, transitions, start, end, mask, tags, node, edge, first, last = ctx.saved_tensors
        need_edges = bool(ctx.needs_input_grad[2])
        if torch.is_grad_enabled():
            pot = ChainPotentials(emissions, transitions, start, end, mask)
            g = double_backward(pot, tags, grad, need_edges)
        else:
            m = Moments(grad, node, edge if need_edges else None, first, last)
            g = ctx.kernel.scale_grads(grad, m, ctx.per_position, ctx.needs_input_grad[1:5])
        need = ctx.needs_input_grad
        return (None, *(x if n else None for x, n in zip(g, need[1:5], strict=True)), None, None)


class Recomputed(torch.autograd.Function):
    """A fused op's value, differentiated by recomputing the portable op under autograd.

    For the results whose gradient is a second derivative of ``log Z`` (the marginals, edge
    marginals, max-marginals, the entropy): the forward is the fused call, and only a backward, if
    one runs, pays for the portable scan (as much as it always did), which is differentiable again
    for higher orders.
    """

    @staticmethod
    def forward(
        ctx: Any,
        fused: Any,
        portable: Any,
        emissions: Tensor,
        transitions: Tensor,
        start: Tensor,
        end: Tensor,
        mask: Tensor,
    ) -> Tensor:
        """``fused(potentials)``; the inputs are saved for the backward."""
        ctx.portable = portable
        ctx.save_for_backward(emissions, transitions, start, end, mask)
        out: Tensor = fused(ChainPotentials(emissions, transitions, start, end, mask))
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        """The vector-Jacobian product of the portable op (a graph of its own if ``create_graph``)."""
        em, tr, st, en, mask = ctx.saved_tensors
        need = ctx.needs_input_grad[2:6]
        higher = torch.is_grad_enabled()  # create_graph: the gradient's graph reaches the inputs
        with torch.enable_grad():
            inputs = [
                x if higher else x.detach().requires_grad_(n)
                for x, n in zip((em, tr, st, en), need, strict=True)
            ]
            out = ctx.portable(ChainPotentials(inputs[0], inputs[1], inputs[2], inputs[3], mask))
            wanted = [x for x, n in zip(inputs, need, strict=True) if n]
            grads = iter(
                torch.autograd.grad(out, wanted, grad, create_graph=higher, allow_unused=True)
            )
        return (None, None, *(next(grads) if n else None for n in need), None)


def recomputed(fused: Any, portable: Any, pot: ChainPotentials) -> Tensor:
    """``fused(pot)`` with the gradient of ``portable(pot)`` (see :class:`Recomputed`)."""
    out: Tensor = Recomputed.apply(  # type: ignore[no-untyped-call]
        fused, portable, pot.emissions, pot.transitions, pot.start, pot.end, pot.mask
    )
    return out


def _traced_ops(kernel: Kernel) -> bool:
    """Whether to call the kernel's custom ops (:mod:`~crfhead.engine.backends.ops`): while tracing, cpu only."""
    return bool(getattr(kernel, "CUSTOM_OPS", False)) and is_tracing()


def _chain(pot: ChainPotentials) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    return pot.emissions, pot.transitions, pot.start, pot.end, pot.mask


def _wanted(pot: ChainPotentials) -> tuple[bool, bool]:
    """``(grads, edges)``: whether any part of the gradient is wanted, and the transitions' part."""
    return True, bool(pot.transitions.requires_grad)


def log_partition(kernel: Kernel, pot: ChainPotentials) -> Tensor:
    """``log Z`` ``(B,)`` by ``kernel``; differentiable (the gradient from the same call)."""
    if pot.differentiable:
        if _traced_ops(kernel):
            from crfhead.engine.backends import ops

            grads, edges = _wanted(pot)
            log_z: Tensor = ops.forward_backward_op(*_chain(pot), grads, edges)[0]
            return log_z
        out: tuple[Tensor, Tensor] = ChainFunction.apply(  # type: ignore[no-untyped-call]
            kernel, pot.emissions, pot.transitions, pot.start, pot.end, pot.mask, None
        )
        return out[0]
    return kernel.forward_backward(pot, marginals=False).value


def nll(kernel: Kernel, pot: ChainPotentials, tags: Tensor) -> tuple[Tensor, Tensor]:
    """``(log Z - score(tags), score(tags))`` ``(B,)`` by ``kernel``; the first differentiable."""
    if pot.differentiable:
        if _traced_ops(kernel):
            from crfhead.engine.backends import ops

            grads, edges = _wanted(pot)
            loss, gold = ops.nll_op(*_chain(pot), tags, grads, edges)[:2]
            return loss, gold
        out: tuple[Tensor, Tensor] = ChainFunction.apply(  # type: ignore[no-untyped-call]
            kernel, pot.emissions, pot.transitions, pot.start, pot.end, pot.mask, tags
        )
        return out
    m, gold = kernel.nll(pot, tags, grads=False, edges=False)
    return m.value, gold
