"""The subgradient loop both dual decompositions share: bookkeeping, step sizes, stopping, the result.

Each iteration a decomposition reports the dual value at its multipliers, the chain slave's labelling
with its score, and the squared norm of the subgradient; :class:`Subgradient` keeps the best dual
and the best primal (primal recovery), decides whether to stop (the slaves agree, or the best primal
reaches the best dual: a certificate), and returns the step to take:

* ``"polyak"``: ``γ (L - best primal) / |g|²``, ``γ`` halved after 20 iterations without a new best
  dual (scale-free; the paper's halving of the step on every dual increase stalls);
* ``"diminishing"``: ``α0 / (1 + #dual increases)`` (Rush & Collins 2012).

Dual and primal are reported on the *coupled part* of the group: the sentences some pattern touches
plus the patterns. The other sentences take no multiplier, so both slaves leave them at their Viterbi
labelling, and they add one constant (the ``offset`` of :meth:`Subgradient.result`) to every dual and
every primal (Qian & Liu, TACL 2014, §3: the multipliers live on the tokens the patterns touch). The
certificate and the Polyak step are therefore computed where the bound and the labelling can differ,
at the precision of that part alone, whatever the scale of the rest.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from crfhead.higher_order.result import DecodeResult, certifies

__all__ = ["STEPS", "Subgradient"]

STEPS = ("polyak", "diminishing")
_PATIENCE = 20  # Polyak: iterations without a new best dual before γ is halved


class Subgradient:
    """The state of one dual-decomposition run.

    Args:
        shape: ``(B, T)`` of the group's labellings.
        step: one of :data:`STEPS`.
        step_size: ``γ``'s start for Polyak (default 1), ``α0`` for the diminishing rule (default
            ``scale``).
        scale: the typical pattern score magnitude (the diminishing rule's default ``α0``).
        mass: the patterns' summed absolute score (the certificate's scale, with the dual's).
    """

    def __init__(
        self,
        shape: tuple[int, int],
        step: str,
        step_size: float | None,
        scale: float,
        mass: float = 0.0,
    ) -> None:
        if step not in STEPS:
            raise ValueError(f"step must be one of {STEPS}, got {step!r}")
        self.step = step
        self.gamma = 1.0 if step_size is None else float(step_size)
        self.alpha0 = scale if step_size is None else float(step_size)
        self.mass = mass
        self.best_dual, self.best_primal = math.inf, -math.inf
        self.best_tags = torch.full(shape, -1, dtype=torch.long)
        self.duals: list[float] = []
        self.primals: list[float] = []
        self.stale = self.increases = 0
        self.certified = False
        self.floor = math.inf

    def offer(self, primal: float, tags: Tensor, bound: float = math.inf) -> None:
        """A labelling (primal recovery) and an upper bound found outside the iterations.

        The labelling is kept when it is the best; the bound (any valid one, such as the chains'
        optimum plus every positive pattern) caps the reported dual and counts for the
        certificate, but not for the step rules, which follow the decomposition's own duals.
        """
        if primal > self.best_primal:
            self.best_primal, self.best_tags = primal, tags
        self.floor = min(self.floor, bound)

    def record(self, dual: float, primal: float, tags: Tensor, norm2: float) -> float | None:
        """Record an iteration; the step to take, or ``None`` when the run should stop.

        ``dual`` and ``primal`` (the score of ``tags``) are of the coupled part (module docstring).
        """
        if primal > self.best_primal:
            self.best_primal, self.best_tags = primal, tags
        if self.duals and dual > self.duals[-1]:
            self.increases += 1
        if dual < self.best_dual:
            self.best_dual, self.stale = dual, 0
        else:
            self.stale += 1
        self.duals.append(dual)
        self.primals.append(self.best_primal)
        self.certified = certifies(self.best_primal, min(self.best_dual, self.floor), self.mass)
        if norm2 == 0.0 or self.certified:
            # Agreement leaves the multipliers where they are: nothing more to learn.
            return None
        if self.step == "polyak":
            if self.stale >= _PATIENCE:
                self.gamma, self.stale = self.gamma / 2, 0
            return self.gamma * (dual - self.best_primal) / norm2
        return self.alpha0 / (1 + self.increases)

    def result(self, method: str, offset: float = 0.0) -> DecodeResult:
        """The run as a :class:`~crfhead.higher_order.result.DecodeResult` of the whole group.

        Args:
            method: the decoder's name.
            offset: the score of the uncoupled sentences, added to every dual and primal.
        """
        return DecodeResult(
            tags=self.best_tags,
            primal=self.best_primal + offset,
            dual=min(self.best_dual, self.floor) + offset,
            certified=self.certified,
            iterations=len(self.duals),
            method=method,
            dual_history=[d + offset for d in self.duals],
            primal_history=[p + offset for p in self.primals],
        )
