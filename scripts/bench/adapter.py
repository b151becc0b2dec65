"""What an adapter is: one library's calls on one case, by op name, and the pieces they share.

The ops, in table order (:data:`OPS`); each call returns its outputs by name for the agreement:

* ``loss``: ``nll`` ``(B,)`` and ``grad`` (of the emissions), after forward + backward;
* ``decode``: ``paths``, a ``(B, T)`` tensor with -1 where masked (or lists of tags);
* ``marginals``: ``marginals``, node marginals ``(B, T, K)``;
* ``edge_marginals``: ``edge_marginals`` ``(B, T-1, K, K)``, ``[b, t-1, from, to]``;
* ``entropy``: ``entropy`` ``(B,)``, in nats;
* ``topk``: ``topk_scores`` ``(B, k)`` of the :data:`K_BEST` best paths (crfhead: also
  ``topk_paths``);
* ``sample``: ``samples`` ``(S, B, T)``, :data:`NUM_SAMPLES` paths per chain, -1 where masked
  (crfhead only: torch-struct's samples are not compared);
* ``max_marginals``: ``max_marginals`` ``(B, T, K)`` (crfhead only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from bench.cases import Inputs
from bench.engine import use_backend
from bench.timing import Op

CORE_OPS = ("loss", "decode", "marginals")
"""The ops every table has had; the contention scenario times these."""
OPS = (*CORE_OPS, "edge_marginals", "entropy", "topk", "sample", "max_marginals")
"""Every op, in table order (the CLI's ``--ops`` choices)."""
K_BEST = 5
"""``k`` of the ``topk`` op."""
NUM_SAMPLES = 10
"""Samples per chain of the ``sample`` op."""


@dataclass(frozen=True)
class Adapter:
    """One library's calls on one case, by op name; an op the library lacks is absent."""

    calls: dict[str, Op]
    extra: dict[str, Callable[[], Any]] = field(default_factory=dict)
    """Outputs the agreement needs that no timed call gives, computed (untimed) on demand."""
    peak_gib: dict[str, float] = field(default_factory=dict)
    """Predicted peak memory (GiB) of the ops that can outgrow the machine; over ``--max-gib``,
    the cell is not run."""

    def op(self, name: str) -> Op | None:
        assert name in OPS, name
        return self.calls.get(name)


def loss_op(module: nn.Module, inp: Inputs, nll: Callable[[Tensor], dict[str, Tensor]]) -> Op:
    """Forward + backward of ``nll(emissions)["nll"].sum()``, on a leaf copy of the emissions.

    ``nll`` may return more outputs (e.g. ``logz``); all come back detached, with ``grad``.
    """
    em = inp.emissions.clone().requires_grad_(True)

    def run() -> dict[str, Any]:
        for p in module.parameters():
            p.grad = None
        em.grad = None
        out = nll(em)
        torch.autograd.backward(out["nll"].sum())
        return {**{k: v.detach() for k, v in out.items()}, "grad": em.grad}

    return run


def no_grad_op(fn: Callable[[], dict[str, Any]]) -> Op:
    """``fn`` under ``torch.no_grad()``."""

    def run() -> dict[str, Any]:
        with torch.no_grad():
            return fn()

    return run


def on_backend(name: str, fn: Op) -> Op:
    """``fn`` run with crfhead's backend ``name`` selected."""

    def run() -> dict[str, Any]:
        with use_backend(name):
            return fn()

    return run
