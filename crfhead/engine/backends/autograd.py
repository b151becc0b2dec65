"""The gradient rules of the op table (:mod:`crfhead.engine.table`), each written once.

* ``fused`` (:class:`ChainFunction`): ``log Z`` or the CRF loss by a kernel that returns the value
  with the parts of its gradient (:class:`~crfhead.engine.scan.Moments`: node, edge, first and last
  marginals, minus the gold counts for the loss); the backward scales them by the upstream gradient
  (:func:`chain_backward`), so a fused backend never re-runs the chain. Double backward (Hessian-vector
  products) recomputes the forward-backward with the portable scan's differentiable operations, for
  every backend alike. The cpu backend's dispatcher ops (:mod:`~crfhead.engine.backends.cpu.dispatcher`)
  register the same rule in C++.
* ``recompute`` (:class:`Recomputed`): a fused value whose gradient is the portable op's,
  recomputed under autograd only if a backward runs.
* ``rescore`` (:class:`Rescored`): a kernel's best paths with its scores, differentiated as the
  paths' scores (:func:`~crfhead.engine.scan.score`), whose graph is built only if a backward runs.

:func:`compose_nll` builds a loss's parts from a forward-backward and the gold path's counts, for
backends (portable, triton) without a fused loss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from crfhead.engine import scan
from crfhead.engine.potentials import Chain, ChainPotentials
from crfhead.engine.scan import Moments, double_backward
from crfhead.numerics import straight_clamp

__all__ = [
    "ChainFunction",
    "Grads",
    "Parts",
    "Recomputed",
    "Rescored",
    "Scale",
    "chain_backward",
    "compose_nll",
    "double_backward",
    "fused",
    "gold_counts",
    "recomputed",
    "rescored",
]

Grads = tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]
Parts = Callable[..., tuple[Moments, Tensor]]
"""A ``fused`` kernel: ``(chain, *args, grads=, edges=) -> (Moments, second output)``; with
``grads`` the moments hold the gradient's parts (the transitions' part only with ``edges``)."""
Scale = Callable[[Tensor, Moments, bool, tuple[bool, ...]], Grads]
"""``scale(grad, parts, per_position, need)``: the gradients to (emissions, transitions, start,
end) of ``sum_b grad[b] * value[b]`` (:func:`~crfhead.engine.scan.scale_grads`, or a kernel's)."""


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
    m: Moments, pot: ChainPotentials, tags: Tensor, *, grads: bool, edges: bool
) -> tuple[Moments, Tensor]:
    """The loss's parts from a forward-backward ``m`` of ``pot``: ``(loss moments, gold score (B,))``.

    ``m`` holds ``log Z`` and, with ``grads``, its gradient's parts (the edges' with ``edges``). The
    loss is ``log Z - score(tags)`` (``+inf`` for a forbidden gold path), its gradient's parts the
    marginals minus :func:`gold_counts`. The tags' range is the caller's to check.
    """
    gold = gold_counts(pot, tags, grads and edges)
    # A forbidden gold path (score -inf) has an infinite loss, also where log Z is -inf too. The
    # loss is >= 0 exactly; rounding of log Z (scores far above 1e4 in float32) could take it below.
    difference = straight_clamp(m.value - gold.value, min=0.0)
    value = torch.where(gold.value == float("-inf"), float("inf"), difference)
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


