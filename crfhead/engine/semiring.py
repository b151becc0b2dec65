"""Semirings for the linear-chain dynamic program, in log space.

One recursion (the chain distributive law: the generalised distributive law of Aji and McEliece,
2000, on a chain) serves every decoder: only ⊕ changes. In log space ⊗ is ``+`` and ⊕ is

* :class:`LogSemiring`  -- log-sum-exp (sum-product): partition function and marginals;
* :class:`MaxSemiring`  -- max (max-product): Viterbi score, back-pointers and max-marginals;
* :class:`KMaxSemiring` -- the k largest values (k-best): the top-k paths and their scores.

A forward state has shape ``(B, K, R)``: for each tag, ``R`` ranked values (``R = 1`` except for
k-best). :meth:`Semiring.reduce` aggregates a ``(B, N, M)`` tensor over ``N`` (``N`` = previous tag
× previous rank) into ``(B, R, M)`` values and, for the max-type semirings, the ``(B, R, M)`` indices
into ``N`` that attained them (the back-pointers).
"""

from __future__ import annotations

from typing import ClassVar

from torch import Tensor

from crfhead.numerics import logsumexp, safe_max

__all__ = ["KMaxSemiring", "LogSemiring", "MaxSemiring", "Semiring"]


class Semiring:
    """⊕ in log space over a dimension of ``R`` ranks (see the module docstring)."""

    ranks: int = 1
    has_pointers: ClassVar[bool] = False

    def reduce(self, x: Tensor, dim: int) -> tuple[Tensor, Tensor | None]:
        """Aggregate ``x`` over ``dim``; the result keeps ``dim`` with size :attr:`ranks`.

        Returns:
            ``(values, indices)``; ``indices`` (int64, the positions in ``dim`` that attained each
            value) is ``None`` for :class:`LogSemiring`.
        """
        raise NotImplementedError

    def normalizer(self, state: Tensor) -> Tensor:
        """A per-row shift of a ``(B, K, R)`` state, ``(B,)``, subtracted to keep states O(1).

        Every semiring here uses the largest entry: any shift is exact (it is accumulated separately),
        and ``max`` is several times cheaper than a log-sum-exp. A state that is all ``-inf`` (no valid
        path reaches it) is shifted by 0, so it stays ``-inf`` and never becomes NaN.
        """
        return safe_max(state.flatten(1), dim=1)


class LogSemiring(Semiring):
    """Sum-product in log space: ⊕ = log-sum-exp."""

    def reduce(self, x: Tensor, dim: int) -> tuple[Tensor, Tensor | None]:  # noqa: D102
        return logsumexp(x, dim=dim, keepdim=True), None


class MaxSemiring(Semiring):
    """Max-product in log space: ⊕ = max. Ties go to the lowest index (``torch.max`` semantics)."""

    has_pointers = True

    def reduce(self, x: Tensor, dim: int) -> tuple[Tensor, Tensor | None]:  # noqa: D102
        values, indices = x.max(dim=dim, keepdim=True)
        return values, indices


class KMaxSemiring(Semiring):
    """k-best in log space: ⊕ keeps the ``k`` largest values, in decreasing order."""

    has_pointers = True

    def __init__(self, k: int) -> None:
        if k < 1:
            raise ValueError(f"k-best needs k >= 1, got k={k}")
        self.ranks = k

    def reduce(self, x: Tensor, dim: int) -> tuple[Tensor, Tensor | None]:  # noqa: D102
        values, indices = x.topk(self.ranks, dim=dim, largest=True, sorted=True)
        return values, indices
