"""The portable backend: the engine's PyTorch scans (:mod:`crfhead.engine.scan`, :mod:`crfhead.engine.decode`).

Any device, always available, differentiable to any order; the reference the fused backends are
tested against, and the fallback of every op a backend does not fuse (:mod:`crfhead.engine.table`
names each op's portable function). This module holds the two that are not plain scans: ``log Z``
and the loss with their gradient's parts (the contract of the ``fused`` gradient rule,
:mod:`~crfhead.engine.backends.autograd`), the loss composed from the forward-backward and the gold
path's counts. It fuses nothing itself (:data:`FUSED` is empty).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from torch import Tensor

from crfhead.engine import scan
from crfhead.engine.backends.autograd import compose_nll
from crfhead.engine.potentials import Chain, ChainPotentials
from crfhead.engine.scan import Moments, scale_grads

__all__ = [
    "CHECKED",
    "FUSED",
    "glue",
    "log_partition",
    "nll",
    "on_chain",
    "scale_grads",
]

FUSED: Mapping[str, Callable[..., Any]] = {}
CHECKED: frozenset[str] = frozenset()


def log_partition(pot: ChainPotentials, *, grads: bool, edges: bool) -> tuple[Moments, Tensor]:
    """``log Z`` ``(B,)`` and, with ``grads``, its gradient's parts; no second output (empty)."""
    if not grads:
        value = scan.log_partition(pot)
        return Moments(value), value.new_zeros(0)
    m = scan.moments(pot, edges)
    return m, m.value.new_zeros(0)


def nll(pot: ChainPotentials, tags: Tensor, *, grads: bool, edges: bool) -> tuple[Moments, Tensor]:
    """The loss ``log Z - score(tags)`` with its gradient's parts if asked, and the gold score ``(B,)``."""
    m, _ = log_partition(pot, grads=grads, edges=grads and edges)
    return compose_nll(m, pot, tags, grads=grads, edges=edges)


def on_chain(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(pot, ...)`` as a function of the raw chain (what the autograd functions pass a kernel)."""

    def run(chain: Chain, *args: Any, **kwargs: Any) -> Any:
        return fn(ChainPotentials(*chain), *args, **kwargs)

    return run


def glue(chain: Chain) -> contextlib.AbstractContextManager[None]:
    """No context: the portable scans are torch operations throughout."""
    return contextlib.nullcontext()
