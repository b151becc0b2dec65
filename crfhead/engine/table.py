"""The op table: every engine op declared once, and :func:`run`, the one place that dispatches it.

An :class:`Op` names its portable function (the reference, and the fallback of every backend that
does not fuse it) and its gradient rule (:class:`Grad`). A backend module registers the ops it fuses
by name: its ``FUSED`` kernels, plain calls on the raw :data:`~crfhead.engine.potentials.Chain`;
``DISPATCHED``, a function giving the ops that are dispatcher ops (each the op's whole result, with
its own gradient rule where it has one: the one op of an eager call and of a
``torch.compile``/``torch.export`` trace); ``CHECKED``, ops whose kernel checks its own arguments;
``scale_grads`` and ``glue``. A backend never imports this module. :func:`run` asks once per call
whether it is tracing, resolves the backend (:func:`~crfhead.engine.backends.select.resolve`), picks
the dispatcher op, the kernel or the portable function (a kernel call is opaque to a tracer: while
tracing, only a dispatcher op or the portable function runs), and wraps the gradient by the op's
rule.

Adding an op: its portable function, its kernel in the backends that fuse it (one entry in their
``FUSED``), one line in :data:`OPS`, and its oracle test.
"""

from __future__ import annotations

import contextlib
import enum
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from crfhead.engine import decode, scan
from crfhead.engine.backends import portable
from crfhead.engine.backends.autograd import Scale, fused, recomputed, rescored
from crfhead.engine.backends.select import kernel, resolve
from crfhead.engine.potentials import ChainPotentials, check_tag_range
from crfhead.numerics import is_tracing

__all__ = ["OPS", "Backend", "Grad", "Op", "registered", "run"]


class Grad(enum.Enum):
    """How an op's result is differentiated where the potentials require gradients."""

    FUSED = "fused"
    """The kernel returns the value with its gradient's parts; the backward scales them
    (:class:`~crfhead.engine.backends.autograd.ChainFunction`). The portable function keeps the
    same contract."""
    RECOMPUTE = "recompute"
    """A fused value; its gradient recomputes the portable function under autograd
    (:class:`~crfhead.engine.backends.autograd.Recomputed`). The portable function is differentiable."""
    RESCORE = "rescore"
    """Paths and their scores: a fused kernel's scores, differentiated as the paths' scores
    (:func:`~crfhead.engine.scan.score`) by a backward that scores them only if it runs
    (:class:`~crfhead.engine.backends.autograd.Rescored`); while tracing, the paths' scores as
    plain operations. The portable function is differentiable."""
    NONE = "none"
    """No gradient: the op runs under ``torch.no_grad``."""


@dataclass(frozen=True)
class Op:
    """One engine op.

    Attributes:
        name: the key of :data:`OPS` and of the backends' registrations.
        portable: ``portable(pot, *args)``: the portable implementation on
            :class:`~crfhead.engine.potentials.ChainPotentials`.
        grad: the gradient rule.
        outputs: for the ``fused`` rule, 1 (the value) or 2 (the value and the second output).
        check: an argument check run outside tracing before a kernel that does not check itself.
    """

    name: str
    portable: Callable[..., Any]
    grad: Grad
    outputs: int = 1
    check: Callable[..., None] | None = None


def _check_tags(pot: ChainPotentials, tags: Tensor) -> None:
    check_tag_range(tags, pot.mask, pot.shape[2])


OPS: Mapping[str, Op] = {
    op.name: op
    for op in (
        Op("log_partition", portable.log_partition, Grad.FUSED),
        Op("nll", portable.nll, Grad.FUSED, outputs=2, check=_check_tags),
        Op("marginals", scan.marginals, Grad.RECOMPUTE),
        Op("edge_marginals", scan.edge_marginals, Grad.RECOMPUTE),
        Op("max_marginals", scan.max_marginals, Grad.RECOMPUTE),
        Op("entropy", scan.entropy, Grad.RECOMPUTE),
        Op("viterbi", decode.viterbi, Grad.RESCORE),
        Op("topk", decode.topk, Grad.RESCORE),
        Op("sample", decode.sample, Grad.NONE),
    )
}
"""Every op the backends may fuse, by name."""


