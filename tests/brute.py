"""Enumeration oracles: every path of tiny chains (B <= 3, T <= 5, K <= 4), in float64.

Written independently of the engine (plain Python over ``itertools.product``): a path of row ``b`` is an
assignment of tags to the unmasked positions of that row; its score is start + emissions +
transitions between consecutive unmasked positions (per-position transitions: the entry of the
position entered) + end; a path with a ``-inf`` term is forbidden and left out. ``allowed`` (optional bool ``(K, K)``, ``(K,)``, ``(K,)``) keeps only the
paths that use allowed transitions, starts and ends.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class RowPaths:
    """Every path of one row: ``paths[i]`` is a length-T list (-1 at masked positions)."""

    T: int
    K: int
    positions: list[int]
    paths: list[list[int]]
    scores: list[float]

    @property
    def log_partition(self) -> float:
        if not self.positions:
            return 0.0
        if not self.scores:
            return -math.inf
        m = max(self.scores)
        return m + math.log(sum(math.exp(s - m) for s in self.scores))

    def probs(self) -> list[float]:
        lz = self.log_partition
        return [math.exp(s - lz) for s in self.scores]

    def node_marginals(self) -> Tensor:
        out = torch.zeros(self.T, self.K, dtype=torch.float64)
        for p, path in zip(self.probs(), self.paths, strict=True):
            for t in self.positions:
                out[t, path[t]] += p
        return out

    def edge_marginals(self) -> Tensor:
        """``(T-1, K, K)``: entry t-1 is the edge into unmasked position t from the previous one."""
        out = torch.zeros(max(self.T - 1, 0), self.K, self.K, dtype=torch.float64)
        for p, path in zip(self.probs(), self.paths, strict=True):
            for a, b in itertools.pairwise(self.positions):
                out[b - 1, path[a], path[b]] += p
        return out

    def max_marginals(self) -> Tensor:
        out = torch.zeros(self.T, self.K, dtype=torch.float64)
        for p, path in zip(self.probs(), self.paths, strict=True):
            for t in self.positions:
                out[t, path[t]] = max(out[t, path[t]].item(), p)
        return out

    def best(self) -> tuple[float, list[int]]:
        if not self.positions or not self.scores:
            return (0.0 if not self.positions else -math.inf), [-1] * self.T
        i = max(range(len(self.scores)), key=lambda j: self.scores[j])
        return self.scores[i], self.paths[i]

    def sorted_scores(self) -> list[float]:
        return sorted(self.scores, reverse=True) if self.positions else [0.0]

    def entropy(self) -> float:
        return -sum(p * math.log(p) for p in self.probs() if p > 0)

    def expected_hamming(self, guess: list[int]) -> float:
        """Expected number of wrong tags of ``guess`` (Theorem 4 (b)'s risk)."""
        return sum(
            p * sum(guess[t] != path[t] for t in self.positions)
            for p, path in zip(self.probs(), self.paths, strict=True)
        )

    def expected_sequence_loss(self, guess: list[int]) -> float:
        """``1 - p(guess)`` (Theorem 4 (a)'s risk)."""
        return 1.0 - sum(
            p for p, path in zip(self.probs(), self.paths, strict=True) if path == guess
        )


def enumerate_rows(
    emissions: Tensor,
    transitions: Tensor,
    start: Tensor | None = None,
    end: Tensor | None = None,
    mask: Tensor | None = None,
    allowed: tuple[Tensor, Tensor, Tensor] | None = None,
) -> list[RowPaths]:
    """Enumerate every path of every row (see the module docstring)."""
    E = emissions.detach().double()
    B, T, K = E.shape
    assert B <= 3 and T <= 6 and K <= 4, "brute force is for tiny chains"
    Tr = transitions.detach().double()
    s = torch.zeros(K, dtype=torch.float64) if start is None else start.detach().double()
    e = torch.zeros(K, dtype=torch.float64) if end is None else end.detach().double()
    m = torch.ones(B, T, dtype=torch.bool) if mask is None else mask
    rows = []
    for b in range(B):
        positions = [t for t in range(T) if bool(m[b, t])]
        paths, scores = [], []
        for assignment in itertools.product(range(K), repeat=len(positions)):
            if positions and allowed is not None:
                ok_t, ok_s, ok_e = allowed
                if not (bool(ok_s[assignment[0]]) and bool(ok_e[assignment[-1]])):
                    continue
                if not all(bool(ok_t[i, j]) for i, j in itertools.pairwise(assignment)):
                    continue
            path = [-1] * T
            total = 0.0
            for i, (t, k) in enumerate(zip(positions, assignment, strict=True)):
                path[t] = k
                total += E[b, t, k].item()
                if i == 0:
                    total += s[k].item()
                else:
                    prev = assignment[i - 1]
                    trans = Tr[prev, k] if Tr.dim() == 2 else Tr[b, t - 1, prev, k]
                    total += trans.item()
            if positions:
                total += e[assignment[-1]].item()
            if total == -math.inf:  # a forbidden (-inf) start, emission, transition or end
                continue
            paths.append(path)
            scores.append(total)
        rows.append(RowPaths(T, K, positions, paths, scores))
    return rows


def path_score(row: RowPaths, path: list[int]) -> float:
    return row.scores[row.paths.index(path)]
