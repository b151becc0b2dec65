"""The linear-chain CRF layer (Lafferty, McCallum & Pereira 2001; Definition 3 of the seed).

``p(z | x) = exp(score(z)) / Z(x)`` with ``score(z) = start[z_1] + sum_t emissions[t, z_t]
+ sum_t transitions[z_{t-1}, z_t] + end[z_T]`` over the unmasked positions. The layer owns the
transition parameters; everything else is the pure chain engine (:mod:`crfhead.chain`,
:mod:`crfhead.decoding`). With ``labels`` and a ``scheme`` the layer is constrained: forbidden starts,
transitions and ends are ``IMPOSSIBLE`` in the partition function, the loss *and* every decoder.

Parameter names and initialisation match pytorch-crf 0.7.2, so its ``state_dict`` loads unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from crfhead import chain
from crfhead.constraints import constrain
from crfhead.head import REDUCTIONS, ChainHead, reduce_loss
from crfhead.potentials import ChainPotentials, make_potentials

__all__ = ["CRF", "REDUCTIONS"]


class CRF(ChainHead):
    """A linear-chain CRF over ``num_tags`` tags, batch-first.

    Args:
        num_tags: ``K``, the number of tags.
        labels: optional tag names, ``len(labels) == num_tags``; required with ``scheme``.
        scheme: optional tagging scheme (``"BIO"``, ``"IOB1"``, ``"BIOES"``, ``"BIOUL"``, ``"IO"``...);
            with ``labels`` it constrains starts, transitions and ends in training and decoding alike.
        decoder: what :meth:`decode_labels` returns: ``"viterbi"`` (default), ``"posterior"`` or
            ``"posterior_valid"`` (see :data:`crfhead.head.DECODERS`).

    Attributes:
        transitions: ``nn.Parameter`` ``(K, K)``, ``[from, to]``.
        start_transitions: ``nn.Parameter`` ``(K,)``.
        end_transitions: ``nn.Parameter`` ``(K,)``.

    Shapes of every method: ``emissions`` ``(B, T, K)`` floating point (bf16/fp16 are computed in
    float32), ``tags`` ``(B, T)`` integer, ``mask`` ``(B, T)`` bool (``None``: all positions). Masks may
    have holes; tags at masked positions are ignored. Inference methods (``marginals``, ``viterbi``,
    ``topk``, ``posterior_decode``, ``sample``...) come from :class:`~crfhead.head.ChainHead`.
    """

    def __init__(
        self,
        num_tags: int,
        *,
        labels: Sequence[str] | None = None,
        scheme: str | None = None,
        decoder: str = "viterbi",
    ) -> None:
        super().__init__(num_tags, labels=labels, scheme=scheme, decoder=decoder)
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform(-0.1, 0.1), as pytorch-crf."""
        for p in (self.transitions, self.start_transitions, self.end_transitions):
            nn.init.uniform_(p, -0.1, 0.1)

    def potentials(self, emissions: Tensor, mask: Tensor | None = None) -> ChainPotentials:
        """The chain potentials of a batch: validated, upcast, constraints applied.

        Args:
            emissions: ``(B, T, K)``.
            mask: ``(B, T)`` bool or ``None``.
        """
        self._check_emissions(emissions)
        trans: Tensor = self.transitions
        start: Tensor = self.start_transitions
        end: Tensor = self.end_transitions
        if self.constrained:
            trans = constrain(trans, self.allowed_transitions)
            start = constrain(start, self.allowed_start)
            end = constrain(end, self.allowed_end)
        return make_potentials(emissions, trans, start, end, mask)

    def nll(
        self,
        emissions: Tensor,
        tags: Tensor,
        mask: Tensor | None = None,
        reduction: str = "mean",
    ) -> Tensor:
        """Negative log-likelihood ``log Z - score(tags)``: the training loss.

        Args:
            emissions: ``(B, T, K)``.
            tags: ``(B, T)`` gold tags (ignored where masked, so ``-100`` padding is fine).
            mask: ``(B, T)`` bool or ``None``.
            reduction: ``"none"`` → ``(B,)``; ``"sum"``; ``"mean"`` over sequences; ``"token_mean"``
                over unmasked tokens.

        Raises:
            ValueError: on bad shapes/dtypes, out-of-range tags, or (constrained layer) gold paths that
                break the scheme: repair them with :func:`crfhead.constraints.repair_tags`.
        """
        self._check_reduction(reduction)
        pot = self.potentials(emissions, mask)
        losses, gold = chain.nll(pot, self._check_tags(emissions, tags, pot.mask, values=False))
        self.check_gold(gold)
        return reduce_loss(losses, pot.mask, reduction)

    def loss(
        self,
        emissions: Tensor,
        tags: Tensor,
        mask: Tensor | None = None,
        reduction: str = "mean",
    ) -> Tensor:
        """The training loss: :meth:`nll`."""
        return self.nll(emissions, tags, mask, reduction)
