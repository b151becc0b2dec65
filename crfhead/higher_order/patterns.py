"""Non-local factors of a higher-order CRF as patterns, and the full score of a labelling (Qian & Liu, TACL 2014, §2.1).

A :class:`Pattern` adds ``score`` (any sign) to a labelling when every one of its cells ``(b, t, k)``
holds: sentence ``b`` of the group has label ``k`` at position ``t``. A dense skip table between two
tokens is the set of its size-2 patterns; a consistency factor over two identical phrases is one
pattern per label subsequence it rewards. The score of a labelling of the group is the sum of its
sentences' chain scores (:func:`crfhead.engine.score`) plus the scores of the patterns that hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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

    Raises:
        ValueError: naming the pattern (its index) and what is wrong: no cells, a cell out of range or
            at a masked position, two cells on one position, or a non-finite score.
    """
    B, T, K = shape
    for index, p in enumerate(patterns):
        if not isinstance(p, Pattern):
            raise ValueError(f"pattern {index} must be a Pattern, got {type(p).__name__}")
        if not p.cells:
            raise ValueError(f"pattern {index} has no cells")
        if not torch.isfinite(torch.tensor(float(p.score))):
            raise ValueError(f"pattern {index} has a non-finite score {p.score}")
        for b, t, k in p.cells:
            if not (0 <= b < B and 0 <= t < T and 0 <= k < K):
                raise ValueError(
                    f"pattern {index} has cell {(b, t, k)} outside (B, T, K) = {(B, T, K)}"
                )
            if not bool(mask[b, t]):
                raise ValueError(f"pattern {index} has cell {(b, t, k)} at a masked position")
        if len(set(p.tokens)) != len(p.cells):
            raise ValueError(f"pattern {index} has two cells on one position: {p.cells}")


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
