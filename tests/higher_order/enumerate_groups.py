"""Brute-force MAP oracle for tiny groups of a higher-order CRF (Qian & Liu, TACL 2014): every labelling, scored.

A group is ``B <= 3`` chains of ``T <= 4`` positions over ``K <= 3`` labels plus non-local
:class:`~crfhead.higher_order.patterns.Pattern` factors. Every labelling of the unmasked positions
is scored independently of any solver's formulation: each row's labellings by
:func:`crfhead.engine.score` (the chain score as the library defines it), the group's as the
Cartesian product of its rows, with every pattern's score added where all its cells hold. The best
labelling is then re-scored from scratch with :func:`crfhead.engine.score` and
:func:`~crfhead.higher_order.patterns.pattern_score` on the whole group, and the two must agree.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from crfhead import make_potentials
from crfhead.engine import score as chain_score
from crfhead.higher_order.patterns import Pattern, pattern_score

__all__ = ["Best", "best_labelling", "full_score"]

MAX_B, MAX_T, MAX_K = 3, 4, 3


@dataclass(frozen=True)
class Best:
    """The brute-force optimum: its ``score``, one ``tags`` ``(B, T)`` attaining it (-1 where masked),
    and ``count``, the number of labellings enumerated."""

    score: float
    tags: Tensor
    count: int


def full_score(
    emissions: Tensor,
    transitions: Tensor,
    start: Tensor,
    end: Tensor,
    mask: Tensor,
    patterns: Sequence[Pattern],
    tags: Tensor,
) -> float:
    """The group score of ``tags``: Σ chain scores (float64) + Σ scores of the patterns that hold."""
    pot = make_potentials(
        emissions.double(), transitions.double(), start.double(), end.double(), mask
    )
    return float(chain_score(pot, tags).sum()) + float(pattern_score(patterns, tags))


def best_labelling(
    emissions: Tensor,
    transitions: Tensor,
    start: Tensor,
    end: Tensor,
    mask: Tensor,
    patterns: Sequence[Pattern],
) -> Best:
    """Enumerate every labelling of the unmasked positions; return the best score and a labelling."""
    B, T, K = emissions.shape
    if B > MAX_B or T > MAX_T or K > MAX_K:
        raise ValueError(f"too large to enumerate: (B, T, K) = {(B, T, K)}")
    pot = make_potentials(
        emissions.double(), transitions.double(), start.double(), end.double(), mask
    )
    # Each row's labellings: (L_b, T) tags (-1 where masked) and their chain scores (L_b,).
    row_tags: list[Tensor] = []
    row_scores: list[Tensor] = []
    for b in range(B):
        positions = [t for t in range(T) if bool(mask[b, t])]
        paths = list(itertools.product(range(K), repeat=len(positions)))
        tags = torch.full((len(paths), T), -1, dtype=torch.int64)
        for i, path in enumerate(paths):
            for t, k in zip(positions, path, strict=True):
                tags[i, t] = k
        trans = pot.transitions
        if pot.per_position:  # (B, T-1, K, K): this row's, once per labelling
            trans = trans[b : b + 1].expand(len(paths), *trans.shape[1:])
        row = make_potentials(
            pot.emissions[b : b + 1].expand(len(paths), T, K),
            trans,
            pot.start,
            pot.end,
            pot.mask[b : b + 1].expand(len(paths), T),
        )
        row_tags.append(tags)
        row_scores.append(chain_score(row, tags))
    # The group's labellings: the product of the rows', as a B-dimensional grid.
    grid = torch.zeros([len(s) for s in row_scores], dtype=torch.float64)

    def along(b: int, vec: Tensor) -> Tensor:
        shape = [1] * B
        shape[b] = len(vec)
        return vec.reshape(shape)

    for b in range(B):
        grid = grid + along(b, row_scores[b])
    for p in patterns:
        holds = torch.ones([1] * B, dtype=torch.bool)
        for b, t, k in p.cells:
            holds = holds & along(b, row_tags[b][:, t] == k)
        grid = grid + float(p.score) * holds.to(torch.float64)
    flat = int(grid.reshape(-1).argmax()) if grid.numel() else 0
    index = [0] * B
    rest = flat
    for b in reversed(range(B)):
        index[b] = rest % grid.shape[b]
        rest //= grid.shape[b]
    best_tags = torch.full((B, T), -1, dtype=torch.int64)
    for b in range(B):
        best_tags[b] = row_tags[b][index[b]]
    best = float(grid.reshape(-1)[flat]) if grid.numel() else 0.0
    again = full_score(emissions, transitions, start, end, mask, patterns, best_tags)
    if abs(again - best) > 1e-9 * max(1.0, abs(best)):
        raise AssertionError(f"oracle disagrees with itself: grid {best} vs rescored {again}")
    return Best(score=best, tags=best_tags, count=int(grid.numel()))