@dataclass(frozen=True)
class Backend:
    """A backend's registrations, read once from its module (see the module docstring)."""

    name: str
    fused: Mapping[str, Callable[..., Any]]
    checked: frozenset[str]
    scale_grads: Scale
    glue: Callable[..., contextlib.AbstractContextManager[None]]
    dispatched: Callable[[], Mapping[str, Callable[..., Any]]]


@functools.cache
def registered(name: str) -> Backend:
    """The registrations of backend ``name`` (``portable``, ``cpu`` or ``triton``)."""
    module = kernel(name)
    return Backend(
        name,
        getattr(module, "FUSED", {}),
        getattr(module, "CHECKED", frozenset()),
        module.scale_grads,
        module.glue,
        getattr(module, "DISPATCHED", _none_dispatched),
    )


def _none_dispatched() -> Mapping[str, Callable[..., Any]]:
    return {}


_PORTABLE_PARTS = {
    name: portable.on_chain(op.portable) for name, op in OPS.items() if op.grad is Grad.FUSED
}
"""The ``fused`` ops' portable functions on the raw chain, for the autograd function."""


def _rescored(pot: ChainPotentials, scores: Tensor, paths: Tensor) -> Tensor:
    """``scores`` of found paths replaced by the paths' differentiable scores (``paths`` ``(B, [R,] T)``)."""
    found = scores > float("-inf")
    return torch.where(found, scan.score(pot, paths.clamp(min=0)), scores)


def run(name: str, pot: ChainPotentials, *args: Any, backend: str | None = None) -> Any:
    """Op ``name`` of :data:`OPS` on ``pot`` (and its extra arguments) by the chosen backend.

    Args:
        name: the op.
        pot: the chain potentials.
        args: the op's other arguments (the tags of ``nll``, ``k`` of ``topk``...).
        backend: the engine functions' ``backend=`` (see
            :mod:`crfhead.engine.backends.select`).

    Raises:
        ValueError: the op's argument check, or the backend's choice (see ``resolve``).
    """
    op = OPS[name]
    if op.grad is Grad.NONE:
        with torch.no_grad():
            return _run(op, pot, args, backend)
    return _run(op, pot, args, backend)


def _run(op: Op, pot: ChainPotentials, args: tuple[Any, ...], backend: str | None) -> Any:
    name = op.name
    tracing = is_tracing()
    where = registered(resolve(pot.emissions.device, backend, tracing=tracing))
    if op.check is not None and not tracing and name not in where.checked:
        op.check(pot, *args)
    differentiable = pot.differentiable
    dispatched = where.dispatched().get(name)
    if dispatched is not None and (op.grad is Grad.FUSED or not differentiable):
        return dispatched(pot.chain, *args)
    # While tracing: a dispatcher op's paths (re-scored below), else the portable function.
    traced = dispatched if op.grad is Grad.RESCORE else None
    kern = traced if tracing else where.fused.get(name)
    if op.grad is Grad.FUSED:
        if differentiable:
            scale: Scale
            if kern is None:
                parts, scale = _PORTABLE_PARTS[name], portable.scale_grads
            else:
                parts, scale = kern, where.scale_grads
            value, second = fused(parts, scale, pot.chain, *args)
        elif kern is None:
            m, second = op.portable(pot, *args, grads=False, edges=False)
            value = m.value
        else:
            m, second = kern(pot.chain, *args, grads=False, edges=False)
            value = m.value
        return value if op.outputs == 1 else (value, second)
    if kern is None:
        return op.portable(pot, *args)
    if not differentiable:
        return kern(pot.chain, *args)
    if op.grad is Grad.RECOMPUTE:
        return recomputed(kern, op.portable, pot.chain)
    scores, paths = kern(pot.chain, *args)
    if not tracing:  # the kernel's scores; the paths are scored again only if a backward runs
        return rescored(scores, paths, pot.chain), paths
    # A traced graph records the paths' scores as plain operations.
    return _rescored(pot, scores, paths), paths
