"""The fused CPU kernel as ``torch.library`` custom ops (namespace ``crfhead``), for ``torch.compile``/``torch.export``.

* ``crfhead::nll(emissions, transitions, start, end, mask, tags, grads, edges)`` → ``(loss, gold,
  node, edge, first, last)``: the CRF loss ``log Z - score(tags)``, the gold score, and the loss's
  gradient parts (marginals minus gold counts, see :class:`~crfhead.engine.scan.Moments`);
* ``crfhead::forward_backward(emissions, transitions, start, end, mask, marginals, edges)`` →
  ``(log Z, node, edge, first, last)``;
* ``crfhead::marginals(...)`` → node marginals ``(B, T, K)``; ``crfhead::viterbi(...)`` → ``(scores,
  paths)``.

A part not asked for (``grads``/``marginals``/``edges`` false) is an empty ``(0,)`` tensor: an op
returns tensors, never ``None``. Each op's CPU implementation is the ctypes call of
:mod:`~crfhead.engine.backends.cpu`; its fake implementation gives the shapes with a symbolic ``T``
(and ``B``), so an exported program serves every sequence length. The loss and ``log Z`` are
differentiable: the forward saves the gradient's parts and the backward scales them by the upstream
gradient with torch operations (:func:`~crfhead.engine.scan.scale_grads`); with ``create_graph``
(grad mode on in the backward, outside tracing) it recomputes them through the portable scan instead,
differentiable to any order, as :class:`~crfhead.engine.backends.autograd.ChainFunction` does. The
gold score and the parts are not differentiable; ``marginals`` and ``viterbi`` have no gradient (the
engine uses the portable recursions, or re-scores the path, where one is needed).

While tracing on the CPU the cpu backend calls these ops (see :mod:`~crfhead.engine.backends.select`);
in eager mode it calls the same native functions directly, which costs less per call than the
dispatcher's Python layers around a custom op.
"""

from typing import Any

import torch
from torch import Tensor

from crfhead.engine import scan
from crfhead.engine.potentials import ChainPotentials
from crfhead.engine.scan import Moments
from crfhead.numerics import is_tracing

__all__ = [
    "OPS",
    "forward_backward_op",
    "marginals_op",
    "nll_op",
    "register_native",
    "viterbi_op",
]

Parts6 = tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]

_native: Any = None
"""The cpu backend's native functions (``part_shapes``, ``nll_parts``, ``fb_parts``,
``viterbi_parts``): :mod:`~crfhead.engine.backends.cpu` registers itself when it is imported, so the
imports point one way (cpu -> ops)."""


def register_native(module: Any) -> None:
    """Called by :mod:`~crfhead.engine.backends.cpu` on import: the ops' CPU implementations use it."""
    global _native
    _native = module


def _cpu() -> Any:
    if _native is None:
        raise RuntimeError(
            "the crfhead custom ops run the cpu backend's kernel: import "
            "crfhead.engine.backends.cpu (or select the backend) first"
        )
    return _native


Parts5 = tuple[Tensor, Tensor, Tensor, Tensor, Tensor]


def _fake_parts(em: Tensor, tr: Tensor, grads: bool, edges: bool) -> tuple[Tensor, ...]:
    B, T, K = em.shape
    shapes = _cpu().part_shapes(B, T, K, tr.dim() == 4, grads, edges)
    return tuple(em.new_empty(s) for s in shapes)


# ----------------------------------------------------------------------------- crfhead::nll
@torch.library.custom_op("crfhead::nll", mutates_args=(), device_types="cpu")
def nll_op(
    emissions: Tensor,
    transitions: Tensor,
    start: Tensor,
    end: Tensor,
    mask: Tensor,
    tags: Tensor,
    grads: bool,
    edges: bool,
) -> Parts6:
    """``(loss, gold, node, edge, first, last)`` by one native call (see the module docstring)."""
    parts: Parts6 = _cpu().nll_parts((emissions, transitions, start, end, mask), tags, grads, edges)
    return parts


@nll_op.register_fake
def _nll_fake(
    emissions: Tensor,
    transitions: Tensor,
    start: Tensor,
    end: Tensor,
    mask: Tensor,
    tags: Tensor,
    grads: bool,
    edges: bool,
) -> Parts6:
    B = emissions.shape[0]
    node, edge, first, last = _fake_parts(emissions, transitions, grads, edges)
    return emissions.new_empty(B), emissions.new_empty(B), node, edge, first, last


