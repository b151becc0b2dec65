"""Simulated worlds with an exact Bayes tagger: an 8-state HMM in two regimes, and its next-state twin.

From *Sequence Labeling: From HMMs to Linear-Chain CRFs* ("A generative–discriminative pair", "Decoding risk",
"Local normalization and label bias"): eight states in two regimes of four, sequences of 24 tokens,
emissions blended with uniform noise.

* In the **well-specified** world the data come from the HMM: ``x_t ~ b_{z_t}``.
* In the **next-state** world each word ``x_t`` with ``t < T`` is drawn, with probability
  ``next_state_prob`` (0.5), from the emission row of the *next* state ``z_{t+1}`` (otherwise from
  ``z_t``'s); the last word from ``z_T``'s. An HMM is then misspecified, but the exact conditional
  ``p(z | x)`` is still a chain: each word's emission is folded into the edge it straddles.

Both worlds have fixed length (no end state). :meth:`World.bayes_potentials` gives the Bayes tagger
exactly as :class:`~crfhead.engine.potentials.ChainPotentials` (float64), so :mod:`crfhead.engine`
computes its marginals, posterior decoding and Viterbi path.
:meth:`World.lagged_marginals` is Corollary 2's lagged Bayes rule ``p(z_t | x_{1:t+w})``, computed
exactly on prefix chains. The "Decoding risk" trellis drawn from these worlds is in
:mod:`crfhead.theory.payload`.

Indices are 0-based in code: positions ``0..T-1``; ``transitions[j, k] = p(z_{t+1} = k | z_t = j)``
(**from, to**); ``emissions[k, v] = b_k(v)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from crfhead.engine import log_partition, marginals, posterior_decode, score, viterbi
from crfhead.engine.potentials import ChainPotentials, make_potentials

__all__ = [
    "World",
    "conditional_log_loss",
    "next_state_world",
    "token_accuracy",
    "well_specified_world",
]

NUM_STATES: int = 8
"""Eight states in two regimes of four (states ``0..3`` and ``4..7``)."""

VOCAB_SIZE: int = 24
"""Words ``0..11`` hold regime 0's emission peaks, ``12..23`` regime 1's."""

LENGTH: int = 24
"""Tokens per sequence."""

PEAKS_PER_STATE: int = 3
"""Each state's emission row is peaked on this many (seeded random) words of its regime's twelve."""

STAY: float = 0.1
"""Extra self-transition mass within a regime (before the random within-regime weights)."""

CROSS: float = 0.05
"""Probability of jumping to the other regime at each step (spread uniformly over its states)."""

NOISE: float = 0.1
"""Default weight of the uniform distribution blended into every emission row."""

NEXT_STATE_PROB: float = 0.5
"""In the next-state world, the probability that a word comes from the next state's emission row."""


