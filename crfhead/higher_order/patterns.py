"""Non-local factors of a higher-order CRF as patterns, and the full score of a labelling (Qian & Liu, TACL 2014, §2.1).

A :class:`Pattern` adds ``score`` (any sign) to a labelling when every one of its cells ``(b, t, k)``
holds: sentence ``b`` of the group has label ``k`` at position ``t``. A dense skip table between two
tokens is the set of its size-2 patterns; a consistency factor over two identical phrases is one
pattern per label subsequence it rewards. The score of a labelling of the group is the sum of its
sentences' chain scores (:func:`crfhead.engine.score`) plus the scores of the patterns that hold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

__all__ = ["Pattern", "check_patterns", "merge_patterns", "pattern_score"]


@dataclass(frozen=True)
class Pattern:
    """A factor that adds ``score`` when every cell ``(b, t, k)`` holds.

    Attributes:
        cells: ``((b, t, k), ...)``: sentence, position and label; positions ``(b, t)`` distinct.
        score: the score added (any sign, finite).
    """

    cells: tuple[tuple[int, int, int], ...]
    score: float

    @property
    def tokens(self) -> tuple[tuple[int, int], ...]:
        """The ``(b, t)`` positions of the cells, in order."""
        return tuple((b, t) for b, t, _ in self.cells)


def check_patterns(patterns: Sequence[Pattern], shape: tuple[int, int, int], mask: Tensor) -> None:
    """Refuse patterns that do not fit the group: ``shape`` is ``(B, T, K)``, ``mask`` ``(B, T)`` bool.

    All patterns are checked at once on numpy arrays (one ``(C, 3)`` table of every cell); only when
    that finds a fault are they walked one by one, to name the first bad pattern.

    Raises:
        ValueError: naming the pattern (its index) and what is wrong: no cells, a cell that is not three
            integers, out of range or at a masked position, two cells on one position, or a non-finite
            score.
    """
    if not _all_fit(patterns, shape, mask):
        _name_the_first_fault(patterns, shape, mask)


def _all_fit(patterns: Sequence[Pattern], shape: tuple[int, int, int], mask: Tensor) -> bool:
    """Whether every pattern fits (vectorised); ``False`` on anything it cannot read as well."""
    B, T, K = shape
    P = len(patterns)
    if P == 0:
        return True
    if not all(isinstance(p, Pattern) for p in patterns):
        return False
    try:
        sizes = np.fromiter((len(p.cells) for p in patterns), dtype=np.int64, count=P)
        scores = np.fromiter((float(p.score) for p in patterns), dtype=np.float64, count=P)
        flat = np.array([c for p in patterns for c in p.cells])
    except (TypeError, ValueError):
        return False
    C = int(sizes.sum())
    if not (sizes > 0).all() or not np.isfinite(scores).all():
        return False
    if flat.shape != (C, 3) or flat.dtype.kind not in "biu":
        return False
    b, t, k = flat[:, 0], flat[:, 1], flat[:, 2]
    if not ((b >= 0) & (b < B) & (t >= 0) & (t < T) & (k >= 0) & (k < K)).all():
        return False
    if not mask.detach().cpu().numpy()[b, t].all():
        return False
    # Two cells of one pattern on one position: the (pattern, position) keys are not distinct.
    keys = np.repeat(np.arange(P, dtype=np.int64), sizes) * (B * T) + b * T + t
    return bool(np.unique(keys).shape[0] == C)


def _name_the_first_fault(
    patterns: Sequence[Pattern], shape: tuple[int, int, int], mask: Tensor
) -> None:
    """The patterns one by one: ``ValueError`` naming the first that does not fit."""
    B, T, K = shape
    for index, p in enumerate(patterns):
        if not isinstance(p, Pattern):
            raise ValueError(f"pattern {index} must be a Pattern, got {type(p).__name__}")
        if not p.cells:
            raise ValueError(f"pattern {index} has no cells")
        if not math.isfinite(float(p.score)):
            raise ValueError(f"pattern {index} has a non-finite score {p.score}")
        for cell in p.cells:
            if len(cell) != 3 or not all(isinstance(v, int | np.integer) for v in cell):
                raise ValueError(f"pattern {index} has cell {cell}: not three integers (b, t, k)")
            b, t, k = cell
            if not (0 <= b < B and 0 <= t < T and 0 <= k < K):
                raise ValueError(
                    f"pattern {index} has cell {(b, t, k)} outside (B, T, K) = {(B, T, K)}"
                )
            if not bool(mask[b, t]):
                raise ValueError(f"pattern {index} has cell {(b, t, k)} at a masked position")
        if len(set(p.tokens)) != len(p.cells):
            raise ValueError(f"pattern {index} has two cells on one position: {p.cells}")
    # Only reached when the vectorised pass refused what the walk accepts: a score ``float`` cannot read.
    raise ValueError("patterns must hold integer cells (b, t, k) and float scores")


def merge_patterns(patterns: Iterable[Pattern]) -> list[Pattern]:
    """Duplicates merged (same set of cells: scores added), cells sorted, zero scores dropped."""
    merged: dict[tuple[tuple[int, int, int], ...], float] = {}
    for p in patterns:
        key = tuple(sorted(p.cells))
        merged[key] = merged.get(key, 0.0) + float(p.score)
    return [Pattern(cells, s) for cells, s in merged.items() if s != 0.0]


def pattern_score(patterns: Sequence[Pattern], tags: Tensor) -> Tensor:
    """The summed score of the patterns that hold in ``tags`` ``(B, T)`` (a float64 scalar)."""
    total = 0.0
    rows = tags.tolist()
    for p in patterns:
        if all(rows[b][t] == k for b, t, k in p.cells):
            total += p.score
    return torch.tensor(total, dtype=torch.float64)