# ----------------------------------------------------------------------------- forward_backward
@torch.library.custom_op("crfhead::forward_backward", mutates_args=(), device_types="cpu")
def forward_backward_op(
    emissions: Tensor,
    transitions: Tensor,
    start: Tensor,
    end: Tensor,
    mask: Tensor,
    marginals: bool,
    edges: bool,
) -> Parts5:
    """``(log Z, node, edge, first, last)`` by one native call (see the module docstring)."""
    parts: Parts5 = _cpu().fb_parts((emissions, transitions, start, end, mask), marginals, edges)
    return parts


@forward_backward_op.register_fake
def _fb_fake(
    emissions: Tensor,
    transitions: Tensor,
    start: Tensor,
    end: Tensor,
    mask: Tensor,
    marginals: bool,
    edges: bool,
) -> Parts5:
    node, edge, first, last = _fake_parts(emissions, transitions, marginals or edges, edges)
    return emissions.new_empty(emissions.shape[0]), node, edge, first, last


# ----------------------------------------------------------------------------- autograd of both
def _setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, ...]) -> None:
    """Save the potentials (for double backward) and the parts the forward computed."""
    em, tr, st, en, mask = inputs[:5]
    tags = inputs[5] if len(inputs) == 8 else None
    parts = output[-4:]
    ctx.with_tags = tags is not None
    ctx.per_position = tr.dim() == 4
    ctx.save_for_backward(em, tr, st, en, mask, tags, *parts)
    ctx.mark_non_differentiable(*output[1:])


def _opt(x: Tensor) -> Tensor | None:
    return None if x.dim() == 1 and x.shape[0] == 0 else x


def _backward(
    ctx: Any, grad: Tensor
) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
    em, tr, st, en, mask, tags, node, edge, first, last = ctx.saved_tensors
    need = ctx.needs_input_grad
    need_edges = bool(need[1])
    if torch.is_grad_enabled() and not is_tracing():
        g = scan.double_backward(ChainPotentials(em, tr, st, en, mask), tags, grad, need_edges)
    else:
        m = Moments(grad, _opt(node), _opt(edge) if need_edges else None, _opt(first), _opt(last))
        g = scan.scale_grads(grad.to(node.dtype), m, ctx.per_position)
    d_em, d_tr, d_st, d_en = (x if n else None for x, n in zip(g, need[:4], strict=True))
    return d_em, d_tr, d_st, d_en


def _nll_backward(ctx: Any, grad: Tensor, *_rest: Tensor | None) -> tuple[Tensor | None, ...]:
    return (*_backward(ctx, grad), None, None, None, None)


def _fb_backward(ctx: Any, grad: Tensor, *_rest: Tensor | None) -> tuple[Tensor | None, ...]:
    return (*_backward(ctx, grad), None, None, None)


nll_op.register_autograd(_nll_backward, setup_context=_setup)
forward_backward_op.register_autograd(_fb_backward, setup_context=_setup)


# ----------------------------------------------------------------------------- marginals, viterbi
@torch.library.custom_op("crfhead::marginals", mutates_args=(), device_types="cpu")
def marginals_op(
    emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor, mask: Tensor
) -> Tensor:
    """Node marginals ``(B, T, K)`` by one native forward-backward."""
    node: Tensor = _cpu().fb_parts((emissions, transitions, start, end, mask), True, False)[1]
    return node


@marginals_op.register_fake
def _marginals_fake(
    emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor, mask: Tensor
) -> Tensor:
    return emissions.new_empty(emissions.shape)


@torch.library.custom_op("crfhead::viterbi", mutates_args=(), device_types="cpu")
def viterbi_op(
    emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor]:
    """Best scores ``(B,)`` and paths ``(B, T)`` int64 (``-1`` where masked) by one native call."""
    best: tuple[Tensor, Tensor] = _cpu().viterbi_parts((emissions, transitions, start, end, mask))
    return best


@viterbi_op.register_fake
def _viterbi_fake(
    emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor]:
    B, T, _ = emissions.shape
    return emissions.new_empty(B), emissions.new_empty((B, T), dtype=torch.long)


OPS = {
    "nll": nll_op,
    "forward_backward": forward_backward_op,
    "marginals": marginals_op,
    "viterbi": viterbi_op,
}
"""Every op, by name."""
