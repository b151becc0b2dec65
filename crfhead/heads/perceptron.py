"""The structured perceptron and its cost-augmented hinge.

Collins (2002), Algorithm 1 and Theorem 5 of *Sequence Labeling: From HMMs to Linear-Chain CRFs*; the margin-rescaled Hamming hinge of Taskar
et al. (2004) and Tsochantaridis et al. (2005).

The potentials are the CRF's (same emission scores, same transitions, same constraints); only the loss
differs. With ``ẑ`` the Viterbi path of the (cost-augmented) scores,

    loss = score(ẑ) + cost * Hamming(ẑ, z) - score(z) >= 0,

whose gradient is ``F(x, ẑ) - F(x, z)``: one SGD step of rate 1 on it *is* the perceptron update
``θ ← θ + F(x, z) - F(x, ẑ)``, and it is 0 exactly when the gold path wins (by ``cost`` per wrong tag
with ``cost > 0``). Parameters start at 0 as Algorithm 1 does; use ``reduction="sum"`` for Collins'
per-mistake updates.

Averaging, which Collins recommends for evaluation, is a training-loop concern: the shipped configs
add :class:`crfhead.training.callbacks.WeightAveraging` (an equal-weight average of every parameter, encoder
included, after every step); the plain perceptron of Theorem 5's mistake bound trains without it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from crfhead import engine
from crfhead.engine.potentials import ChainPotentials, restrict
from crfhead.heads.crf import CRF
from crfhead.heads.fit import CostAugmentedFit

__all__ = ["StructuredPerceptron"]


class StructuredPerceptron(CRF):
    """A CRF-shaped head trained by the perceptron (``cost = 0``) or the Hamming hinge (``cost > 0``).

    Args:
        num_tags: ``K``.
        labels: optional tag names; required with ``scheme``.
        scheme: optional tagging scheme (constrains training and decoding alike).
        decoder: ``"viterbi"`` (default), ``"posterior"`` or ``"posterior_valid"``.
        cost: Hamming cost per wrong tag added to every competing path's score before decoding (0: the
            plain perceptron).

    The inference methods (``viterbi``, ``marginals``...) read the scores as a CRF would; marginals
    and ``nll`` are those of the Gibbs distribution of the scores, which the perceptron does not
    calibrate.
    """

    calibrated = False
    fitting = CostAugmentedFit

    def __init__(
        self,
        num_tags: int,
        *,
        labels: Sequence[str] | None = None,
        scheme: str | None = None,
        decoder: str = "viterbi",
        cost: float = 0.0,
    ) -> None:
        if not cost >= 0.0:
            raise ValueError(f"cost must be >= 0, got {cost!r}")
        self.cost = float(cost)
        super().__init__(num_tags, labels=labels, scheme=scheme, decoder=decoder)

    def reset_parameters(self) -> None:
        """All zero (Algorithm 1 starts at ``θ = 0``)."""
        for name in self.scores:
            nn.init.zeros_(getattr(self, name))

    def extra_repr(self) -> str:  # noqa: D102
        return f"{super().extra_repr()}, cost={self.cost}"

    def augmented(self, pot: ChainPotentials, tags: Tensor) -> ChainPotentials:
        """``pot`` with ``cost`` added to every tag but the gold one at each unmasked position.

        Args:
            pot: the chain potentials, emissions ``(B, T, K)``.
            tags: ``(B, T)`` int64 gold tags (any value where masked).
        """
        if self.cost == 0.0:
            return pot
        gold = torch.nn.functional.one_hot(tags.clamp(min=0), self.num_tags).to(pot.emissions)
        extra = self.cost * (1.0 - gold) * pot.mask[..., None]  # (B, T, K)
        return dataclasses.replace(pot, emissions=pot.emissions + extra)

    def sequence_losses(
        self,
        emissions: Tensor,
        tags: Tensor | None,
        mask: Tensor | None,
        allowed: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``score(ẑ) + cost·Hamming(ẑ, z) - score(z)`` per sequence; ``>= 0``.

        With ``allowed`` ``(B, T, K)`` (partial labels) the gold path ``z`` is the best labelling
        inside the sets under the current scores, the latent-variable perceptron of Fernandes &
        Brefeld (2011) (Sun et al. 2009): the update moves towards the best consistent labelling and
        is 0 when the best path overall is consistent.
        """
        pot = self.potentials(emissions, mask)
        if allowed is not None:
            sub = restrict(pot, allowed)
            if tags is not None:
                tags = self._check_tags(emissions, tags, pot.mask)
                self._check_allowed_tags(tags, allowed, pot.mask)
            with torch.no_grad():
                best_inside, imputed = engine.viterbi(sub)
            self._refuse_dead(pot.nonempty & torch.isneginf(best_inside))
            gold = engine.score(pot, imputed)
            tags = imputed
        else:
            assert tags is not None
            gold = self.gold_score(pot, emissions, tags)
        aug = self.augmented(pot, tags.long())
        with torch.no_grad():
            best = engine.viterbi(aug)[1]  # (B, T)
        return engine.score(aug, best) - gold, pot.mask  # the gold path costs nothing

    def mistakes(self, emissions: Tensor, tags: Tensor, mask: Tensor | None = None) -> Tensor:
        """``(B,)`` bool: the (cost-augmented) Viterbi path differs from the gold one."""
        pot = self.potentials(emissions, mask)
        tags = self._check_tags(emissions, tags, pot.mask)
        with torch.no_grad():
            best = engine.viterbi(self.augmented(pot, tags))[1]
        return ((best != tags) & pot.mask).any(dim=1)
