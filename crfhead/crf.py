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

from crfhead import chain, decoding
from crfhead.constraints import allowed_transitions, canonical_scheme, constrain
from crfhead.numerics import is_impossible
from crfhead.potentials import ChainPotentials, make_potentials

__all__ = ["CRF", "REDUCTIONS"]

REDUCTIONS = ("none", "sum", "mean", "token_mean")


def _is_tracing() -> bool:
    return bool(torch.compiler.is_compiling())


class CRF(nn.Module):
    """A linear-chain CRF over ``num_tags`` tags, batch-first.

    Args:
        num_tags: ``K``, the number of tags.
        labels: optional tag names, ``len(labels) == num_tags``; required with ``scheme``.
        scheme: optional tagging scheme (``"BIO"``, ``"IOB1"``, ``"BIOES"``, ``"BIOUL"``, ``"IO"``...);
            with ``labels`` it constrains starts, transitions and ends in training and decoding alike.

    Attributes:
        transitions: ``nn.Parameter`` ``(K, K)``, ``[from, to]``.
        start_transitions: ``nn.Parameter`` ``(K,)``.
        end_transitions: ``nn.Parameter`` ``(K,)``.

    Shapes of every method: ``emissions`` ``(B, T, K)`` floating point (bf16/fp16 are computed in
    float32), ``tags`` ``(B, T)`` integer, ``mask`` ``(B, T)`` bool (``None``: all positions). Masks may
    have holes; tags at masked positions are ignored.
    """

    allowed_transitions: Tensor
    allowed_start: Tensor
    allowed_end: Tensor

    def __init__(
        self, num_tags: int, *, labels: Sequence[str] | None = None, scheme: str | None = None
    ) -> None:
        super().__init__()
        if not isinstance(num_tags, int) or num_tags < 1:
            raise ValueError(f"num_tags must be a positive int, got {num_tags!r}")
        if labels is not None and len(labels) != num_tags:
            raise ValueError(f"got {len(labels)} labels for num_tags={num_tags}")
        if scheme is not None and labels is None:
            raise ValueError(f"scheme={scheme!r} needs the label list (labels=...) to constrain")
        self.num_tags = num_tags
        self.labels: list[str] | None = list(labels) if labels is not None else None
        self.scheme: str | None = canonical_scheme(scheme) if scheme is not None else None
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        if self.scheme is not None and self.labels is not None:
            trans, start, end = allowed_transitions(self.labels, self.scheme)
        else:
            trans = torch.ones(num_tags, num_tags, dtype=torch.bool)
            start = end = torch.ones(num_tags, dtype=torch.bool)
        # Derived from (labels, scheme): not persistent, so the state_dict is pytorch-crf's.
        self.register_buffer("allowed_transitions", trans, persistent=False)
        self.register_buffer("allowed_start", start, persistent=False)
        self.register_buffer("allowed_end", end, persistent=False)
        self.constrained = self.scheme is not None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform(-0.1, 0.1), as pytorch-crf."""
        for p in (self.transitions, self.start_transitions, self.end_transitions):
            nn.init.uniform_(p, -0.1, 0.1)

    def extra_repr(self) -> str:  # noqa: D102
        return f"num_tags={self.num_tags}, scheme={self.scheme}"

    # ------------------------------------------------------------------ validation
    def _check_emissions(self, emissions: Tensor) -> None:
        if not isinstance(emissions, Tensor) or not emissions.is_floating_point():
            got = emissions.dtype if isinstance(emissions, Tensor) else type(emissions).__name__
            raise ValueError(f"emissions must be a floating-point tensor (B, T, K), got {got}")
        if emissions.dim() != 3 or emissions.shape[2] != self.num_tags:
            raise ValueError(
                f"emissions must be (B, T, K={self.num_tags}), got shape {tuple(emissions.shape)}"
            )

    def _check_tags(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        if not isinstance(tags, Tensor) or tags.is_floating_point() or tags.dtype == torch.bool:
            got = tags.dtype if isinstance(tags, Tensor) else type(tags).__name__
            raise ValueError(f"tags must be an integer tensor (B, T), got {got}")
        if tags.shape != emissions.shape[:2]:
            raise ValueError(
                f"tags must be (B, T) = {tuple(emissions.shape[:2])} for emissions of shape "
                f"{tuple(emissions.shape)}, got shape {tuple(tags.shape)}"
            )
        tags = tags.long()
        if not _is_tracing():
            bad = mask & ((tags < 0) | (tags >= self.num_tags))
            if bool(bad.any()):
                b, t = (int(i) for i in bad.nonzero()[0])
                raise ValueError(
                    f"tag {int(tags[b, t])} at unmasked position (batch {b}, time {t}) is out of "
                    f"range [0, {self.num_tags})"
                )
        return tags

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

    # ------------------------------------------------------------------ training
    def log_partition(self, emissions: Tensor, mask: Tensor | None = None) -> Tensor:
        """``log Z(x)`` per sequence, ``(B,)``; 0 for a fully masked row."""
        return chain.log_partition(self.potentials(emissions, mask))

    def score(self, emissions: Tensor, tags: Tensor, mask: Tensor | None = None) -> Tensor:
        """Score of the given tag paths, ``(B,)`` (``IMPOSSIBLE`` terms included if they break constraints)."""
        pot = self.potentials(emissions, mask)
        return chain.score(pot, self._check_tags(emissions, tags, pot.mask))

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
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
        pot = self.potentials(emissions, mask)
        gold = chain.score(pot, self._check_tags(emissions, tags, pot.mask))
        if self.constrained and not _is_tracing():
            broken = is_impossible(gold)
            if bool(broken.any()):
                rows = broken.nonzero()[:, 0].tolist()
                raise ValueError(
                    f"gold tags of sequence(s) {rows[:10]} break the {self.scheme} scheme "
                    "(an invalid start, transition or end); repair them with "
                    "crfhead.constraints.repair_tags before training"
                )
        losses = chain.log_partition(pot) - gold
        if reduction == "none":
            return losses
        if reduction == "sum":
            return losses.sum()
        if reduction == "mean":
            return losses.mean()
        return losses.sum() / pot.mask.sum().clamp(min=1)

    def forward(
        self,
        emissions: Tensor,
        tags: Tensor,
        mask: Tensor | None = None,
        reduction: str = "mean",
    ) -> Tensor:
        """Same as :meth:`nll` (the layer is a loss in ``forward``)."""
        return self.nll(emissions, tags, mask, reduction)

    # ------------------------------------------------------------------ inference
    def marginals(self, emissions: Tensor, mask: Tensor | None = None) -> Tensor:
        """Node marginals ``p(z_t = k | x)``, ``(B, T, K)``; 0 where masked."""
        return chain.marginals(self.potentials(emissions, mask))

    def edge_marginals(self, emissions: Tensor, mask: Tensor | None = None) -> Tensor:
        """Edge marginals ``(B, T-1, K, K)``; entry ``t-1`` is the edge entering position ``t``."""
        return chain.edge_marginals(self.potentials(emissions, mask))

    def max_marginals(self, emissions: Tensor, mask: Tensor | None = None) -> Tensor:
        """Max-marginals ``max_{z: z_t = k} p(z | x)``, ``(B, T, K)``; 0 where masked."""
        return chain.max_marginals(self.potentials(emissions, mask))

    def entropy(self, emissions: Tensor, mask: Tensor | None = None) -> Tensor:
        """Entropy of ``p(z | x)`` in nats, ``(B,)``."""
        return chain.entropy(self.potentials(emissions, mask))

    def viterbi(self, emissions: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Best path and its score: ``(scores (B,), paths (B, T))``, ``-1`` where masked."""
        return decoding.viterbi(self.potentials(emissions, mask))

    def decode(self, emissions: Tensor, mask: Tensor | None = None) -> Tensor:
        """Viterbi paths, ``(B, T)`` int64, ``-1`` where masked."""
        return self.viterbi(emissions, mask)[1]

    def topk(self, emissions: Tensor, k: int, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The ``k`` best paths: scores ``(B, k)`` and paths ``(B, k, T)``; missing: ``-inf`` and ``-1``."""
        return decoding.topk(self.potentials(emissions, mask), k)

    def posterior_decode(
        self, emissions: Tensor, mask: Tensor | None = None, *, valid_only: bool = False
    ) -> Tensor:
        """Posterior-marginal (minimum-Bayes-risk) tags, ``(B, T)``, ``-1`` where masked.

        With ``valid_only=True`` the best path under the scheme's constraints by expected correct tags.
        """
        return decoding.posterior_decode(self.potentials(emissions, mask), valid_only=valid_only)

    def sample(
        self,
        emissions: Tensor,
        num_samples: int,
        mask: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Exact samples of ``p(z | x)``, ``(S, B, T)``, ``-1`` where masked."""
        return decoding.sample(self.potentials(emissions, mask), num_samples, generator)

    def decode_labels(self, emissions: Tensor, mask: Tensor | None = None) -> list[list[str]]:
        """Viterbi paths as label strings (masked positions dropped); needs ``labels``."""
        if self.labels is None:
            raise ValueError("decode_labels needs the CRF to be built with labels=[...]")
        paths = self.decode(emissions, mask).tolist()
        return [[self.labels[i] for i in row if i >= 0] for row in paths]
