"""The shared half of every structured head: validation, inference and decoding over chain potentials.

A head turns emissions ``(B, T, K)`` into :class:`~crfhead.potentials.ChainPotentials` and defines a
training loss; everything else (``log Z``, marginals, Viterbi, top-k, posterior decoding, sampling)
is the one chain engine run on those potentials (:mod:`crfhead.chain`, :mod:`crfhead.decoding`). So
the CRF, the MEMM, the structured perceptron and the HMM differ only in :meth:`ChainHead.potentials`
and :meth:`ChainHead.loss` (seed ``000``: "one recursion, two semirings"; Definitions 2-4, Algorithm 1).

Every method takes ``emissions`` ``(B, T, K)`` floating point (bf16/fp16 computed in float32), ``tags``
``(B, T)`` integer and ``mask`` ``(B, T)`` bool (``None``: every position). Masks may have holes.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from crfhead import chain, decoding
from crfhead.constraints import allowed_transitions, canonical_scheme
from crfhead.numerics import is_impossible
from crfhead.potentials import ChainPotentials, check_tag_range

__all__ = ["DECODERS", "REDUCTIONS", "ChainHead", "reduce_loss"]

REDUCTIONS = ("none", "sum", "mean", "token_mean")
DECODERS = ("viterbi", "posterior", "posterior_valid")
"""``viterbi``: the best path (Theorem 4a); ``posterior``: each position's most probable tag (Theorem
4b); ``posterior_valid``: the path of most expected correct tags among those the scheme allows."""


def is_tracing() -> bool:
    """Whether ``torch.compile``/``torch.export`` is tracing (data-dependent checks are skipped)."""
    return bool(torch.compiler.is_compiling())


def reduce_loss(losses: Tensor, mask: Tensor, reduction: str) -> Tensor:
    """Reduce per-sequence losses ``(B,)`` as ``reduction`` says.

    ``none``, ``sum``, ``mean`` (over sequences) or ``token_mean`` (over the unmasked tokens of
    ``mask`` ``(B, T)``).
    """
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if reduction == "mean":
        return losses.mean()
    return losses.sum() / mask.sum().clamp(min=1)


class ChainHead(nn.Module):
    """Base class of the structured heads: subclasses implement :meth:`potentials` and :meth:`loss`.

    Args:
        num_tags: ``K``, the number of tags.
        labels: optional tag names, ``len(labels) == num_tags``; required with ``scheme``.
        scheme: optional tagging scheme (``"BIO"``, ``"IOB1"``, ``"BIOES"``, ``"BIOUL"``, ``"IO"``...);
            with ``labels`` it constrains starts, transitions and ends in training and decoding alike.
        decoder: what :meth:`decode_labels` (the training loop's decoder) returns, one of
            :data:`DECODERS`.

    Attributes:
        allowed_transitions: ``(K, K)`` bool buffer, ``[from, to]`` (all True when unconstrained).
        allowed_start: ``(K,)`` bool buffer.
        allowed_end: ``(K,)`` bool buffer.
    """

    allowed_transitions: Tensor
    allowed_start: Tensor
    allowed_end: Tensor

    def __init__(
        self,
        num_tags: int,
        *,
        labels: Sequence[str] | None = None,
        scheme: str | None = None,
        decoder: str = "viterbi",
    ) -> None:
        super().__init__()
        if not isinstance(num_tags, int) or num_tags < 1:
            raise ValueError(f"num_tags must be a positive int, got {num_tags!r}")
        if labels is not None and len(labels) != num_tags:
            raise ValueError(f"got {len(labels)} labels for num_tags={num_tags}")
        if scheme is not None and labels is None:
            raise ValueError(f"scheme={scheme!r} needs the label list (labels=...) to constrain")
        if decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
        self.num_tags = num_tags
        self.labels: list[str] | None = list(labels) if labels is not None else None
        self.scheme: str | None = canonical_scheme(scheme) if scheme is not None else None
        self.decoder = decoder
        if self.scheme is not None and self.labels is not None:
            trans, start, end = allowed_transitions(self.labels, self.scheme)
        else:
            trans = torch.ones(num_tags, num_tags, dtype=torch.bool)
            start = end = torch.ones(num_tags, dtype=torch.bool)
        # Derived from (labels, scheme): not persistent, so state_dicts hold parameters only.
        self.register_buffer("allowed_transitions", trans, persistent=False)
        self.register_buffer("allowed_start", start, persistent=False)
        self.register_buffer("allowed_end", end, persistent=False)
        self.constrained = self.scheme is not None

    def extra_repr(self) -> str:  # noqa: D102
        return f"num_tags={self.num_tags}, scheme={self.scheme}, decoder={self.decoder}"

    # ------------------------------------------------------------------ validation
    def _check_emissions(self, emissions: Tensor) -> None:
        if not isinstance(emissions, Tensor) or not emissions.is_floating_point():
            got = emissions.dtype if isinstance(emissions, Tensor) else type(emissions).__name__
            raise ValueError(f"emissions must be a floating-point tensor (B, T, K), got {got}")
        if emissions.dim() != 3 or emissions.shape[2] != self.num_tags:
            raise ValueError(
                f"emissions must be (B, T, K={self.num_tags}), got shape {tuple(emissions.shape)}"
            )

    def _check_tags(
        self, emissions: Tensor, tags: Tensor, mask: Tensor, *, values: bool = True
    ) -> Tensor:
        """Validate gold ``tags`` ``(B, T)`` against ``emissions`` and return them as int64.

        ``values=False`` checks the dtype and shape only, for callers that pass the tags to
        :func:`crfhead.chain.nll`, which checks the range itself (in the kernel, on the cpu backend).
        """
        if not isinstance(tags, Tensor) or tags.is_floating_point() or tags.dtype == torch.bool:
            got = tags.dtype if isinstance(tags, Tensor) else type(tags).__name__
            raise ValueError(f"tags must be an integer tensor (B, T), got {got}")
        if tags.shape != emissions.shape[:2]:
            raise ValueError(
                f"tags must be (B, T) = {tuple(emissions.shape[:2])} for emissions of shape "
                f"{tuple(emissions.shape)}, got shape {tuple(tags.shape)}"
            )
        tags = tags.long()
        if values and not is_tracing():
            check_tag_range(tags, mask, self.num_tags)
        return tags

    def gold_score(self, pot: ChainPotentials, emissions: Tensor, tags: Tensor) -> Tensor:
        """Score ``(B,)`` of the gold ``tags`` under ``pot``, refusing gold paths the scheme forbids.

        Raises:
            ValueError: (constrained head) a gold path with an invalid start, transition or end; the
                message names the sequences and points to :func:`crfhead.constraints.repair_tags`.
        """
        gold = chain.score(pot, self._check_tags(emissions, tags, pot.mask))
        self.check_gold(gold)
        return gold

    def check_gold(self, gold: Tensor) -> None:
        """Refuse gold scores ``(B,)`` that contain a forbidden event of a constrained head.

        Raises:
            ValueError: naming the sequences and pointing to :func:`crfhead.constraints.repair_tags`.
        """
        if self.constrained and not is_tracing():
            broken = is_impossible(gold)
            if bool(broken.any()):
                rows = broken.nonzero()[:, 0].tolist()
                raise ValueError(
                    f"gold tags of sequence(s) {rows[:10]} break the {self.scheme} scheme "
                    "(an invalid start, transition or end); repair them with "
                    "crfhead.constraints.repair_tags before training"
                )

    @staticmethod
    def _check_reduction(reduction: str) -> None:
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")

    # ------------------------------------------------------------------ what subclasses define
    def potentials(self, emissions: Tensor, mask: Tensor | None = None) -> ChainPotentials:
        """The chain potentials of a batch (validated, upcast, constraints applied)."""
        raise NotImplementedError

    def loss(
        self, emissions: Tensor, tags: Tensor, mask: Tensor | None = None, reduction: str = "mean"
    ) -> Tensor:
        """The training loss of the gold ``tags``; reduced as in :func:`reduce_loss`."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared
    def forward(
        self, emissions: Tensor, tags: Tensor, mask: Tensor | None = None, reduction: str = "mean"
    ) -> Tensor:
        """Same as :meth:`loss` (a head is a loss in ``forward``)."""
        return self.loss(emissions, tags, mask, reduction)

    def log_partition(self, emissions: Tensor, mask: Tensor | None = None) -> Tensor:
        """``log Z(x)`` per sequence, ``(B,)``; 0 for a fully masked row."""
        return chain.log_partition(self.potentials(emissions, mask))

    def score(self, emissions: Tensor, tags: Tensor, mask: Tensor | None = None) -> Tensor:
        """Score of the given tag paths, ``(B,)`` (``IMPOSSIBLE`` terms included if they break constraints)."""
        pot = self.potentials(emissions, mask)
        return chain.score(pot, self._check_tags(emissions, tags, pot.mask))

    def nll(
        self, emissions: Tensor, tags: Tensor, mask: Tensor | None = None, reduction: str = "mean"
    ) -> Tensor:
        """Conditional negative log-likelihood ``log Z - score(tags)`` under this head's chain.

        This is the log-loss the metrics report for every head (for the CRF it is also the training
        loss). Reductions as in :func:`reduce_loss`.
        """
        self._check_reduction(reduction)
        pot = self.potentials(emissions, mask)
        gold = chain.score(pot, self._check_tags(emissions, tags, pot.mask))
        return reduce_loss(chain.log_partition(pot) - gold, pot.mask, reduction)

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
        with torch.no_grad():  # paths carry no gradient: skip the differentiable path score
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

    def predict(self, emissions: Tensor, mask: Tensor | None = None) -> Tensor:
        """Tag ids by the head's ``decoder``, ``(B, T)`` int64, ``-1`` where masked."""
        if self.decoder == "viterbi":
            return self.decode(emissions, mask)
        return self.posterior_decode(emissions, mask, valid_only=self.decoder == "posterior_valid")

    def decode_labels(self, emissions: Tensor, mask: Tensor | None = None) -> list[list[str]]:
        """Decoded paths (by ``decoder``) as label strings, masked positions dropped; needs ``labels``."""
        if self.labels is None:
            raise ValueError(
                f"decode_labels needs the {type(self).__name__} to be built with labels=[...]"
            )
        paths = self.predict(emissions, mask).tolist()
        return [[self.labels[i] for i in row if i >= 0] for row in paths]
