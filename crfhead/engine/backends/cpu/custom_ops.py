"""The fused CPU kernel as ``torch.library`` custom ops (namespace ``crfhead``), for ``torch.compile``/``torch.export``.

* ``crfhead::nll(emissions, transitions, start, end, mask, tags, grads, edges)`` → ``(loss, gold,
  node, edge, first, last)``: the CRF loss ``log Z - score(tags)``, the gold score, and the loss's
  gradient parts (marginals minus gold counts, see :class:`~crfhead.engine.scan.Moments`);
* ``crfhead::forward_backward(emissions, transitions, start, end, mask, marginals, edges)`` →
  ``(log Z, node, edge, first, last)``;
* ``crfhead::marginals(...)`` → node marginals ``(B, T, K)``; ``crfhead::viterbi(...)`` → ``(scores,
  paths)``.

A part not asked for (``grads``/``marginals``/``edges`` false) is an empty ``(0,)`` tensor: an op
returns tensors, never ``None``. Each op's CPU implementation is the native call of
:mod:`~crfhead.engine.backends.cpu.kernels`; its fake implementation gives the shapes with a symbolic
``T`` (and ``B``), so an exported program serves every sequence length. The loss and ``log Z`` are
differentiable by the ``fused`` gradient rule, the same
:func:`~crfhead.engine.backends.autograd.chain_backward` as the eager autograd function: the forward
saves the gradient's parts and the backward scales them with torch operations; with ``create_graph``
(grad mode on in the backward, outside tracing) it recomputes them through the portable scan,
differentiable to any order. The gold score and the parts are not differentiable; ``marginals`` and
``viterbi`` have no gradient (the op table runs the portable recursions, or re-scores the path,
where one is needed).

:data:`TRACED` gives them the kernel contract of the op table (:mod:`crfhead.engine.table`), which
calls them while tracing CPU tensors on the cpu backend; in eager mode it calls the same native
functions directly, which costs less per call than the dispatcher's Python layers around a custom op.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from crfhead.engine import scan
from crfhead.engine.backends.autograd import Grads, chain_backward
from crfhead.engine.backends.cpu import kernels
from crfhead.engine.potentials import Chain
from crfhead.engine.scan import Moments
from crfhead.numerics import is_tracing

__all__ = [
    "OPS",
    "TRACED",
    "forward_backward_op",
    "marginals_op",
    "nll_op",
    "viterbi_op",
]

Parts5 = tuple[Tensor, Tensor, Tensor, Tensor, Tensor]
Parts6 = tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]


def _fake_parts(em: Tensor, tr: Tensor, grads: bool, edges: bool) -> tuple[Tensor, ...]:
    B, T, K = em.shape
    shapes = kernels.part_shapes(B, T, K, tr.dim() == 4, grads, edges)
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
    chain = (emissions, transitions, start, end, mask)
    parts: Parts6 = kernels.nll_parts(chain, tags, grads, edges)
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
    chain = (emissions, transitions, start, end, mask)
    parts: Parts5 = kernels.fb_parts(chain, marginals, edges)
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
def _opt(x: Tensor) -> Tensor | None:
    """A part as :class:`Moments` holds it: ``None`` for the empty placeholder of one not asked for."""
    return None if x.dim() == 1 and x.shape[0] == 0 else x


def _setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, ...]) -> None:
    """Save the potentials (for double backward) and the parts the forward computed."""
    em, tr, st, en, mask = inputs[:5]
    tags = inputs[5] if len(inputs) == 8 else None
    ctx.per_position = tr.dim() == 4
    ctx.save_for_backward(em, tr, st, en, mask, tags, *output[-4:])
    ctx.mark_non_differentiable(*output[1:])


def _scale(grad: Tensor, m: Moments, per_position: bool, need: tuple[bool, ...]) -> Grads:
    """Torch's scaling of the parts, in their dtype (a traced graph cannot call the native one)."""
    dtype = next((x.dtype for x in m[1:] if x is not None), grad.dtype)
    return scan.scale_grads(grad.to(dtype), m, per_position)


def _backward(ctx: Any, grad: Tensor) -> Grads:
    em, tr, st, en, mask, tags, *parts = ctx.saved_tensors
    saved = (em, tr, st, en, mask, tags, *(_opt(x) for x in parts))
    # The backward of a traced op is traced too: no recomputation through the portable scan there.
    recompute = torch.is_grad_enabled() and not is_tracing()
    need = ctx.needs_input_grad[:4]
    return chain_backward(saved, grad, need, ctx.per_position, recompute=recompute, scale=_scale)


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
    node: Tensor = kernels.marginals((emissions, transitions, start, end, mask))
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
    best: tuple[Tensor, Tensor] = kernels.viterbi((emissions, transitions, start, end, mask))
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
"""Every custom op, by name."""


# ----------------------------------------------------------------------------- the kernel contract
def _moments(value: Tensor, parts: tuple[Tensor, ...]) -> Moments:
    node, edge, first, last = parts
    return Moments(value, _opt(node), _opt(edge), _opt(first), _opt(last))


def _log_partition(chain: Chain, *, grads: bool, edges: bool) -> tuple[Moments, Tensor]:
    value, *parts = forward_backward_op(*chain, grads, grads and edges)
    return _moments(value, tuple(parts)), value.new_zeros(0)


def _nll(chain: Chain, tags: Tensor, *, grads: bool, edges: bool) -> tuple[Moments, Tensor]:
    value, gold, *parts = nll_op(*chain, tags, grads, edges)
    return _moments(value, tuple(parts)), gold


def _marginals(chain: Chain) -> Tensor:
    node: Tensor = marginals_op(*chain)
    return node


def _viterbi(chain: Chain) -> tuple[Tensor, Tensor]:
    best: tuple[Tensor, Tensor] = viterbi_op(*(x.detach() for x in chain))
    return best


TRACED: Mapping[str, Callable[..., Any]] = {
    "log_partition": _log_partition,
    "nll": _nll,
    "marginals": _marginals,
    "viterbi": _viterbi,
}
"""The op table's ops these custom ops run while tracing (the loss and ``log Z`` with their autograd)."""
