"""The maximum-entropy Markov model head (McCallum, Freitag & Pereira 2000; Definition 4 of *Sequence Labeling: From HMMs to Linear-Chain CRFs*).

``p(z | x) = prod_t p(z_t | z_{t-1}, x)`` with each factor a softmax over the next tag,

    p(z_1 = k | x)            = softmax_k(start[k] + emissions[1, k])
    p(z_t = k | z_{t-1}=j, x) = softmax_k(transitions[j, k] + emissions[t, k]),

so the model is a chain whose per-edge transitions are the local log-probabilities (an ``(B, T-1, K,
K)`` tensor) and whose ``log Z`` is 0 by construction: decoding, marginals, top-k and sampling are the
shared engine's. Training is local: the loss is the sum of the factors' log-losses on the *gold*
previous tag (no forward-backward needed).

Lookahead ``w`` (Proposition 2) belongs to the encoder: the factor at ``t`` sees exactly what the
emissions at ``t`` see. With a word-window encoder whose right context is ``w``
(:class:`~crfhead.encoders.WordWindowEncoder` ``offsets=(-2, -1, 0)`` for the causal ``w = 0``) or
feature templates ``left2`` (+ ``right1`` for ``w = 1``), the marginal of ``z_{1:t}`` depends on no
word after ``t + w``. A BiLSTM or transformer encoder sees the whole sentence (``w = ∞``), which removes
Proposition 2's bound but not the local normalisation.

Constraints: forbidden starts and transitions are removed *inside* each softmax (the factor
normalises over the allowed next tags), in training and decoding alike. A local model cannot normalise
an end constraint (BIOES's ``B``/``I`` may not end), so ends are constrained at decoding only: there
the chain is conditioned on a valid end and ``log Z = log p(valid end) <= 0``. With BIO, IOB1 and IO
every tag may end and ``log Z`` is exactly 0.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from crfhead.checks import as_bool_mask, refuse_non_finite
from crfhead.engine.potentials import ChainPotentials, constrain, make_potentials
from crfhead.heads.base import ChainHead
from crfhead.numerics import compute_dtype, is_tracing, no_autocast

__all__ = ["MEMM"]


class MEMM(ChainHead):
    """A locally normalised chain of softmax classifiers over ``num_tags`` tags.

    Args:
        num_tags: ``K``.
        labels: optional tag names (``len == K``); required with ``scheme``.
        scheme: optional tagging scheme; forbidden starts/transitions are left out of every softmax.
        decoder: ``"viterbi"`` (default), ``"posterior"`` (Corollary 2's decoder) or
            ``"posterior_valid"``.

    Attributes:
        transitions: ``nn.Parameter`` ``(K, K)``, ``[previous, next]``: the previous tag's contribution
            to the next tag's logit.
        start_transitions: ``nn.Parameter`` ``(K,)``: the first tag's logit offset.
    """

    scores: ClassVar[dict[str, tuple[str, ...]]] = {
        "transitions": ("K", "K"),
        "start_transitions": ("K",),
    }
    transitions: nn.Parameter
    start_transitions: nn.Parameter

    def local_log_probs(
        self, emissions: Tensor, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """The factors' log-probabilities.

        Args:
            emissions: ``(B, T, K)``.
            mask: unused here (kept for symmetry); holes are handled by the chain, which uses the
                factor of the position entered.

        Returns:
            ``first`` ``(B, T, K)``: ``log p(z_t = k | x)`` were ``t`` the first position;
            ``edges`` ``(B, T-1, K, K)``: entry ``t-1`` is ``log p(z_t = k | z_prev = j, x)``.
            Forbidden starts and transitions are ``IMPOSSIBLE``.
        """
        self._check_emissions(emissions)
        dtype = compute_dtype(emissions.dtype)
        with no_autocast(emissions.device):
            em = emissions.to(dtype)
            trans = self.transitions.to(dtype)
            start = self.start_transitions.to(dtype)
            if self.constrained:
                trans = constrain(trans, self.allowed_transitions)
                start = constrain(start, self.allowed_start)
            first = torch.log_softmax(em + start, dim=-1)  # (B, T, K)
            logits = trans[None, None] + em[:, 1:, None, :]  # (B, T-1, K_prev, K)
            edges = torch.log_softmax(logits, dim=-1)
            if self.constrained:
                # A row with every next tag forbidden would otherwise spread mass uniformly over them.
                first = constrain(first, self.allowed_start)
                edges = constrain(edges, self.allowed_transitions)
        return first, edges

    def _chain(
        self, emissions: Tensor, mask: Tensor | None, end_constraint: bool
    ) -> ChainPotentials:
        first, edges = self.local_log_probs(emissions, mask)  # validates the shapes
        B, T, K = emissions.shape
        if mask is None:
            mask = torch.ones(B, T, dtype=torch.bool, device=emissions.device)
        mask = as_bool_mask(mask)  # before its first use (make_potentials checks the shape)
        if not is_tracing():
            refuse_non_finite(
                "emissions", emissions, mask
            )  # named, not as the transitions it feeds
        m = mask.long()
        has_prev = (m.cumsum(1) - m) > 0  # (B, T): an unmasked position before t
        unary = torch.where(has_prev[..., None], torch.zeros_like(first), first)  # (B, T, K)
        end = torch.zeros(K, dtype=first.dtype, device=first.device)
        if end_constraint and self.constrained:
            end = constrain(end, self.allowed_end)
        return make_potentials(unary, edges, torch.zeros_like(end), end, mask)

    def potentials(self, emissions: Tensor, mask: Tensor | None = None) -> ChainPotentials:
        """The MEMM as a chain: unary = the first factor, per-edge transitions = the later factors.

        Args:
            emissions: ``(B, T, K)``.
            mask: ``(B, T)`` bool or ``None``.

        ``log Z`` is 0 (or ``log p(valid end)`` under an end-constrained scheme; see the module doc).
        """
        return self._chain(emissions, mask, end_constraint=True)

    def sequence_losses(
        self,
        emissions: Tensor,
        tags: Tensor | None,
        mask: Tensor | None,
        allowed: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """The local log-loss ``-sum_t log p(z_t | z_{t-1}, x)`` with the gold previous tag.

        With ``allowed`` ``(B, T, K)``: ``-log`` of the summed probability of every labelling inside
        the sets, ``-log Z_allowed`` of the chain (whose ``log Z`` is 0 without the end constraint):
        a forward recursion, no longer local.
        """
        pot = self._chain(emissions, mask, end_constraint=False)
        if allowed is None:
            assert tags is not None
            return -self.gold_score(pot, emissions, tags), pot.mask
        return self.partial_nll(emissions, tags, mask, allowed, pot=pot)
