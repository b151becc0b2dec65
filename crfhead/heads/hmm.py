"""The HMM tagger, fitted by counting (Definition 2 and Proposition 1 of *Sequence Labeling: From HMMs to Linear-Chain CRFs*).

``p(x, z) = ν[z_1] · prod_t a[z_{t-1}, z_t] · prod_t b[z_t](x_t) · a[z_T, stop]``. Maximum likelihood is
normalised counts; adding ``α`` to every count is the posterior mean under symmetric Dirichlet(α)
priors. With the end state and ``α > 0`` every stop probability is positive and the model is a
distribution over sentences of every length (``ν (I - A)^{-1} e = 1``, :meth:`HMM.length_law`).

As a chain (Theorem 1's potentials): ``U_t(k) = log b_k(x_t)`` (:meth:`HMM.emit`), ``P(j, k) = log
a_jk``, start ``log ν``, end ``log a_{k,stop}``; so ``log Z = log p(x)`` and Viterbi, posterior decoding
and marginals are the shared engine's. The HMM scores words itself: the training code asks it for
emissions from the batch's word ids (:meth:`HMM.emissions_from_batch`) instead of an encoder, and
fits it by counting (:meth:`HMM.accumulate`, no gradient steps), then tunes ``α`` on validation data
by conditional log-loss (:meth:`HMM.tune_alpha`).

Words seen once in training map to the unknown-word symbol (``unknown_singletons``), so unseen test
words get the emission probability of rare words. With a constrained scheme, forbidden starts,
transitions and ends get no smoothing mass (probability 0), so the fitted HMM is still a proper
distribution that never generates an invalid sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from crfhead import engine
from crfhead.checks import check_word_ids, require_int
from crfhead.engine.potentials import ChainPotentials, constrain, make_potentials
from crfhead.heads.base import CountingHead
from crfhead.numerics import compute_dtype, straight_clamp

__all__ = ["HMM", "HMMParameters"]


@dataclass(frozen=True)
class HMMParameters:
    """Log-parameters of an HMM tagger (float64; ``IMPOSSIBLE`` where a probability is 0).

    Attributes:
        log_start: ``(K,)`` ``log ν``.
        log_transitions: ``(K, K)`` ``log a[from, to]``.
        log_end: ``(K,)`` ``log a[k, stop]`` (zeros for an HMM without an end state).
        log_emissions: ``(K, V)`` ``log b_k(w)``.
    """

    log_start: Tensor
    log_transitions: Tensor
    log_end: Tensor
    log_emissions: Tensor


def _log_normalise(counts: Tensor, extra: Tensor | None = None) -> Tensor:
    """``log(counts / row_total)`` over the last dim, where ``extra`` ``(..., )`` adds to each total."""
    total = counts.sum(-1)
    if extra is not None:
        total = total + extra
    return counts.log() - total.clamp(min=1e-300).log()[..., None]


class HMM(CountingHead):
    """A first-order HMM tagger over ``num_tags`` tags and ``vocab_size`` word ids.

    Args:
        num_tags: ``K``.
        vocab_size: ``V``, the number of word ids (id ``padding_index`` and ``unknown_index`` included).
        labels: optional tag names; required with ``scheme``.
        scheme: optional tagging scheme: forbidden events get probability 0.
        decoder: ``"viterbi"`` (default), ``"posterior"`` or ``"posterior_valid"``.
        alpha: the add-α smoothing used until :meth:`tune_alpha` picks one.
        alphas: the grid :meth:`tune_alpha` searches (the seed's ``{1, 0.1, 0.01}`` by default).
        end_state: model sentence ends with stop probabilities (Definition 2); ``False`` for data of
            one fixed length.
        unknown_singletons: pool the counts of words seen once in training into ``unknown_index``,
            and read every word not seen twice as that symbol.
        unknown_index: the unknown-word id (``crfhead.data.Vocab`` uses 1).
        padding_index: a word id that is never a word (``crfhead.data.Vocab`` uses 0), or ``None``.

    Attributes (buffers, saved in checkpoints): ``start_counts`` ``(K,)``, ``transition_counts``
    ``(K, K)``, ``end_counts`` ``(K,)``, ``emission_counts`` ``(K, V)``, ``word_counts`` ``(V,)`` (all
    float64) and ``alpha`` (scalar).
    """

    scores_words = True
    needs = frozenset({"words"})
    start_counts: Tensor
    transition_counts: Tensor
    end_counts: Tensor
    emission_counts: Tensor
    word_counts: Tensor
    alpha: Tensor

    def __init__(
        self,
        num_tags: int,
        vocab_size: int,
        *,
        labels: Sequence[str] | None = None,
        scheme: str | None = None,
        decoder: str = "viterbi",
        alpha: float = 1.0,
        alphas: Sequence[float] = (1.0, 0.1, 0.01),
        end_state: bool = True,
        unknown_singletons: bool = True,
        unknown_index: int = 1,
        padding_index: int | None = 0,
    ) -> None:
        super().__init__(num_tags, labels=labels, scheme=scheme, decoder=decoder)
        vocab_size = require_int("vocab_size", vocab_size, at_least=1)
        if not alpha > 0 or not alphas or not all(a > 0 for a in alphas):
            raise ValueError(f"alpha and every alphas must be > 0, got {alpha!r} and {alphas!r}")
        if unknown_singletons and not 0 <= unknown_index < vocab_size:
            raise ValueError(f"unknown_index {unknown_index} out of range [0, {vocab_size})")
        self.vocab_size = vocab_size
        self.alphas = tuple(float(a) for a in alphas)
        self.end_state = end_state
        self.unknown_singletons = unknown_singletons
        self.unknown_index = unknown_index
        self.padding_index = padding_index
        K, V, f64 = num_tags, vocab_size, torch.float64
        self.register_buffer("start_counts", torch.zeros(K, dtype=f64))
        self.register_buffer("transition_counts", torch.zeros(K, K, dtype=f64))
        self.register_buffer("end_counts", torch.zeros(K, dtype=f64))
        self.register_buffer("emission_counts", torch.zeros(K, V, dtype=f64))
        self.register_buffer("word_counts", torch.zeros(V, dtype=f64))
        self.register_buffer("alpha", torch.tensor(float(alpha), dtype=f64))

    def extra_repr(self) -> str:  # noqa: D102
        return (
            f"{super().extra_repr()}, vocab_size={self.vocab_size}, alpha={float(self.alpha):g}, "
            f"end_state={self.end_state}"
        )

    # ------------------------------------------------------------------ counting (Proposition 1)
    def count_buffers(self) -> list[Tensor]:
        """The count buffers: start, transition, end, emission and word counts."""
        return [
            self.start_counts,
            self.transition_counts,
            self.end_counts,
            self.emission_counts,
            self.word_counts,
        ]

    def reset_counts(self) -> None:
        """Forget every count."""
        for buf in self.count_buffers():
            buf.zero_()

    def _check_words(self, words: Tensor, mask: Tensor | None) -> Tensor:
        return check_word_ids(words, self.vocab_size, mask)

    @torch.no_grad()
    def accumulate(self, words: Tensor, tags: Tensor, mask: Tensor | None = None) -> None:
        """Add the counts of a batch of tagged sentences.

        Args:
            words: ``(B, T)`` word ids.
            tags: ``(B, T)`` gold tag ids.
            mask: ``(B, T)`` bool (holes allowed: consecutive unmasked positions are linked).
        """
        mask = self._check_words(words, mask)
        shape_only = torch.empty(*words.shape, self.num_tags, device="meta")
        tags = self._check_tags(shape_only, tags.to(mask.device), mask)
        dev = self.emission_counts.device
        words, tags, mask = words.to(dev), tags.to(dev), mask.to(dev)
        K, V = self.num_tags, self.vocab_size
        one = torch.ones((), dtype=torch.float64, device=dev)
        m = mask.long()
        first = mask & ((m.cumsum(1) - m) == 0)
        last = mask & ((m.flip(1).cumsum(1) - m.flip(1)).flip(1) == 0)
        self.start_counts.index_put_((tags[first],), one, accumulate=True)
        self.end_counts.index_put_((tags[last],), one, accumulate=True)
        self.emission_counts.view(-1).index_put_(
            (tags[mask] * V + words[mask],), one, accumulate=True
        )
        self.word_counts.index_put_((words[mask],), one, accumulate=True)
        # Edges between consecutive unmasked positions (holes allowed): sort each row's positions.
        order = torch.sort((~mask).long(), dim=1, stable=True).indices  # unmasked positions first
        packed = tags.gather(1, order)  # (B, T)
        n = m.sum(1)
        t = torch.arange(words.shape[1], device=dev)
        edge = (t[None, 1:] < n[:, None]) if words.shape[1] > 1 else mask[:, :0]
        prev, nxt = packed[:, :-1][edge], packed[:, 1:][edge]
        self.transition_counts.view(-1).index_put_((prev * K + nxt,), one, accumulate=True)

    def fit(
        self, words: Tensor, tags: Tensor, mask: Tensor | None = None, alpha: float | None = None
    ) -> HMM:
        """Reset, count one corpus ``(B, T)`` and (optionally) set ``alpha``; returns ``self``."""
        self.reset_counts()
        self.accumulate(words, tags, mask)
        if alpha is not None:
            self.alpha.fill_(alpha)
        return self

    # ------------------------------------------------------------------ parameters
    def symbols(self) -> Tensor:
        """``(V,)`` int64: the emission symbol of each word id (itself, or ``unknown_index``)."""
        ids = torch.arange(self.vocab_size, device=self.word_counts.device)
        if not self.unknown_singletons:
            return ids
        known = self.word_counts >= 2
        known[self.unknown_index] = True
        return torch.where(known, ids, torch.full_like(ids, self.unknown_index))

    def log_parameters(self, alpha: float | None = None) -> HMMParameters:
        """Add-α estimates from the counts, in log space (float64).

        Args:
            alpha: smoothing (default: the ``alpha`` buffer).
        """
        a = float(self.alpha) if alpha is None else float(alpha)
        start_ok = self.allowed_start.to(torch.float64)
        trans_ok = self.allowed_transitions.to(torch.float64)
        end_ok = self.allowed_end.to(torch.float64)
        log_start = _log_normalise(self.start_counts + a * start_ok)
        if self.end_state:
            stop = self.end_counts + a * end_ok  # (K,)
            log_trans = _log_normalise(self.transition_counts + a * trans_ok, stop)
            log_end = stop.log() - (self.transition_counts + a * trans_ok).sum(-1).add(stop).log()
        else:
            log_trans = _log_normalise(self.transition_counts + a * trans_ok)
            log_end = torch.zeros_like(self.end_counts)
        symbols = self.symbols()
        pooled = torch.zeros_like(self.emission_counts).index_add_(
            1, symbols, self.emission_counts
        )  # (K, V): unknown words' counts moved to the unknown symbol
        is_symbol = torch.zeros(self.vocab_size, dtype=torch.bool, device=symbols.device)
        is_symbol[symbols] = True
        if self.padding_index is not None:
            is_symbol[self.padding_index] = False
        log_emit = _log_normalise(pooled + a * is_symbol.to(torch.float64))
        return HMMParameters(
            log_start=constrain(log_start, self.allowed_start),
            log_transitions=constrain(log_trans, self.allowed_transitions),
            log_end=constrain(log_end, self.allowed_end) if self.end_state else log_end,
            log_emissions=constrain(log_emit, is_symbol),
        )

    def length_law(self, alpha: float | None = None) -> Tensor:
        """``ν (I - A)^{-1} e``: the total probability of sentences of every length (1 with an end state)."""
        p = self.log_parameters(alpha)
        A = p.log_transitions.exp()
        e = p.log_end.exp()
        eye = torch.eye(self.num_tags, dtype=A.dtype, device=A.device)
        total: Tensor = p.log_start.exp() @ torch.linalg.solve(eye - A, e)
        return total

    # ------------------------------------------------------------------ as a chain
    def emit(self, words: Tensor, alpha: float | None = None) -> Tensor:
        """Emission log-probabilities ``log b_k(x_t)``, ``(B, T, K)`` float64, from word ids ``(B, T)``."""
        words = words.to(self.word_counts.device)
        check_word_ids(words, self.vocab_size)
        log_b = self.log_parameters(alpha).log_emissions  # (K, V)
        return log_b.T[self.symbols()[words]]  # (B, T, K)

    def emissions_from_batch(self, batch: Any) -> Tensor:
        """Emissions ``(B, T, K)`` of a batch (a :class:`~crfhead.data.batching.Batch`: reads ``batch.words``)."""
        if batch.words is None:
            raise ValueError("the HMM needs word ids: the batch has no 'words' field")
        return self.emit(batch.words)

    def _potentials(
        self, emissions: Tensor, mask: Tensor | None, alpha: float | None
    ) -> ChainPotentials:
        self._check_emissions(emissions)
        p = self.log_parameters(alpha)
        dt = compute_dtype(emissions.dtype)
        return make_potentials(
            emissions, p.log_transitions.to(dt), p.log_start.to(dt), p.log_end.to(dt), mask
        )

    def potentials(self, emissions: Tensor, mask: Tensor | None = None) -> ChainPotentials:
        """The HMM's chain: ``emissions`` from :meth:`emit`, ``log a``, ``log ν``, ``log a_stop``.

        ``log Z`` of this chain is ``log p(x)``, and its ``p(z)`` is the posterior ``p(z | x)``.
        """
        return self._potentials(emissions, mask, None)

    def sequence_losses(
        self,
        emissions: Tensor,
        tags: Tensor | None,
        mask: Tensor | None,
        allowed: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """The joint log-loss ``-log p(x, z)`` that counting minimises (reported, never stepped on).

        Raises:
            ValueError: ``allowed`` given: counting needs one tag per position (partial labels would
                need EM); ``nll(..., allowed=...)`` and constrained decoding work.
        """
        if allowed is not None or tags is None:
            raise ValueError(
                "the HMM is fitted by counting, which needs one gold tag per position: it cannot "
                "train from partial labels (allowed=); use the CRF, MEMM or perceptron head, or "
                "give every position a tag"
            )
        pot = self.potentials(emissions, mask)
        return -self.gold_score(pot, emissions, tags), pot.mask

    @property
    def tunes(self) -> bool:
        """Whether the α grid has more than one value."""
        return len(self.alphas) > 1

    @torch.no_grad()
    def held_out_losses(self, words: Tensor, tags: Tensor, mask: Tensor | None = None) -> Tensor:
        """Summed conditional log-loss ``-log p(z | x)`` of a batch for each α of the grid, ``(len(alphas),)``."""
        mask = self._check_words(words, mask)
        out = []
        for a in self.alphas:
            em = self.emit(words, a)
            pot = self._potentials(em, mask.to(em.device), a)
            gold = self.gold_score(pot, em, tags.to(em.device))
            out.append(straight_clamp(engine.log_partition(pot) - gold, min=0.0).sum())
        return torch.stack(out)

    def tune_alpha(self, words: Tensor, tags: Tensor, mask: Tensor | None = None) -> float:
        """Set ``alpha`` to the grid value with the smallest conditional log-loss on held-out data."""
        return self.choose(self.held_out_losses(words, tags, mask))

    def choose(self, losses: Tensor) -> float:
        """Set ``alpha`` to the grid value of the smallest of ``losses`` ``(len(alphas),)``; return it."""
        best = self.alphas[int(torch.argmin(losses))]
        self.alpha.fill_(best)
        return best