@dataclass(frozen=True)
class World:
    """A fixed-length HMM-like generator whose exact conditional ``p(z | x)`` is a chain.

    Attributes:
        name: ``"well_specified"`` or ``"next_state"`` (free text for hand-built worlds).
        start: ``(K,)`` float64 initial distribution ``nu``.
        transitions: ``(K, K)`` float64, row-stochastic, ``[from, to]``.
        emissions: ``(K, V)`` float64, row-stochastic: ``emissions[k, v] = b_k(v)``.
        next_state_prob: probability that word ``t < T-1`` is drawn from ``z_{t+1}``'s row (0 for
            the well-specified world).
        length: ``T``, the number of tokens of every sequence.
    """

    name: str
    start: Tensor
    transitions: Tensor
    emissions: Tensor
    next_state_prob: float
    length: int = LENGTH

    def __post_init__(self) -> None:
        K = self.start.shape[0] if self.start.dim() == 1 else -1
        if self.start.dim() != 1 or tuple(self.transitions.shape) != (K, K):
            raise ValueError(
                f"start must be (K,) and transitions (K, K), got shapes {tuple(self.start.shape)} "
                f"and {tuple(self.transitions.shape)}"
            )
        if self.emissions.dim() != 2 or self.emissions.shape[0] != K:
            raise ValueError(
                f"emissions must be (K, V) with K = {K}, got shape {tuple(self.emissions.shape)}"
            )
        if not 0.0 <= self.next_state_prob <= 1.0:
            raise ValueError(f"next_state_prob must be in [0, 1], got {self.next_state_prob}")
        if self.length < 1:
            raise ValueError(f"length must be >= 1, got {self.length}")

    @property
    def num_states(self) -> int:
        """``K``."""
        return int(self.start.shape[0])

    @property
    def vocab_size(self) -> int:
        """``V``."""
        return int(self.emissions.shape[1])

    def _check_words(self, words: Tensor) -> None:
        if words.dim() != 2 or words.shape[1] != self.length:
            raise ValueError(
                f"words must be (n, T) with T = {self.length}, got shape {tuple(words.shape)}"
            )
        if words.dtype != torch.int64:
            raise ValueError(f"words must be int64, got {words.dtype}")

    def sample(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """Draw ``n`` sequences.

        Returns:
            ``(words, states)``: both ``(n, T)`` int64, words in ``[0, V)``, states in ``[0, K)``.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        T = self.length
        states = torch.empty(n, T, dtype=torch.int64)
        first = self.start.expand(n, -1)
        states[:, 0] = torch.multinomial(first, 1, generator=generator)[:, 0]
        for t in range(1, T):
            rows = self.transitions[states[:, t - 1]]  # (n, K)
            states[:, t] = torch.multinomial(rows, 1, generator=generator)[:, 0]
        source = states.clone()  # the state whose emission row each word is drawn from
        if T > 1:
            use_next = torch.rand(n, T - 1, generator=generator, dtype=torch.float64)
            nxt = use_next < self.next_state_prob
            source[:, :-1] = torch.where(nxt, states[:, 1:], states[:, :-1])
        rows = self.emissions[source.reshape(-1)]  # (n * T, V)
        words = torch.multinomial(rows, 1, generator=generator).reshape(n, T)
        return words, states

    def _word_probs(self, words: Tensor) -> Tensor:
        """``(n, T, K)``: ``b_k(x_t)``."""
        return self.emissions.T[words]

    def joint_log_prob(self, words: Tensor, states: Tensor) -> Tensor:
        """``log p(x, z)`` by the direct formula, ``(n,)`` float64.

        Args:
            words: ``(n, T)`` int64.
            states: ``(n, T)`` int64.
        """
        self._check_words(words)
        if states.shape != words.shape:
            raise ValueError(
                f"states must have the shape of words {tuple(words.shape)}, got {tuple(states.shape)}"
            )
        p = self.next_state_prob
        b = self.emissions
        own = b[states, words]  # (n, T): b_{z_t}(x_t)
        # (n, T): b_{z_{t+1}}(x_t) for t < T-1; the last word comes from its own state.
        nxt = torch.cat([b[states[:, 1:], words[:, :-1]], own[:, -1:]], dim=1)
        emit = ((1.0 - p) * own + p * nxt).log().sum(1)
        first = self.start[states[:, 0]].log()
        moves = self.transitions[states[:, :-1], states[:, 1:]].log().sum(1)
        return first + moves + emit

    def _chain(self, words: Tensor, observed_last: bool) -> ChainPotentials:
        """Potentials over positions ``0..L-1`` of ``words`` ``(n, L)`` (see :meth:`bayes_potentials`).

        With ``observed_last=False`` (next-state world only) the last position gets no unary: the
        word it would emit is unobserved, and every word before it is folded into its edge.
        """
        log_b = self._word_probs(words).log()  # (n, L, K)
        log_a = self.transitions.log()
        log_nu = self.start.log()
        p = self.next_state_prob
        if p == 0.0:
            return make_potentials(log_b, log_a, log_nu)
        bw = self._word_probs(words[:, :-1])  # (n, L-1, K): b_j(x_{t-1}) for the edge entering t
        mix = (1.0 - p) * bw[..., :, None] + p * bw[..., None, :]  # (n, L-1, K_from, K_to)
        edges = log_a + mix.log()
        unary = torch.zeros_like(log_b)
        if observed_last:
            unary[:, -1] = log_b[:, -1]
        return make_potentials(unary, edges, log_nu)

    def bayes_potentials(self, words: Tensor) -> ChainPotentials:
        """The exact conditional ``p(z | x)`` as a float64 chain.

        Well-specified: unary ``log b_k(x_t)``, transitions ``log a``, start ``log nu``. Next-state:
        per-edge transitions ``(n, T-1, K, K)`` whose entry ``t-1`` (the edge entering ``t``) is
        ``log a_jk + log((1-p) b_j(x_{t-1}) + p b_k(x_{t-1}))``, unary 0 except ``log b_k(x_{T-1})``
        at the last position, start ``log nu``. Then ``log_partition(pot) = log p(x)``.

        Args:
            words: ``(n, T)`` int64.
        """
        self._check_words(words)
        return self._chain(words, observed_last=True)

    def lagged_marginals(self, words: Tensor, lookahead: int) -> Tensor:
        """Corollary 2's lagged posteriors ``p(z_t = k | x_{0..t+w})``, ``(n, T, K)`` float64.

        Exact, on prefix chains: for each prefix of ``m = min(t+w+1, T)`` observed words, one chain
        for all ``n`` sequences (a loop over the distinct prefixes, none over ``n``). Well-specified:
        the chain over positions ``0..m-1``. Next-state with ``m < T``: the chain over ``0..m`` whose
        edges carry words ``0..m-1`` and whose last position has no unary (its word is unobserved).

        Args:
            words: ``(n, T)`` int64.
            lookahead: ``w >= 0``.
        """
        self._check_words(words)
        if lookahead < 0:
            raise ValueError(f"lookahead must be >= 0, got {lookahead}")
        n, T = words.shape
        out = torch.zeros(n, T, self.num_states, dtype=torch.float64)
        full = marginals(self.bayes_potentials(words))
        first_full = max(T - 1 - lookahead, 0)  # every t >= this sees the whole sentence
        out[:, first_full:] = full[:, first_full:]
        for t in range(first_full):
            m = t + lookahead + 1  # observed words 0..m-1, m < T
            if self.next_state_prob == 0.0:
                pot = self._chain(words[:, :m], observed_last=True)
            else:
                pot = self._chain(words[:, : m + 1], observed_last=False)
            out[:, t] = marginals(pot)[:, t]
        return out

    def bayes_decode(self, words: Tensor, method: str = "posterior") -> Tensor:
        """The Bayes tagger's tags, ``(n, T)`` int64: ``"posterior"`` (marginal argmax) or ``"viterbi"``."""
        pot = self.bayes_potentials(words)
        if method == "posterior":
            return posterior_decode(pot)
        if method == "viterbi":
            return viterbi(pot)[1]
        raise ValueError(f"method must be 'posterior' or 'viterbi', got {method!r}")

    def lagged_decode(self, words: Tensor, lookahead: int) -> Tensor:
        """Corollary 2's lagged Bayes rule ``argmax_k p(z_t = k | x_{0..t+w})``, ``(n, T)`` int64."""
        return self.lagged_marginals(words, lookahead).argmax(dim=-1)


def _regime_hmm(noise: float, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """``(start (K,), transitions (K, K), emissions (K, V))`` of the two-regime HMM, float64."""
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise must be in [0, 1], got {noise}")
    K, V, half = NUM_STATES, VOCAB_SIZE, NUM_STATES // 2
    g = torch.Generator().manual_seed(seed)
    regime = torch.arange(K) // half  # (K,)
    same = regime[:, None] == regime[None, :]  # (K, K)
    start = 1.0 + torch.rand(K, generator=g, dtype=torch.float64)
    start = start / start.sum()
    within = torch.rand(K, K, generator=g, dtype=torch.float64) + STAY * torch.eye(
        K, dtype=torch.float64
    )
    within = torch.where(same, within, torch.zeros_like(within))
    within = within / within.sum(1, keepdim=True)
    across = (~same).double() / half
    transitions = (1.0 - CROSS) * within + CROSS * across
    peaks = torch.zeros(K, V, dtype=torch.float64)
    words_per_regime = V // 2
    for k in range(K):
        chosen = torch.randperm(words_per_regime, generator=g)[:PEAKS_PER_STATE]
        weight = 0.5 + torch.rand(PEAKS_PER_STATE, generator=g, dtype=torch.float64)
        peaks[k, int(regime[k]) * words_per_regime + chosen] = weight / weight.sum()
    emissions = (1.0 - noise) * peaks + noise / V
    return start, transitions, emissions


def well_specified_world(noise: float = NOISE, seed: int = 0) -> World:
    """The two-regime HMM generating its own data (``next_state_prob = 0``).

    Args:
        noise: weight of the uniform distribution blended into every emission row.
        seed: seeds the (fixed) random weights of the start, transition and emission rows.
    """
    start, transitions, emissions = _regime_hmm(noise, seed)
    return World("well_specified", start, transitions, emissions, 0.0)


def next_state_world(
    noise: float = NOISE, seed: int = 0, next_state_prob: float = NEXT_STATE_PROB
) -> World:
    """The same HMM, with each word but the last drawn from the next state's row w.p. ``next_state_prob``."""
    start, transitions, emissions = _regime_hmm(noise, seed)
    return World("next_state", start, transitions, emissions, next_state_prob)


def token_accuracy(pred: Tensor, gold: Tensor) -> float:
    """Fraction of equal entries of ``pred`` and ``gold`` (both ``(n, T)``)."""
    if pred.shape != gold.shape:
        raise ValueError(f"pred and gold shapes differ: {tuple(pred.shape)} vs {tuple(gold.shape)}")
    return float((pred == gold).double().mean())


def conditional_log_loss(pot: ChainPotentials, tags: Tensor) -> float:
    """Conditional log-loss in nats per token: ``sum (log Z - score(tags)) / number of tokens``."""
    total = (log_partition(pot) - score(pot, tags)).sum()
    return float(total) / max(int(pot.mask.sum()), 1)
