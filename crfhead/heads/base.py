"""The one head contract: validation, inference and decoding over chain potentials, shared by every head.

A head turns emissions ``(B, T, K)`` into :class:`~crfhead.engine.potentials.ChainPotentials` and
defines a training loss; everything else (``log Z``, marginals, Viterbi, top-k, posterior decoding,
sampling) is the one chain engine (:mod:`crfhead.engine`) run on those potentials. So the CRF, the
MEMM, the structured perceptron and the HMM differ only in :meth:`ChainHead.potentials` and
:meth:`ChainHead.loss` (*Sequence Labeling: From HMMs to Linear-Chain CRFs*: "one recursion, two semirings"; Definitions 2-4, Algorithm 1).

What the training code may ask beyond that is part of the contract too, never probed: where a
batch's emissions come from (:meth:`ChainHead.emissions_for`: the encoder's, or the head's own for a
head that scores words, :attr:`ChainHead.scores_words`), which batch fields the model reads
(:meth:`ChainHead.reads`), and how the head is fitted (:attr:`ChainHead.fitting`, a strategy of
:mod:`crfhead.heads.fit`: gradient steps, cost-augmented gradient steps, or counting for a
:class:`CountingHead`).

Every method takes ``emissions`` ``(B, T, K)``, ``tags`` ``(B, T)`` integer and ``mask`` ``(B, T)``
bool (``None``: every position), as the package conventions (:mod:`crfhead`) say; an integer mask of
0s and 1s (HuggingFace's int64 ``attention_mask``, uint8) is converted once, where the potentials are
built (:func:`crfhead.checks.as_bool_mask`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from crfhead import engine
from crfhead.engine.potentials import ChainPotentials, check_tag_range, restrict
from crfhead.heads.fit import CountingFit, Fit, GradientFit
from crfhead.numerics import is_tracing, straight_clamp
from crfhead.schemes import allowed_transitions, canonical_scheme

__all__ = ["DECODERS", "REDUCTIONS", "ChainHead", "CountingHead", "path_labels", "reduce_loss"]

REDUCTIONS = ("none", "sum", "mean", "token_mean")
DECODERS = ("viterbi", "posterior", "posterior_valid")
"""``viterbi``: the best path (Theorem 4a); ``posterior``: each position's most probable tag (Theorem
4b); ``posterior_valid``: the path of most expected correct tags among those the scheme allows."""


def path_labels(paths: Tensor, mask: Tensor, labels: Sequence[str]) -> list[list[str]]:
    """Decoded ``paths`` ``(B, T)`` as label strings, masked positions (``-1``) dropped.

    Raises:
        ValueError: a row with an unmasked ``-1``: no allowed tag path (every path goes through a
            forbidden score).
    """
    lost = ((paths < 0) & mask.to(paths.device)).any(1)
    if bool(lost.any()):
        rows = lost.nonzero()[:, 0].tolist()
        raise ValueError(
            f"sequence(s) {rows[:10]} have no allowed tag path: every path goes through a "
            "forbidden (-inf) score"
        )
    return [[labels[i] for i in row if i >= 0] for row in paths.tolist()]


def reduce_loss(losses: Tensor, mask: Tensor, reduction: str) -> Tensor:
    """Reduce per-sequence losses ``(B,)`` as ``reduction`` says.

    ``none``, ``sum``, ``mean`` (over sequences) or ``token_mean`` (over the unmasked tokens of
    ``mask`` ``(B, T)``).
    """
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if reduction == "mean":  # an empty batch has mean loss 0 (as pytorch-crf), still on the graph
        return losses.mean() if losses.numel() else losses.sum()
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

    Raises:
        ValueError: ``num_tags`` not a positive int (a ``bool`` is not one; the message prints the
            value and its type), ``labels`` of another length or naming a tag twice, a ``scheme``
            without ``labels``, an unknown ``decoder``.

    Attributes:
        allowed_transitions: ``(K, K)`` bool buffer, ``[from, to]`` (all True when unconstrained).
        allowed_start: ``(K,)`` bool buffer.
        allowed_end: ``(K,)`` bool buffer.
        scores: the class's learned chain scores by name, each with its shape in tags (``"K"`` a
            dimension of ``num_tags``), in registration order: created here as parameters and
            initialised by :meth:`reset_parameters` (the CRF's ``transitions`` ``("K", "K")``,
            ``start_transitions`` ``("K",)``, ``end_transitions`` ``("K",)``).
        scores_words: the head makes its own emissions from the batch's word ids
            (:meth:`emissions_from_batch`) instead of an encoder's.
        fitting: the strategy that fits the head (:mod:`crfhead.heads.fit`).
        needs: the batch fields such a head reads.
        calibrated: the head's chain is a probability model it was trained as (CRF, MEMM, HMM), so
            its marginals and span probabilities mean something; False for the perceptron, whose
            scores are not calibrated.
    """

    scores: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    fitting: ClassVar[type[Fit]] = GradientFit
    calibrated: ClassVar[bool] = True
    scores_words: ClassVar[bool] = False
    needs: ClassVar[frozenset[str]] = frozenset()
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
        if isinstance(num_tags, bool) or not isinstance(num_tags, int) or num_tags < 1:
            raise ValueError(
                f"num_tags must be a positive int, got {num_tags!r} ({type(num_tags).__name__})"
            )
        if labels is not None:
            if len(labels) != num_tags:
                raise ValueError(f"got {len(labels)} labels for num_tags={num_tags}")
            seen: set[object] = set()
            for i, label in enumerate(labels):
                if label in seen:
                    raise ValueError(
                        f"label {label!r} appears twice in labels (again at index {i}): "
                        "each tag needs a name of its own"
                    )
                seen.add(label)
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
        for name, dims in self.scores.items():
            shape = tuple(num_tags for _ in dims)
            self.register_parameter(name, nn.Parameter(torch.empty(shape)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform(-0.1, 0.1) scores, as pytorch-crf."""
        for name in self.scores:
            nn.init.uniform_(getattr(self, name), -0.1, 0.1)

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
        :func:`crfhead.engine.nll`, which checks the range itself (in the kernel, on the cpu backend).
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
                message names the sequences and points to :func:`crfhead.schemes.repair_tags`.
        """
        tags = self._check_tags(emissions, tags, pot.mask)
        self.check_gold(pot, tags)
        return engine.score(pot, tags)

    def check_gold(self, pot: ChainPotentials, tags: Tensor) -> None:
        """Refuse gold ``tags`` ``(B, T)`` (in range) that break a constrained head's scheme.

        Decided on the tags themselves (a forbidden start, transition or end), never by the score, so
        a valid gold path is accepted however low its score.

        Raises:
            ValueError: naming the sequences and pointing to :func:`crfhead.schemes.repair_tags`.
        """
        if not self.constrained or is_tracing():
            return
        safe = torch.where(pot.mask, tags, torch.zeros_like(tags)).to(self.allowed_start.device)
        mask = pot.mask.to(safe.device)
        broken = (pot.is_first.to(safe.device) & ~self.allowed_start[safe]).any(1)
        broken |= (pot.is_last.to(safe.device) & ~self.allowed_end[safe]).any(1)
        prev = safe.gather(1, pot.prev_index.to(safe.device).clamp(min=0))
        linked = mask & pot.has_prev.to(safe.device)
        broken |= (linked & ~self.allowed_transitions[prev, safe]).any(1)
        if bool(broken.any()):
            rows = broken.nonzero()[:, 0].tolist()
            raise ValueError(
                f"gold tags of sequence(s) {rows[:10]} break the {self.scheme} scheme "
                "(an invalid start, transition or end); repair them with "
                "crfhead.schemes.repair_tags before training"
            )

    @staticmethod
    def _check_reduction(reduction: str) -> None:
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")

    def emissions_for(self, batch: Any, encoder: Callable[[Any], Tensor]) -> Tensor:
        """A batch's emissions ``(B, T, K)``: the ``encoder``'s, or the head's own when it scores words."""
        if self.scores_words:
            return self.emissions_from_batch(batch)
        return encoder(batch)

    def reads(self, encoder_needs: frozenset[str]) -> frozenset[str]:
        """The batch fields the model reads: the encoder's ``encoder_needs``, or the head's own."""
        return self.needs if self.scores_words else encoder_needs

    def emissions_from_batch(self, batch: Any) -> Tensor:
        """Emissions ``(B, T, K)`` the head computes itself from a batch (when :attr:`scores_words`)."""
        raise TypeError(f"{type(self).__name__} scores an encoder's emissions, not a batch")

    # ------------------------------------------------------------------ what subclasses define
    def potentials(self, emissions: Tensor, mask: Tensor | None = None) -> ChainPotentials:
        """The chain potentials of a batch (validated, upcast, constraints applied)."""
        raise NotImplementedError

    def sequence_losses(
        self,
        emissions: Tensor,
        tags: Tensor | None,
        mask: Tensor | None,
        allowed: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """The training loss of each sequence, ``(B,)``, and the ``(B, T)`` mask used.

        With ``allowed`` ``(B, T, K)`` the loss of the partial annotation (every labelling inside the
        sets); ``tags`` may then be ``None``.

        Raises:
            ValueError: bad shapes/dtypes, out-of-range tags, gold tags breaking the scheme, tags
                outside ``allowed``, an ``allowed`` that leaves a sequence no valid path.
        """
        raise NotImplementedError

    # ------------------------------------------------------------------ partial labels
    def chain(
        self, emissions: Tensor, mask: Tensor | None = None, allowed: Tensor | None = None
    ) -> ChainPotentials:
        """:meth:`potentials`, conditioned on ``allowed`` ``(B, T, K)`` bool when given.

        Every disallowed emission is ``-inf`` (:func:`~crfhead.engine.potentials.restrict`), so
        every quantity of the engine on the result is conditioned on the label sets.

        Raises:
            ValueError: ``allowed`` of the wrong shape or dtype, or an unmasked position with no
                allowed label (naming the sequence and position).
        """
        pot = self.potentials(emissions, mask)
        return pot if allowed is None else restrict(pot, allowed)

    @staticmethod
    def _refuse_dead(dead: Tensor) -> None:
        """Raise naming the sequences of ``dead`` ``(B,)`` bool: rows ``allowed`` leaves no path.

        Skipped while tracing (a data-dependent raise cannot be traced).

        Raises:
            ValueError: some row is dead.
        """
        if is_tracing() or not bool(dead.any()):
            return
        rows = dead.nonzero()[:, 0].tolist()
        raise ValueError(
            f"sequence(s) {rows[:10]}{' ...' if len(rows) > 10 else ''}: the allowed labels leave "
            "no valid tag path (every labelling inside the sets uses a forbidden start, transition "
            "or end of the scheme, or a -inf score)"
        )

    def _check_allowed_tags(self, tags: Tensor, allowed: Tensor, mask: Tensor) -> None:
        """Refuse gold ``tags`` ``(B, T)`` outside ``allowed`` ``(B, T, K)`` at unmasked positions.

        Raises:
            ValueError: naming the first sequence and position and the tag.
        """
        if is_tracing():
            return
        safe = torch.where(mask, tags, torch.zeros_like(tags)).clamp(0, self.num_tags - 1)
        inside = allowed.to(torch.bool).gather(2, safe[..., None])[..., 0]
        bad = mask & ~inside
        if bool(bad.any()):
            b, t = (int(i) for i in bad.nonzero()[0])
            raise ValueError(
                f"gold tag {int(tags[b, t])} at (sequence {b}, position {t}) is not among the "
                f"allowed labels there ({allowed[b, t].nonzero()[:, 0].tolist()}); given both, the "
                "tags must lie in allowed"
            )

    def partial_nll(
        self,
        emissions: Tensor,
        tags: Tensor | None,
        mask: Tensor | None,
        allowed: Tensor,
        pot: ChainPotentials | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``log Z - log Z_allowed`` per sequence, ``(B,)``, and the ``(B, T)`` mask used.

        The negative log of the probability of every labelling inside the sets (the partial-label
        likelihood of Tsuboi et al. 2008); with one label per position it is the usual NLL. Both
        partition functions come from one engine call over the stacked ``(2B, T, K)`` chains, so the
        gradient is ``marginals - marginals_allowed``. ``pot``: the head's potentials already built
        (default :meth:`potentials`).

        Raises:
            ValueError: as :meth:`sequence_losses`.
        """
        if pot is None:
            pot = self.potentials(emissions, mask)
        sub = restrict(pot, allowed)
        if tags is not None:
            tags = self._check_tags(emissions, tags, pot.mask)
            self._check_allowed_tags(tags, allowed, pot.mask)
            self.check_gold(pot, tags)
        B = pot.shape[0]
        stacked = ChainPotentials(
            emissions=torch.cat([pot.emissions, sub.emissions]),
            transitions=torch.cat([pot.transitions, pot.transitions])
            if pot.per_position
            else pot.transitions,
            start=pot.start,
            end=pot.end,
            mask=torch.cat([pot.mask, pot.mask]),
        )
        logz = engine.log_partition(stacked)  # (2B,)
        full, inside = logz[:B], logz[B:]
        self._refuse_dead(pot.nonempty & torch.isneginf(inside.detach()))
        return straight_clamp(full - inside, min=0.0), pot.mask

    def _alive(self, pot: ChainPotentials, score: Tensor, allowed: Tensor | None) -> None:
        """Refuse rows of a restricted chain whose best ``score`` ``(B,)`` is ``-inf`` (no path)."""
        if allowed is not None:
            self._refuse_dead(pot.nonempty & torch.isneginf(score.detach()))

    # ------------------------------------------------------------------ shared
    def loss(
        self,
        emissions: Tensor,
        tags: Tensor | None = None,
        mask: Tensor | None = None,
        reduction: str = "mean",
        *,
        allowed: Tensor | None = None,
    ) -> Tensor:
        """The training loss of the gold ``tags`` (:meth:`sequence_losses`), reduced.

        Args:
            emissions: ``(B, T, K)``.
            tags: ``(B, T)`` gold tags (ignored where masked, so ``-100`` padding is fine); may be
                ``None`` with ``allowed``.
            mask: ``(B, T)`` bool or ``None``.
            reduction: ``"none"`` → ``(B,)``; ``"sum"``; ``"mean"`` over sequences; ``"token_mean"``
                over unmasked tokens (:func:`reduce_loss`).
            allowed: ``(B, T, K)`` bool, the labels each position may take (a partial annotation:
                all True where the label is unknown); the loss is then that of every labelling
                inside the sets.

        Raises:
            ValueError: on bad shapes/dtypes, out-of-range tags, an unknown reduction, neither
                ``tags`` nor ``allowed``, tags outside ``allowed``, an ``allowed`` that leaves a
                sequence no valid path, or (constrained head) gold paths that break the scheme:
                repair them with :func:`crfhead.schemes.repair_tags`.
        """
        self._check_reduction(reduction)
        self._need_labels(tags, allowed)
        losses, used = self.sequence_losses(emissions, tags, mask, allowed)
        return reduce_loss(losses, used, reduction)

    @staticmethod
    def _need_labels(tags: Tensor | None, allowed: Tensor | None) -> None:
        if tags is None and allowed is None:
            raise ValueError("a loss needs the gold tags (B, T), or allowed (B, T, K), or both")

    def forward(
        self,
        emissions: Tensor,
        tags: Tensor | None = None,
        mask: Tensor | None = None,
        reduction: str = "mean",
        *,
        allowed: Tensor | None = None,
    ) -> Tensor:
        """Same as :meth:`loss` (a head is a loss in ``forward``)."""
        return self.loss(emissions, tags, mask, reduction, allowed=allowed)

    def log_partition(
        self, emissions: Tensor, mask: Tensor | None = None, *, allowed: Tensor | None = None
    ) -> Tensor:
        """``log Z(x)`` per sequence, ``(B,)``; 0 for a fully masked row; ``log Z_allowed`` with ``allowed``."""
        return engine.log_partition(self.chain(emissions, mask, allowed))

    def score(self, emissions: Tensor, tags: Tensor, mask: Tensor | None = None) -> Tensor:
        """Score of the given tag paths, ``(B,)``; ``-inf`` for a path that breaks the constraints."""
        pot = self.potentials(emissions, mask)
        return engine.score(pot, self._check_tags(emissions, tags, pot.mask))

    def nll(
        self,
        emissions: Tensor,
        tags: Tensor | None = None,
        mask: Tensor | None = None,
        reduction: str = "mean",
        *,
        allowed: Tensor | None = None,
    ) -> Tensor:
        """Conditional negative log-likelihood ``log Z - score(tags)`` under this head's chain, reduced.

        This is the log-loss the metrics report for every head (for the CRF it is also the training
        loss). Arguments and reductions as in :meth:`loss`. With ``allowed`` ``(B, T, K)`` it is
        ``log Z - log Z_allowed``, the negative log-probability of the partial annotation
        (:meth:`partial_nll`).
        """
        self._check_reduction(reduction)
        self._need_labels(tags, allowed)
        if allowed is not None:
            losses, used = self.partial_nll(emissions, tags, mask, allowed)
        else:
            assert tags is not None
            losses, used = self.sequence_nll(emissions, tags, mask)
        return reduce_loss(losses, used, reduction)

    def sequence_nll(
        self, emissions: Tensor, tags: Tensor, mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """``log Z - score(tags)`` of each sequence, ``(B,)``, and the ``(B, T)`` mask used.

        Never below 0 (``score(tags) <= log Z`` exactly; the rounding of the two is clamped, straight
        through).
        """
        pot = self.potentials(emissions, mask)
        gold = engine.score(pot, self._check_tags(emissions, tags, pot.mask))
        return straight_clamp(engine.log_partition(pot) - gold, min=0.0), pot.mask

    def marginals(
        self, emissions: Tensor, mask: Tensor | None = None, *, allowed: Tensor | None = None
    ) -> Tensor:
        """Node marginals ``p(z_t = k | x)``, ``(B, T, K)``; 0 where masked (and outside ``allowed``).

        With ``allowed`` ``(B, T, K)``: the marginals conditioned on the sets.

        Raises:
            ValueError: ``allowed`` leaves a sequence no valid path.
        """
        pot = self.chain(emissions, mask, allowed)
        gamma = engine.marginals(pot)
        if allowed is not None:  # a dead row's marginals are all 0
            self._refuse_dead(pot.nonempty & ~(gamma.detach().sum(-1) > 0).any(1))
        return gamma

    def edge_marginals(
        self, emissions: Tensor, mask: Tensor | None = None, *, allowed: Tensor | None = None
    ) -> Tensor:
        """Edge marginals ``(B, T-1, K, K)``; entry ``t-1`` is the edge entering position ``t``."""
        pot = self.chain(emissions, mask, allowed)
        if allowed is not None:
            self._alive(pot, engine.log_partition(pot), allowed)
        return engine.edge_marginals(pot)

    def max_marginals(
        self, emissions: Tensor, mask: Tensor | None = None, *, allowed: Tensor | None = None
    ) -> Tensor:
        """Max-marginals ``max_{z: z_t = k} p(z | x)``, ``(B, T, K)``; 0 where masked."""
        pot = self.chain(emissions, mask, allowed)
        if allowed is not None:
            self._alive(pot, engine.log_partition(pot), allowed)
        return engine.max_marginals(pot)

    def entropy(
        self, emissions: Tensor, mask: Tensor | None = None, *, allowed: Tensor | None = None
    ) -> Tensor:
        """Entropy of ``p(z | x)`` in nats, ``(B,)`` (of ``p(z | x, z in allowed)`` with ``allowed``)."""
        pot = self.chain(emissions, mask, allowed)
        if allowed is not None:
            self._alive(pot, engine.log_partition(pot), allowed)
        return engine.entropy(pot)

    def viterbi(
        self, emissions: Tensor, mask: Tensor | None = None, *, allowed: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Best path and its score: ``(scores (B,), paths (B, T))``, ``-1`` where masked.

        With ``allowed``: the best path inside the sets.

        Raises:
            ValueError: ``allowed`` leaves a sequence no valid path.
        """
        pot = self.chain(emissions, mask, allowed)
        best, paths = engine.viterbi(pot)
        self._alive(pot, best, allowed)
        return best, paths

    def decode(
        self, emissions: Tensor, mask: Tensor | None = None, *, allowed: Tensor | None = None
    ) -> Tensor:
        """Viterbi paths, ``(B, T)`` int64, ``-1`` where masked (the best inside ``allowed`` when given)."""
        if not torch.is_grad_enabled():  # already off: no context to enter
            return self.viterbi(emissions, mask, allowed=allowed)[1]
        with torch.no_grad():  # paths carry no gradient: skip the differentiable path score
            return self.viterbi(emissions, mask, allowed=allowed)[1]

    def topk(
        self,
        emissions: Tensor,
        k: int,
        mask: Tensor | None = None,
        *,
        allowed: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """The ``k`` best paths: scores ``(B, k)`` and paths ``(B, k, T)``; missing: ``-inf`` and ``-1``.

        With ``allowed``: the ``k`` best inside the sets (fewer than ``k`` exist: the rest missing).
        """
        pot = self.chain(emissions, mask, allowed)
        scores, paths = engine.topk(pot, k)
        self._alive(pot, scores[:, 0], allowed)
        return scores, paths

    def posterior_decode(
        self,
        emissions: Tensor,
        mask: Tensor | None = None,
        *,
        valid_only: bool = False,
        allowed: Tensor | None = None,
    ) -> Tensor:
        """Posterior-marginal (minimum-Bayes-risk) tags, ``(B, T)``, ``-1`` where masked.

        With ``valid_only=True`` the best path under the scheme's constraints by expected correct tags.
        With ``allowed``: from the marginals conditioned on the sets (the tags stay inside them).
        """
        pot = self.chain(emissions, mask, allowed)
        if allowed is not None:
            self._alive(pot, engine.log_partition(pot), allowed)
        return engine.posterior_decode(pot, valid_only=valid_only)

    def sample(
        self,
        emissions: Tensor,
        num_samples: int,
        mask: Tensor | None = None,
        generator: torch.Generator | None = None,
        *,
        allowed: Tensor | None = None,
    ) -> Tensor:
        """Exact samples of ``p(z | x)``, ``(S, B, T)``, ``-1`` where masked (of ``p(z | x, allowed)``)."""
        pot = self.chain(emissions, mask, allowed)
        if allowed is not None:
            self._alive(pot, engine.log_partition(pot), allowed)
        return engine.sample(pot, num_samples, generator)

    def predict(
        self, emissions: Tensor, mask: Tensor | None = None, *, allowed: Tensor | None = None
    ) -> Tensor:
        """Tag ids by the head's ``decoder``, ``(B, T)`` int64, ``-1`` where masked."""
        pot = self.chain(emissions, mask, allowed)
        out = self.predict_from(pot)
        self._check_predicted(pot, out, allowed)
        return out

    def _check_predicted(self, pot: ChainPotentials, out: Tensor, allowed: Tensor | None) -> None:
        """Refuse rows of a restricted chain with no path, from the decoded ``out`` ``(B, T)``."""
        if allowed is None:
            return
        if self.decoder == "viterbi":  # a dead row decodes to all -1
            self._refuse_dead(pot.nonempty & ((out < 0) & pot.mask).any(1))
        else:  # posterior decoders argmax all-0 marginals: ask log Z
            self._alive(pot, engine.log_partition(pot), allowed)

    def predict_from(self, pot: ChainPotentials) -> Tensor:
        """:meth:`predict` on potentials already built (by :meth:`potentials`): ``(B, T)``, ``-1`` where masked."""
        if self.decoder == "viterbi":
            with torch.no_grad():  # paths carry no gradient: skip the differentiable path score
                return engine.viterbi(pot)[1]
        return engine.posterior_decode(pot, valid_only=self.decoder == "posterior_valid")

    def decode_labels(
        self, emissions: Tensor, mask: Tensor | None = None, *, allowed: Tensor | None = None
    ) -> list[list[str]]:
        """Decoded paths (by ``decoder``) as label strings, masked positions dropped; needs ``labels``."""
        if self.labels is None:
            raise ValueError(
                f"decode_labels needs the {type(self).__name__} to be built with labels=[...]"
            )
        pot = self.chain(emissions, mask, allowed)
        out = self.predict_from(pot)
        self._check_predicted(pot, out, allowed)
        return path_labels(out, pot.mask, self.labels)


class CountingHead(ChainHead):
    """A head fitted by counting (the HMM): no gradient steps, one pass over the training data per epoch.

    The training loop calls :meth:`reset_counts` at an epoch's start and :meth:`accumulate` on every
    training batch, sums :meth:`count_buffers` over the data-parallel ranks, then, when the head has
    a smoothing grid to choose from (:attr:`tunes`), sums :meth:`held_out_losses` over the validation
    batches and calls :meth:`choose` (:class:`~crfhead.heads.fit.CountingFit`).
    """

    fitting: ClassVar[type[Fit]] = CountingFit

    def reset_counts(self) -> None:
        """Forget every count."""
        raise NotImplementedError

    def accumulate(self, words: Tensor, tags: Tensor, mask: Tensor | None = None) -> None:
        """Add the counts of a batch: ``words``, ``tags`` ``(B, T)``, ``mask`` ``(B, T)`` bool."""
        raise NotImplementedError

    def count_buffers(self) -> list[Tensor]:
        """The buffers that hold counts (summed across data-parallel ranks)."""
        raise NotImplementedError

    @property
    def tunes(self) -> bool:
        """Whether :meth:`choose` has more than one candidate to choose from."""
        return False

    def held_out_losses(self, words: Tensor, tags: Tensor, mask: Tensor | None = None) -> Tensor:
        """A held-out batch's summed loss for each candidate, ``(C,)``."""
        raise NotImplementedError

    def choose(self, losses: Tensor) -> float:
        """Set the candidate of the smallest summed held-out ``losses`` ``(C,)``; return its value."""
        raise NotImplementedError
