"""One group of sentences decoded jointly: the chain potentials in float64 plus the non-local patterns.

:func:`prepare` validates the inputs once for every decoder: the chain through
:func:`crfhead.engine.make_potentials` (shapes as the package conventions say), the patterns through
:func:`~crfhead.higher_order.patterns.check_patterns`; duplicates are merged, and size-1 patterns
(a score on one label of one token) are folded into the emissions, where every decoder handles them
exactly. What remains has two or more cells. Tokens are flattened as ``b * T + t``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch
from torch import Tensor

from crfhead import engine
from crfhead.engine import ChainPotentials, make_potentials
from crfhead.higher_order.patterns import Pattern, check_patterns, merge_patterns

__all__ = [
    "Group",
    "add_to_cells",
    "prepare",
    "viterbi_checked",
    "viterbi_rows",
    "viterbi_with",
]


@dataclass(frozen=True, eq=False)
class Group:
    """A validated group.

    Attributes:
        chain: float64 chain potentials, size-1 patterns folded into the emissions ``(B, T, K)``.
        patterns: the merged patterns with two or more cells.
        original: the chain potentials as given (float64), without the folded patterns.
        unary: ``(B, T, K)`` float64, the folded size-1 patterns' scores, or ``None`` without any.
    """

    chain: ChainPotentials
    patterns: tuple[Pattern, ...]
    original: ChainPotentials
    unary: Tensor | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(B, T, K)``."""
        return self.chain.shape

    def scaled(self, scale: float) -> Group:
        """The group with every pattern's score (size-1 ones included) times ``scale >= 0``.

        Patterns of score 0 are dropped (``scale = 0``: the chains alone, as given).
        """
        if scale == 1.0:
            return self
        o = self.original
        emissions = o.emissions if self.unary is None else o.emissions + scale * self.unary
        chain = ChainPotentials(emissions, o.transitions, o.start, o.end, o.mask)
        patterns = tuple(
            Pattern(p.cells, p.score * scale) for p in self.patterns if p.score * scale != 0.0
        )
        unary = None if self.unary is None or scale == 0.0 else self.unary * scale
        return Group(chain=chain, patterns=patterns, original=o, unary=unary)

    def token_patterns(self) -> list[tuple[tuple[tuple[int, int], ...], float]]:
        """The patterns in token form: ``(((b * T + t, k), ...), score)``."""
        T = self.shape[1]
        return [(tuple((b * T + t, k) for b, t, k in p.cells), p.score) for p in self.patterns]

    @cached_property
    def cells(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The patterns as padded tensors: ``tokens``, ``labels``, ``valid`` ``(P, S)`` and ``scores`` ``(P,)``.

        ``S`` is the largest pattern; ``tokens`` are flattened ``b * T + t``; padding cells are invalid.
        """
        T = self.shape[1]
        device = self.chain.emissions.device
        P = len(self.patterns)
        sizes = np.fromiter((len(p.cells) for p in self.patterns), dtype=np.int64, count=P)
        S = int(sizes.max()) if P else 1
        # One flat (b, t, k) array for all cells, scattered into the padded (P, S) tables at once.
        flat = np.array([c for p in self.patterns for c in p.cells], dtype=np.int64).reshape(-1, 3)
        row = np.repeat(np.arange(P), sizes)
        col = np.arange(flat.shape[0]) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        tokens_np = np.zeros((P, S), dtype=np.int64)
        labels_np = np.zeros((P, S), dtype=np.int64)
        valid_np = np.zeros((P, S), dtype=np.bool_)
        tokens_np[row, col] = flat[:, 0] * T + flat[:, 1]
        labels_np[row, col] = flat[:, 2]
        valid_np[row, col] = True
        tokens, labels = torch.from_numpy(tokens_np), torch.from_numpy(labels_np)
        valid = torch.from_numpy(valid_np)
        scores = torch.tensor([p.score for p in self.patterns], dtype=torch.float64)
        return tokens.to(device), labels.to(device), valid.to(device), scores.to(device)

    @cached_property
    def coupled_rows(self) -> Tensor:
        """``(B,)`` bool: the sentences some pattern touches (on the emissions' device)."""
        rows = torch.zeros(self.shape[0], dtype=torch.bool)
        if self.patterns:
            rows[sorted({b for p in self.patterns for b, _, _ in p.cells})] = True
        return rows.to(self.chain.emissions.device)

    def score(self, tags: Tensor) -> float:
        """The full score of a labelling ``tags`` ``(B, T)``: chains (folded unaries included) + patterns."""
        tags = tags.to(self.chain.mask.device)
        chain = float(engine.score(self.chain, tags).sum())
        return chain + self._pattern_score(tags)

    def split_score(self, tags: Tensor) -> tuple[float, float]:
        """``(coupled, rest)``: the chains of the :attr:`coupled_rows` plus the patterns, the other chains.

        The certificate compares the coupled part alone with its bound: the other sentences are at
        their own Viterbi optimum in every decoder, so their score, however large, is no evidence.
        """
        tags = tags.to(self.chain.mask.device)
        rows = engine.score(self.chain, tags)
        coupled = self.coupled_rows
        return float(rows[coupled].sum()) + self._pattern_score(tags), float(rows[~coupled].sum())

    def _pattern_score(self, tags: Tensor) -> float:
        if not self.patterns:
            return 0.0
        tokens, labels, valid, scores = self.cells
        holds = ((tags.reshape(-1)[tokens] == labels) | ~valid).all(1)
        return float(scores[holds].sum())


def prepare(
    emissions: Tensor,
    transitions: Tensor,
    start: Tensor | None,
    end: Tensor | None,
    mask: Tensor | None,
    patterns: Sequence[Pattern],
) -> Group:
    """Validate and package a group (see the module docstring).

    Raises:
        ValueError: bad shapes or dtypes (the engine's messages), or a bad pattern (named by index).
    """
    if not isinstance(transitions, Tensor) or transitions.dim() != 2:
        got = tuple(transitions.shape) if isinstance(transitions, Tensor) else type(transitions)
        raise ValueError(f"higher-order decoding takes shared transitions (K, K), got {got}")
    original = make_potentials(
        emissions.detach().double(),
        transitions.detach().double(),
        None if start is None else start.detach().double(),
        None if end is None else end.detach().double(),
        mask,
    )
    check_patterns(patterns, original.shape, original.mask)
    merged = merge_patterns(patterns)
    ones = [p for p in merged if len(p.cells) == 1]
    emissions64 = original.emissions
    unary = None
    if ones:
        unary = torch.zeros_like(emissions64)
        for p in ones:  # merged: one score per cell
            ((b, t, k),) = p.cells
            unary[b, t, k] = p.score
        emissions64 = emissions64 + unary
    chain = ChainPotentials(
        emissions64, original.transitions, original.start, original.end, original.mask
    )
    rest = tuple(p for p in merged if len(p.cells) > 1)
    return Group(chain=chain, patterns=rest, original=original, unary=unary)


def add_to_cells(emissions: Tensor, tokens: Tensor, labels: Tensor, values: Tensor) -> Tensor:
    """``emissions`` ``(B, T, K)`` plus ``values`` ``(V,)`` at the flattened ``(token, label)`` cells."""
    B, T, K = emissions.shape
    flat = emissions.reshape(B * T * K).clone()
    flat.index_add_(0, tokens * K + labels, values.to(flat.dtype))
    return flat.reshape(B, T, K)


def viterbi_rows(group: Group, emissions: Tensor) -> tuple[Tensor, Tensor]:
    """The chain slave: each sentence's best labelling under ``emissions`` ``(B, T, K)``, and its score.

    Returns:
        ``(scores, tags)``: ``(B,)`` float64 and ``(B, T)`` int64 (``-1`` where masked).

    Raises:
        ValueError: naming a sentence none of whose labellings is allowed (every path through it
            uses a ``-inf`` start, emission, transition or end); no finite multiplier changes that.
    """
    pot = ChainPotentials(
        emissions, group.chain.transitions, group.chain.start, group.chain.end, group.chain.mask
    )
    return viterbi_checked(pot)


def viterbi_checked(
    pot: ChainPotentials, rows: Sequence[int] | None = None
) -> tuple[Tensor, Tensor]:
    """:func:`crfhead.engine.viterbi` of ``pot``, whose sentences are the group's ``rows`` (default all).

    Raises:
        ValueError: naming (by its index in the group) the first sentence with no allowed labelling.
    """
    with torch.no_grad():
        scores, tags = engine.viterbi(pot)
    infeasible = torch.isneginf(scores)
    if bool(infeasible.any()):
        b = int(infeasible.nonzero()[0, 0])
        b = b if rows is None else int(rows[b])
        raise ValueError(
            f"sentence {b} of the group has no allowed labelling: every path through it uses a "
            "-inf start, emission, transition or end"
        )
    return scores, tags


def viterbi_with(group: Group, emissions: Tensor) -> tuple[float, Tensor]:
    """:func:`viterbi_rows` summed over the sentences: ``(score, tags)``."""
    scores, tags = viterbi_rows(group, emissions)
    return float(scores.sum()), tags