def chain_backward(
    saved: tuple[Tensor | None, ...],
    grad: Tensor,
    need: tuple[bool, ...],
    per_position: bool,
    *,
    recompute: bool,
    scale: Scale,
) -> Grads:
    """The ``fused`` rule's backward: gradients to (emissions, transitions, start, end), ``None`` if unneeded.

    ``saved`` is ``(emissions, transitions, start, end, mask, tags, node, edge, first, last)`` (``tags``
    ``None`` for ``log Z``; parts not computed ``None``), ``need`` the four inputs' ``needs_input_grad``.
    With ``recompute`` (a graph of the gradient is wanted: double backward) the portable scan
    recomputes the gradient differentiably; otherwise ``scale`` multiplies the saved parts by ``grad``.
    """
    em, tr, st, en, mask, tags, node, edge, first, last = saved
    assert em is not None and tr is not None and st is not None and en is not None
    assert mask is not None
    need_edges = bool(need[1])
    if recompute:
        g = double_backward(ChainPotentials(em, tr, st, en, mask), tags, grad, need_edges)
    else:
        m = Moments(grad, node, edge if need_edges else None, first, last)
        g = scale(grad, m, per_position, need)
    d_em, d_tr, d_st, d_en = (x if n else None for x, n in zip(g, need, strict=True))
    return d_em, d_tr, d_st, d_en


class ChainFunction(torch.autograd.Function):
    """The ``fused`` rule: ``(value, second)`` by one :data:`Parts` call; the value is differentiable.

    The forward computes the gradient's parts too; the backward scales them by the incoming gradient
    (one more kernel call, ``scale``). The second output (the gold score) is not differentiable.
    """

    @staticmethod
    def forward(
        ctx: Any,
        parts: Parts,
        scale: Scale,
        emissions: Tensor,
        transitions: Tensor,
        start: Tensor,
        end: Tensor,
        mask: Tensor,
        tags: Tensor | None,
    ) -> tuple[Tensor, Tensor]:
        """One kernel call: the value and the second output; the gradient's parts are saved."""
        chain = (emissions, transitions, start, end, mask)
        need = ctx.needs_input_grad
        args = () if tags is None else (tags,)
        m, second = parts(chain, *args, grads=any(need[2:6]), edges=bool(need[3]))
        ctx.scale = scale
        ctx.per_position = transitions.dim() == 4
        ctx.save_for_backward(*chain, tags, m.node, m.edge, m.first, m.last)
        ctx.mark_non_differentiable(second)
        return m.value, second

    @staticmethod
    def backward(ctx: Any, grad: Tensor, _second: Tensor | None) -> tuple[Tensor | None, ...]:
        """:func:`chain_backward` (by recomputation when grad mode is on: double backward)."""
        g = chain_backward(
            ctx.saved_tensors,
            grad,
            ctx.needs_input_grad[2:6],
            ctx.per_position,
            recompute=torch.is_grad_enabled(),
            scale=ctx.scale,
        )
        return (None, None, *g, None, None)


def fused(parts: Parts, scale: Scale, chain: Chain, *args: Tensor) -> tuple[Tensor, Tensor]:
    """``parts(chain, *args)``'s value and second output, the value differentiable (:class:`ChainFunction`)."""
    tags = args[0] if args else None
    out: tuple[Tensor, Tensor] = ChainFunction.apply(  # type: ignore[no-untyped-call]
        parts, scale, *chain, tags
    )
    return out


class Recomputed(torch.autograd.Function):
    """The ``recompute`` rule: a fused op's value, differentiated by recomputing the portable op.

    For the results whose gradient is a second derivative of ``log Z`` (the marginals, edge
    marginals, max-marginals, the entropy): the forward is the fused call, and only a backward, if
    one runs, pays for the portable scan (as much as it always did), which is differentiable again
    for higher orders.
    """

    @staticmethod
    def forward(
        ctx: Any,
        fused: Callable[[Chain], Tensor],
        portable: Callable[[ChainPotentials], Tensor],
        emissions: Tensor,
        transitions: Tensor,
        start: Tensor,
        end: Tensor,
        mask: Tensor,
    ) -> Tensor:
        """``fused(chain)``; the inputs are saved for the backward."""
        ctx.portable = portable
        ctx.save_for_backward(emissions, transitions, start, end, mask)
        return fused((emissions, transitions, start, end, mask))

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        """The vector-Jacobian product of the portable op (a graph of its own if ``create_graph``)."""
        em, tr, st, en, mask = ctx.saved_tensors
        grads = _vjp(ctx.portable, (em, tr, st, en), mask, ctx.needs_input_grad[2:6], grad)
        return (None, None, *grads, None)


