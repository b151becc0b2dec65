"""The perceptron's mistake bound on teacher-labelled chains: Theorem 5 of *Sequence Labeling: From HMMs to Linear-Chain CRFs*.

*Sequence Labeling: From HMMs to Linear-Chain CRFs*, Theorem 5 (Collins 2002): if a unit vector ``u`` separates the
training data with margin ``γ > 0``, ``u · (F(x_i, z_i) - F(x_i, z)) >= γ`` for every ``i`` and every
``z != z_i``, and every such difference has norm at most ``R``, the structured perceptron makes at most
``R² / γ²`` mistakes, however many epochs it runs. The seed's Perceptron tab runs it "on data labeled by
a teacher, at six margins".

The experiment (:func:`mistake_bound_rows`):

* features ``F(x, z)``: counts of (word, tag) emissions, (tag, tag) transitions and the start tag, the
  indicator chain of Theorem 3, dimension ``V K + K² + K``;
* a teacher ``u``: a standard normal draw normalised to a unit vector (:func:`make_teacher`);
* sequences of ``T`` uniform words, each labelled by the teacher's best path; a sequence is kept only
  when its best path beats its second best by at least the target margin (rejection), so the kept data
  are separable by ``u`` with margin ``γ`` = the smallest such gap (``>=`` the target);
* ``γ`` and ``R = max_i max_{z != z_i} ||F(x_i, z_i) - F(x_i, z)||`` are **exact**: every one of the
  ``K^T`` paths is enumerated (keep ``K^T`` small: the defaults have 3^5 = 243);
* the plain (not averaged) perceptron from zero weights, decoded by the library's Viterbi
  (:func:`crfhead.engine.viterbi`), one pass over the data per epoch in order, until an epoch without
  a mistake.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from crfhead.engine import make_potentials, viterbi

__all__ = [
    "DEFAULT_MARGINS",
    "Teacher",
    "all_paths",
    "features",
    "make_teacher",
    "mistake_bound_rows",
    "perceptron_mistakes",
    "radius",
    "separable_sample",
    "teacher_margins",
]

DEFAULT_MARGINS: tuple[float, ...] = (0.3, 0.2, 0.15, 0.1, 0.07, 0.04)
"""Six target margins, decreasing (the seed's span 0.315 → 0.041)."""


@dataclass(frozen=True)
class Teacher:
    """A unit weight vector over the chain's indicator features.

    Attributes:
        emission: ``(V, K)``.
        transitions: ``(K, K)`` ``[from, to]``.
        start: ``(K,)``.
    """

    emission: Tensor
    transitions: Tensor
    start: Tensor

    @property
    def vector(self) -> Tensor:
        """The flat weight vector ``(V K + K² + K,)`` in the order of :func:`features`."""
        return torch.cat([self.emission.flatten(), self.transitions.flatten(), self.start])


def make_teacher(num_tags: int, vocab_size: int, generator: torch.Generator) -> Teacher:
    """A teacher drawn from ``N(0, I)`` and scaled to unit norm (float64)."""
    K, V = num_tags, vocab_size
    u = torch.randn(V * K + K * K + K, generator=generator, dtype=torch.float64)
    u = u / u.norm()
    return Teacher(u[: V * K].view(V, K), u[V * K : V * K + K * K].view(K, K), u[V * K + K * K :])


def all_paths(num_tags: int, length: int) -> Tensor:
    """Every tag path, ``(K^T, T)`` int64, in lexicographic order."""
    return torch.tensor(list(itertools.product(range(num_tags), repeat=length)), dtype=torch.long)


def features(words: Tensor, paths: Tensor, num_tags: int, vocab_size: int) -> Tensor:
    """``F(x, z)`` for one word sequence ``(T,)`` and paths ``(P, T)``: counts ``(P, V K + K² + K)``."""
    K, V = num_tags, vocab_size
    P, T = paths.shape
    out = torch.zeros(P, V * K + K * K + K, dtype=torch.float64)
    one = torch.ones(P, 1, dtype=torch.float64)
    for t in range(T):
        out.scatter_add_(1, (words[t] * K + paths[:, t]).unsqueeze(1), one)
        if t > 0:
            out.scatter_add_(1, (V * K + paths[:, t - 1] * K + paths[:, t]).unsqueeze(1), one)
    out.scatter_add_(1, (V * K + K * K + paths[:, 0]).unsqueeze(1), one)
    return out


def teacher_margins(teacher: Teacher, words: Tensor, paths: Tensor) -> tuple[Tensor, Tensor]:
    """The teacher's best path ``(n, T)`` and its gap to the second best ``(n,)``, by enumeration."""
    scores = teacher.start[paths[:, 0]].expand(words.shape[0], -1).clone()
    for t in range(paths.shape[1]):
        scores += teacher.emission[words[:, t]][:, paths[:, t]]
        if t > 0:
            scores += teacher.transitions[paths[:, t - 1], paths[:, t]]
    top = scores.topk(2, dim=1)
    return paths[top.indices[:, 0]], top.values[:, 0] - top.values[:, 1]


def separable_sample(
    teacher: Teacher,
    n: int,
    length: int,
    target: float,
    generator: torch.Generator,
    batch: int = 4096,
    max_draws: int = 2_000_000,
) -> tuple[Tensor, Tensor, float, int]:
    """``n`` teacher-labelled sequences whose best path wins by at least ``target``.

    Returns:
        ``(words (n, T), tags (n, T), γ, draws)``: the kept data, their margin (the smallest kept
        gap) and the number of sequences drawn.

    Raises:
        ValueError: fewer than ``n`` kept in ``max_draws`` draws.
    """
    V, K = teacher.emission.shape
    paths = all_paths(K, length)
    kept_w: list[Tensor] = []
    kept_t: list[Tensor] = []
    kept_g: list[Tensor] = []
    have = draws = 0
    while have < n:
        if draws >= max_draws:
            raise ValueError(f"only {have} of {n} sequences reach margin {target} in {draws} draws")
        words = torch.randint(V, (batch, length), generator=generator)
        draws += batch
        tags, gaps = teacher_margins(teacher, words, paths)
        keep = gaps >= target
        kept_w.append(words[keep])
        kept_t.append(tags[keep])
        kept_g.append(gaps[keep])
        have += int(keep.sum())
    gaps = torch.cat(kept_g)[:n]
    return torch.cat(kept_w)[:n], torch.cat(kept_t)[:n], float(gaps.min()), draws


def radius(words: Tensor, tags: Tensor, num_tags: int, vocab_size: int) -> float:
    """``R = max_i max_z ||F(x_i, z_i) - F(x_i, z)||``, exact by enumerating every path."""
    paths = all_paths(num_tags, words.shape[1])
    best = 0.0
    for x, z in zip(words, tags, strict=True):
        f = features(x, paths, num_tags, vocab_size)
        gold = features(x, z.unsqueeze(0), num_tags, vocab_size)
        best = max(best, float((f - gold).pow(2).sum(1).max()))
    return math.sqrt(best)


def perceptron_mistakes(
    words: Tensor, tags: Tensor, num_tags: int, vocab_size: int, max_epochs: int = 1000
) -> list[int]:
    """The plain structured perceptron from zero weights: mistakes per epoch, until one has none.

    Each sequence in order is decoded by Viterbi under the current weights; a path other than the gold
    one is a mistake and adds ``F(x, z_gold) - F(x, ẑ)`` to the weights.

    Returns:
        Mistakes in each epoch run (the last entry is 0 when it converged within ``max_epochs``).
    """
    K, V = num_tags, vocab_size
    emission = torch.zeros(V, K, dtype=torch.float64)
    trans = torch.zeros(K, K, dtype=torch.float64)
    start = torch.zeros(K, dtype=torch.float64)
    per_epoch: list[int] = []
    for _ in range(max_epochs):
        mistakes = 0
        for x, z in zip(words, tags, strict=True):
            pot = make_potentials(emission[x].unsqueeze(0), trans, start)
            _, path = viterbi(pot)
            zhat = path[0]
            if torch.equal(zhat, z):
                continue
            mistakes += 1
            for seq, sign in ((z, 1.0), (zhat, -1.0)):
                emission.index_put_((x, seq), torch.full_like(x, sign, dtype=torch.float64), True)
                trans.index_put_(
                    (seq[:-1], seq[1:]), torch.full_like(seq[1:], sign, dtype=torch.float64), True
                )
                start[seq[0]] += sign
        per_epoch.append(mistakes)
        if mistakes == 0:
            break
    return per_epoch


def mistake_bound_rows(
    margins: Sequence[float] = DEFAULT_MARGINS,
    n: int = 100,
    length: int = 5,
    num_tags: int = 3,
    vocab_size: int = 5,
    seed: int = 0,
    max_epochs: int = 1000,
) -> list[dict[str, Any]]:
    """Theorem 5 at each target margin: one teacher, one separable sample per margin, the perceptron.

    Deterministic: the teacher and every sample come from ``torch.Generator().manual_seed(seed)``
    (teacher first, then the samples in the order of ``margins``); one intra-op thread.

    Returns:
        One row per margin: ``target_gamma``, ``gamma`` (exact margin of the kept data under ``u``),
        ``R`` (exact), ``bound`` (``R²/γ²``), ``mistakes`` (all epochs), ``mistakes_per_epoch``,
        ``epochs``, ``converged``, ``looseness`` (bound / mistakes, ``None`` without a mistake),
        ``draws`` (sequences drawn to keep ``n``), ``n``.
    """
    if n < 1 or not margins or min(margins) <= 0:
        raise ValueError(f"need n >= 1 and positive margins, got n={n}, margins={tuple(margins)}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        g = torch.Generator().manual_seed(seed)
        teacher = make_teacher(num_tags, vocab_size, g)
        rows: list[dict[str, Any]] = []
        for target in margins:
            words, tags, gamma, draws = separable_sample(teacher, n, length, target, g)
            R = radius(words, tags, num_tags, vocab_size)
            per_epoch = perceptron_mistakes(words, tags, num_tags, vocab_size, max_epochs)
            mistakes = sum(per_epoch)
            bound = R * R / (gamma * gamma)
            rows.append(
                {
                    "target_gamma": target,
                    "gamma": gamma,
                    "R": R,
                    "bound": bound,
                    "mistakes": mistakes,
                    "mistakes_per_epoch": per_epoch,
                    "epochs": len(per_epoch),
                    "converged": per_epoch[-1] == 0,
                    "looseness": bound / mistakes if mistakes else None,
                    "draws": draws,
                    "n": n,
                }
            )
    finally:
        torch.set_num_threads(threads)
    return rows
