"""The linear-chain CRF layer (Lafferty, McCallum & Pereira 2001; Definition 3 of the seed).

``p(z | x) = exp(score(z)) / Z(x)`` with ``score(z) = start[z_1] + sum_t emissions[t, z_t]
+ sum_t transitions[z_{t-1}, z_t] + end[z_T]`` over the unmasked positions. The layer owns the
transition parameters; everything else is the pure chain engine (:mod:`crfhead.engine`). With ``labels`` and a ``scheme`` the layer is constrained: forbidden starts,
transitions and ends are ``IMPOSSIBLE`` (``-inf``, excluded exactly) in the partition function, the
loss *and* every decoder.

Parameter names and initialisation match pytorch-crf 0.7.2, so its ``state_dict`` loads unchanged.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from crfhead import engine
from crfhead.engine.potentials import ChainPotentials, constrain, make_potentials
from crfhead.heads.base import REDUCTIONS, ChainHead
from crfhead.numerics import is_tracing

__all__ = ["CRF", "REDUCTIONS"]


class CRF(ChainHead):
    """A linear-chain CRF over ``num_tags`` tags, batch-first.

    Args:
        num_tags: ``K``, the number of tags.
        labels: optional tag names, ``len(labels) == num_tags``; required with ``scheme``.
        scheme: optional tagging scheme (``"BIO"``, ``"IOB1"``, ``"BIOES"``, ``"BIOUL"``, ``"IO"``...);
            with ``labels`` it constrains starts, transitions and ends in training and decoding alike.
        decoder: what :meth:`decode_labels` returns: ``"viterbi"`` (default), ``"posterior"`` or
            ``"posterior_valid"`` (see :data:`crfhead.heads.base.DECODERS`).

    Attributes:
        transitions: ``nn.Parameter`` ``(K, K)``, ``[from, to]``.
        start_transitions: ``nn.Parameter`` ``(K,)``.
        end_transitions: ``nn.Parameter`` ``(K,)``.

    Shapes follow the package conventions (:mod:`crfhead`); tags at masked positions are ignored.
    The loss, ``nll`` and the inference methods (``marginals``, ``viterbi``, ``topk``,
    ``posterior_decode``, ``sample``...) come from :class:`~crfhead.heads.base.ChainHead`.
    """

    scores: ClassVar[dict[str, tuple[str, ...]]] = {
        "transitions": ("K", "K"),
        "start_transitions": ("K",),
        "end_transitions": ("K",),
    }
    transitions: nn.Parameter
    start_transitions: nn.Parameter
    end_transitions: nn.Parameter

    def potentials(self, emissions: Tensor, mask: Tensor | None = None) -> ChainPotentials:
        """The chain potentials of a batch: validated, upcast, constraints applied.

        Args:
            emissions: ``(B, T, K)``.
            mask: ``(B, T)`` bool or ``None``.
        """
        self._check_emissions(emissions)
        scores = self._parameters  # the module's own dict: no nn.Module.__getattr__ per score
        trans: Tensor = scores["transitions"]  # type: ignore[assignment]
        start: Tensor = scores["start_transitions"]  # type: ignore[assignment]
        end: Tensor = scores["end_transitions"]  # type: ignore[assignment]
        if self.constrained:
            trans = constrain(trans, self.allowed_transitions)
            start = constrain(start, self.allowed_start)
            end = constrain(end, self.allowed_end)
        return make_potentials(emissions, trans, start, end, mask)

    def sequence_nll(
        self, emissions: Tensor, tags: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """``log Z - score(tags)`` per sequence by one fused engine call; refuses gold paths the scheme forbids."""
        pot = self.potentials(emissions, mask)
        # The range is the engine's to check (in the kernel on the cpu backend, before any work).
        tags = self._check_tags(emissions, tags, pot.mask, values=False)
        losses, gold = engine.nll(pot, tags)
        # A gold path that breaks the scheme scores -inf under the constrained potentials, so the
        # scheme is read at the tags (for the message) only where some gold score is -inf; a valid
        # gold path that the scores forbid keeps its +inf loss.
        if self.constrained and not is_tracing() and bool(torch.isneginf(gold).any()):
            self.check_gold(pot, tags)
        return losses, pot.mask

    def sequence_losses(
        self,
        emissions: Tensor,
        tags: Tensor | None,
        mask: Tensor | None,
        allowed: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """The training loss: the conditional NLL (:meth:`sequence_nll`), or with ``allowed``.

        With ``allowed`` ``(B, T, K)``: ``log Z - log Z_allowed``
        (:meth:`~crfhead.heads.base.ChainHead.partial_nll`).
        """
        if allowed is not None:
            return self.partial_nll(emissions, tags, mask, allowed)
        assert tags is not None
        return self.sequence_nll(emissions, tags, mask)