def recomputed(
    fused: Callable[[Chain], Tensor],
    portable: Callable[[ChainPotentials], Tensor],
    chain: Chain,
) -> Tensor:
    """``fused(chain)`` with the gradient of ``portable`` (see :class:`Recomputed`)."""
    out: Tensor = Recomputed.apply(fused, portable, *chain)  # type: ignore[no-untyped-call]
    return out


class Rescored(torch.autograd.Function):
    """The ``rescore`` rule: a kernel's scores of its paths, differentiated as those paths' scores.

    A path's score is linear in the potentials, so its gradient is the path's indicator counts
    whatever the values: the forward returns the kernel's scores as they are (no rescoring pass),
    and only a backward, if one runs, adds up the paths' counts
    (:func:`~crfhead.engine.scan.score_grads`; with ``create_graph``, the gradient of
    :func:`~crfhead.engine.scan.score` under autograd, a graph of its own). A missing path (score
    ``-inf``, its tags ``-1``) has no gradient.
    """

    @staticmethod
    def forward(ctx: Any, scores: Tensor, paths: Tensor, *chain: Tensor) -> Tensor:
        """``scores`` ``(B,)`` or ``(B, R)`` as given; ``chain``: emissions, transitions, start, end, mask."""
        ctx.save_for_backward(paths, *chain)
        ctx.found = scores > float("-inf")
        return scores.clone()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        """The paths' indicator counts scaled by ``grad`` (zero for a missing path)."""
        paths, em, tr, st, en, mask = ctx.saved_tensors
        kept = torch.where(ctx.found, grad, torch.zeros_like(grad))  # none for a missing path
        need = ctx.needs_input_grad[2:6]
        grads: tuple[Tensor | None, ...]
        if torch.is_grad_enabled():  # create_graph: the counts as a graph of the paths' scores
            grads = _vjp(
                lambda pot: scan.score(pot, paths.clamp(min=0)), (em, tr, st, en), mask, need, kept
            )
        else:
            pot = ChainPotentials(em, tr, st, en, mask)
            counts = scan.score_grads(pot, paths.clamp(min=0), kept)
            grads = tuple(g if n else None for g, n in zip(counts, need, strict=True))
        return (None, None, *grads, None)


def _vjp(
    fn: Callable[[ChainPotentials], Tensor],
    scores: tuple[Tensor, Tensor, Tensor, Tensor],
    mask: Tensor,
    need: tuple[bool, ...],
    grad: Tensor,
) -> Grads:
    """The vector-Jacobian product of ``fn`` at the potentials' four score tensors by ``grad``.

    ``fn`` runs under autograd on detached copies (``None`` where ``need`` is false); with grad mode
    on (``create_graph``) on the tensors themselves, so the gradient's graph reaches them.
    """
    higher = torch.is_grad_enabled()
    with torch.enable_grad():
        inputs = [
            x if higher else x.detach().requires_grad_(n) for x, n in zip(scores, need, strict=True)
        ]
        out = fn(ChainPotentials(inputs[0], inputs[1], inputs[2], inputs[3], mask))
        wanted = [x for x, n in zip(inputs, need, strict=True) if n]
        grads = iter(torch.autograd.grad(out, wanted, grad, create_graph=higher, allow_unused=True))
    a, b, c, d = (next(grads) if n else None for n in need)
    return a, b, c, d


def rescored(scores: Tensor, paths: Tensor, chain: Chain) -> Tensor:
    """``scores`` of ``paths`` with the gradient of the paths' scores (see :class:`Rescored`)."""
    out: Tensor = Rescored.apply(scores, paths, *chain)  # type: ignore[no-untyped-call]
    return out
