"""``decode``: the higher-order MAP of one group, by the method asked for, with its bound and certificate.

* ``"viterbi"``: the chains alone (patterns ignored); its bound adds every positive pattern score.
* ``"dd2slave"``: the seed's 2-slave dual decomposition (:mod:`~crfhead.higher_order.dd2slave`), the
  method for positive patterns and attractive (same-label) cliques.
* ``"dd_factor"``: per-pattern dual decomposition (:mod:`~crfhead.higher_order.dd_factor`), vectorised
  in torch, for dense or mixed-sign tables.
* ``"ilp"``: exact MAP by HiGHS (:mod:`~crfhead.higher_order.ilp`), for validation.

A group without patterns returns the Viterbi labelling, certified, at iteration 1, whatever the method.
:class:`PreparedGroup` validates a group once and decodes it at any weight of its patterns, reusing
the 2-slave structure between weights.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from torch import Tensor

from crfhead.higher_order.group import Group, prepare, viterbi_rows
from crfhead.higher_order.patterns import Pattern
from crfhead.higher_order.result import DecodeResult, certifies

if TYPE_CHECKING:
    from crfhead.higher_order.dd2slave import TwoSlave

__all__ = ["METHODS", "PreparedGroup", "decode"]

METHODS = ("viterbi", "dd2slave", "dd_factor", "ilp")


def _viterbi(group: Group) -> DecodeResult:
    values, tags = viterbi_rows(group, group.chain.emissions)
    coupled, rest = group.split_score(tags)
    # The certificate on the coupled part alone (see :func:`~crfhead.higher_order.result.certifies`).
    bound = float(values[group.coupled_rows].sum()) + sum(max(p.score, 0.0) for p in group.patterns)
    mass = sum(abs(p.score) for p in group.patterns)
    primal, dual = coupled + rest, bound + rest
    return DecodeResult(
        tags=tags,
        primal=primal,
        dual=dual,
        certified=certifies(coupled, bound, mass),
        iterations=1,
        method="viterbi",
        dual_history=[dual],
        primal_history=[primal],
    )


def _ilp(group: Group) -> DecodeResult:
    from crfhead.higher_order.ilp import solve_ilp

    viterbi_rows(
        group, group.chain.emissions
    )  # an infeasible sentence: the same error as the others
    pot = group.chain
    found = solve_ilp(pot.emissions, pot.transitions, pot.start, pot.end, pot.mask, group.patterns)
    primal = group.score(found.tags)
    dual = primal if found.optimal else max(found.bound, primal)
    return DecodeResult(
        tags=found.tags,
        primal=primal,
        dual=dual,
        certified=found.optimal,
        iterations=1,
        method="ilp",
        dual_history=[dual],
        primal_history=[primal],
    )


class PreparedGroup:
    """A group validated once and decoded at any weight of its patterns (a dev grid, a tuned scale).

    ``PreparedGroup(...).decode(scale)`` equals :func:`decode` of the same group with every pattern
    score (size-1 patterns included) times ``scale``; ``scale = 0`` is the chains alone. With
    ``dd2slave`` the reparameterisation, the cut graph and its flow are built on the first call and
    only rescaled by the next ones, whose multipliers start from the previous call's (scaled; see
    :class:`~crfhead.higher_order.dd2slave.TwoSlave`).

    Args:
        emissions: ``(B, T, K)``, the group's sentences.
        transitions: ``(K, K)`` ``[from, to]``.
        start: ``(K,)`` or ``None`` (zeros).
        end: ``(K,)`` or ``None`` (zeros).
        mask: ``(B, T)`` bool or ``None`` (all on); holes allowed.
        patterns: the non-local factors at scale 1.
        maxflow: the min-cut solver of ``dd2slave``, one of
            :data:`~crfhead.higher_order.pseudo_boolean.BACKENDS`.

    Raises:
        ValueError: bad shapes or dtypes, a bad pattern (named by index), an unknown ``maxflow``.
    """

    def __init__(
        self,
        emissions: Tensor,
        transitions: Tensor,
        start: Tensor | None = None,
        end: Tensor | None = None,
        mask: Tensor | None = None,
        patterns: Sequence[Pattern] = (),
        maxflow: str = "auto",
    ) -> None:
        from crfhead.higher_order.pseudo_boolean import BACKENDS

        if maxflow not in BACKENDS:
            raise ValueError(f"maxflow must be one of {BACKENDS}, got {maxflow!r}")
        self.maxflow = maxflow
        self.group = prepare(emissions, transitions, start, end, mask, patterns)
        self._two_slave: TwoSlave | None = None

    def decode(
        self,
        scale: float = 1.0,
        method: str = "dd2slave",
        max_iterations: int = 300,
        step: str = "polyak",
        step_size: float | None = None,
    ) -> DecodeResult:
        """The best labelling with every pattern score times ``scale >= 0`` (see :func:`decode`).

        Raises:
            ValueError: an unknown method, a negative scale, or a sentence with no allowed labelling.
        """
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if not scale >= 0.0:
            raise ValueError(f"scale must be >= 0, got {scale}")
        began = time.perf_counter()
        plain = scale == 0.0 or not self.group.patterns
        if method == "dd2slave" and not plain:
            from crfhead.higher_order.dd2slave import TwoSlave

            if self._two_slave is None:
                self._two_slave = TwoSlave(self.group, self.maxflow)
            result = self._two_slave.decode(scale, max_iterations, step, step_size)
        else:
            group = self.group.scaled(scale)
            if method == "viterbi" or not group.patterns:
                result = _viterbi(group)
                result.method = method
            elif method == "ilp":
                result = _ilp(group)
            else:
                from crfhead.higher_order.dd_factor import dd_factor

                result = dd_factor(group, max_iterations, step, step_size)
        result.tags = result.tags.to(self.group.original.mask.device)
        result.seconds = time.perf_counter() - began
        if math.isnan(result.primal):
            raise FloatingPointError("the decoded labelling has a NaN score: check the inputs")
        return result


def decode(
    emissions: Tensor,
    transitions: Tensor,
    start: Tensor | None = None,
    end: Tensor | None = None,
    mask: Tensor | None = None,
    patterns: Sequence[Pattern] = (),
    method: str = "dd2slave",
    max_iterations: int = 300,
    step: str = "polyak",
    step_size: float | None = None,
    maxflow: str = "auto",
) -> DecodeResult:
    """The best labelling of a group of sentences under chains plus patterns.

    Args:
        emissions: ``(B, T, K)``, the group's sentences.
        transitions: ``(K, K)`` ``[from, to]``.
        start: ``(K,)`` or ``None`` (zeros).
        end: ``(K,)`` or ``None`` (zeros).
        mask: ``(B, T)`` bool or ``None`` (all on); holes allowed.
        patterns: the non-local factors (:class:`~crfhead.higher_order.patterns.Pattern`).
        method: one of :data:`METHODS`.
        max_iterations: dual-decomposition iteration cap.
        step: ``"polyak"`` or ``"diminishing"``.
        step_size: the step rule's scale (see :mod:`~crfhead.higher_order.dd2slave`).
        maxflow: the min-cut solver of ``dd2slave``: ``"auto"`` (default: the native
            Boykov–Kolmogorov kernel, built on first use, where a C++ compiler exists; else
            OR-Tools where installed; else scipy), ``"native"``, ``"scipy"`` or ``"ortools"``;
            see :mod:`~crfhead.higher_order.pseudo_boolean`.

    Returns:
        a :class:`~crfhead.higher_order.result.DecodeResult`; its ``seconds`` include the
        validation.

    Raises:
        ValueError: bad shapes or dtypes, a bad pattern (named by index), an unknown method, or a
            sentence with no allowed labelling (named by index: every path uses a ``-inf`` score).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    began = time.perf_counter()
    prepared = PreparedGroup(emissions, transitions, start, end, mask, patterns, maxflow)
    result = prepared.decode(1.0, method, max_iterations, step, step_size)
    result.seconds = time.perf_counter() - began
    return result
