"""Forward and backward messages at every position of long chains, by a blocked scan.

The same recursions as :mod:`~crfhead.engine.scan` (Theorem 1 there), kept at every position for
callers that combine them locally (the span probabilities of :mod:`crfhead.evaluation.spans`), on
chains in *word coordinates*: :func:`words` drops the masked positions of each row, so word ``i`` of
a row is its ``i``-th unmasked position and the chain links consecutive words. A step matrix
``M_i(j, k) = P_i(j, k) + U_i(k)`` enters word ``i`` (``P_i`` the transition entry of its position,
``U_i`` its emission); words past a row's length step by the log identity, so every row has the
batch's length and its backward recursion starts at ``end`` where it should.

:func:`messages` does not loop over words. The ``N`` words are cut into ``nb`` blocks of ``L``: one
loop of ``L`` steps multiplies each block's step matrices (all blocks at once, ``(B, nb, K, K)``
log-matrix products), loops of ``nb`` steps carry the messages across block boundaries, and loops
of ``L`` steps fill in each block from its boundary message (all blocks at once): about
``3L + 2nb`` Python steps (``5 sqrt(N)``) instead of ``2N``, for ``K`` times the arithmetic of the
plain scan (a 20,000-word chain: 700 steps instead of 40,000). The block products cost ``B K^3``
per word against the Python steps they save: they pay for long chains of a narrow batch with few
tags, and elsewhere one block (the plain scan) runs; a memory budget on them sets ``nb``.

Everything is in log space; ``-inf`` (forbidden) is excluded exactly by the log-sum-exp of
:mod:`crfhead.numerics`, and every message is shifted so that its largest entry is 0 (a row with no
valid path keeps ``-inf``, never NaN). Messages are therefore known up to a shift per position,
which every ratio of sums at one position cancels.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from crfhead.engine.potentials import ChainPotentials
from crfhead.numerics import logsumexp, safe_max

__all__ = ["WordChain", "clamped_ratios", "log_matmul", "messages", "step_matrices", "words"]

_BLOCK_BUDGET = 1 << 20
"""The most numbers of one step of the block products, ``B * nb * K^3`` (8 MiB in float64)."""

_MOST_BLOCKED_WORK = 1 << 14
"""The most ``B K^3`` (the block products' numbers per word) for which blocks pay. Measured on 2
cores, one 20,000-word chain: K = 9 0.5 s blocked, 6 s plain; K = 21 4 s and 7 s; K = 49 140 s and
10 s. A batch of 64 sentences of 5 to 30 words, K = 9 (``B K^3`` = 46,656): 26 ms plain, 90 ms
blocked."""

_LEAST_BLOCKED_WORDS = 64
"""Below this many words blocks save too few steps to pay for their products."""


class WordChain(NamedTuple):
    """A batch of chains in word coordinates (see the module docstring).

    Attributes:
        emissions: ``(B, N, K)``: word ``i``'s emission scores; ``N`` is the longest row's length.
        transitions: ``(K, K)`` shared, or ``(B, N-1, K, K)``: entry ``i-1`` enters word ``i``.
        start: ``(K,)`` score of the first word's tag.
        end: ``(K,)`` score of the last word's tag.
        lengths: ``(B,)`` int64: the number of words of each row.
        times: ``(B, N)`` int64: the position in ``T`` of each word (padding past a row's length).
    """

    emissions: Tensor
    transitions: Tensor
    start: Tensor
    end: Tensor
    lengths: Tensor
    times: Tensor


def words(pot: ChainPotentials) -> WordChain:
    """The chains of ``pot`` with their masked positions dropped (same dtype and device).

    Entries past a row's length are gathered from its masked positions and never read as scores.
    """
    E, mask = pot.emissions, pot.mask
    B, T, K = pot.shape
    lengths = mask.sum(1)
    N = int(lengths.max()) if B > 0 and T > 0 else 0
    pos = torch.arange(T, device=E.device).expand(B, T)
    # Unmasked positions first, in order: a stable sort of the positions, masked ones pushed back.
    times = torch.sort(torch.where(mask, pos, pos + T), dim=1).indices[:, :N]  # (B, N)
    emissions = E.gather(1, times[..., None].expand(B, N, K))
    transitions = pot.transitions
    if pot.per_position:
        entering = (times[:, 1:] - 1).clamp(min=0)  # the entry of word i's position, i >= 1
        rows = torch.arange(B, device=E.device)[:, None]
        transitions = pot.transitions[rows, entering]  # (B, N-1, K, K)
    return WordChain(emissions, transitions, pot.start, pot.end, lengths, times)


def log_matmul(a: Tensor, b: Tensor) -> Tensor:
    """``c(i, k) = log sum_j exp(a(i, j) + b(j, k))``: ``(..., I, J)`` by ``(..., J, K)``, batched.

    Exact for ``-inf`` (an all ``-inf`` sum is ``-inf``); ``(..., I, J, K)`` numbers at once.
    """
    return logsumexp(a[..., :, :, None] + b[..., None, :, :], dim=-2)


def step_matrices(chain: WordChain, rows: Tensor, index: Tensor) -> Tensor:
    """The step matrices entering words ``index`` of rows ``rows``: ``(*S, K, K)`` ``[from, to]``.

    ``rows`` and ``index`` are int64 of one shape ``S`` (any ints for ``index``). Each matrix is
    ``P_i + U_i`` for a word ``1 <= i < length`` of its row; the log identity (0 on the diagonal,
    ``-inf`` elsewhere) for word 0 and for every index past the row's length or outside ``0..N-1``.
    """
    E = chain.emissions
    N, K = E.shape[1], E.shape[2]
    valid = (index >= 1) & (index < chain.lengths[rows])
    word = index.clamp(0, max(N - 1, 0))
    unary = E[rows, word]  # (*S, K)
    if chain.transitions.dim() == 4:
        if N < 2:  # no word enters another: every step is the identity
            pair = unary.new_zeros(*index.shape, K, K)
        else:
            pair = chain.transitions[rows, (word - 1).clamp(0, N - 2)]  # (*S, K, K)
    else:
        pair = chain.transitions
    identity = torch.full((K, K), float("-inf"), dtype=E.dtype, device=E.device)
    identity.fill_diagonal_(0.0)
    return torch.where(valid[..., None, None], pair + unary[..., None, :], identity)


def _shift(x: Tensor, dims: int = 1) -> Tensor:
    """``x`` less its largest entry over the last ``dims`` dimensions (0 if all are ``-inf``)."""
    return x - safe_max(x.flatten(-dims), dim=-1)[(...,) + (None,) * dims]


def _blocks(B: int, N: int, K: int) -> tuple[int, int]:
    """``(nb, L)``: about ``sqrt(N)`` blocks of ``L`` words where blocks pay, within the budget."""
    if N < _LEAST_BLOCKED_WORDS or B * K**3 > _MOST_BLOCKED_WORK:
        return 1, N
    nb = max(1, min(math.isqrt(N), _BLOCK_BUDGET // max(1, B * K**3)))
    L = -(-N // nb)
    return -(-N // L), L


class _Steps:
    """``steps(r)``: ``(B, nb, K, K)``, the steps into word ``r`` of every block of ``L`` words.

    Built a slab of consecutive ``r`` at a time (within :data:`_BLOCK_BUDGET` numbers), so that a
    step of the scans indexes one tensor rather than gathering its scores anew.
    """

    def __init__(self, chain: WordChain, nb: int, L: int) -> None:
        B, _, K = chain.emissions.shape
        device = chain.emissions.device
        self.chain, self.L = chain, L
        self.starts = torch.arange(nb, device=device) * L  # (nb,) the first word of each block
        self.rows = torch.arange(B, device=device)[:, None, None]
        self.width = max(1, min(L, _BLOCK_BUDGET // max(1, B * nb * K * K)))
        self.lo = -2 * self.width  # no slab yet
        self.slab = chain.emissions.new_empty(0)

    def __call__(self, r: int) -> Tensor:
        if not self.lo <= r < self.lo + self.width:
            self.lo = r - r % self.width
            cols = torch.arange(
                self.lo, min(self.lo + self.width, self.L), device=self.starts.device
            )
            index = self.starts[None, :, None] + cols[None, None, :]  # (1, nb, R)
            rows = self.rows.expand(-1, index.shape[1], index.shape[2])
            self.slab = step_matrices(self.chain, rows, index.expand_as(rows))  # (B, nb, R, K, K)
        return self.slab[:, :, r - self.lo]


def messages(chain: WordChain, block: int | None = None) -> tuple[Tensor, Tensor]:
    """The forward and backward messages at every word, ``(alpha, beta)``, each ``(B, N, K)``.

    ``alpha[b, i, k]`` is the log-sum of the scores of word prefixes ``0..i`` ending in tag ``k``
    (``start`` and the emissions of words ``0..i`` included), ``beta[b, i, k]`` that of the word
    suffixes after ``i`` given tag ``k`` at ``i`` (``end`` included, the emission of ``i`` not), both
    up to a shift per ``(b, i)`` (the largest entry is 0). So for any word ``i < length``,
    ``Z ∝ sum_k exp(alpha + beta)`` at ``i``, with the same shift as any other sum over paths
    through ``i``. Entries past a row's length are meaningless.

    Args:
        chain: the chains in word coordinates (:func:`words`).
        block: the block length ``L`` (by default about ``sqrt(N)``, within the memory budget).
    """
    E = chain.emissions
    B, N, K = E.shape
    if N == 0:
        return E.new_zeros(B, 0, K), E.new_zeros(B, 0, K)
    if block is None:
        nb, L = _blocks(B, N, K)
    else:
        L = max(1, min(block, N))
        nb = -(-N // L)
    steps = _Steps(chain, nb, L)
    # Boundary messages: into[:, c] is alpha before block c (the word before it), out[:, c] beta
    # after it (its last word). Block 0 enters from ``start + U_0`` through the identity at word 0.
    first = _shift(chain.start + E[:, 0])  # (B, K)
    end = _shift(chain.end.expand(B, K))
    into, out = [first], [end]
    if nb > 1:
        products = steps(0)
        for r in range(1, L):
            products = _shift(log_matmul(products, steps(r)), dims=2)  # (B, nb, K, K)
        for c in range(nb - 1):
            into.append(_shift(log_matmul(into[-1][:, None], products[:, c])[:, 0]))
        for c in range(nb - 1, 0, -1):
            out.append(_shift(log_matmul(products[:, c], out[-1][:, :, None])[..., 0]))
    fwd = torch.stack(into, dim=1)  # (B, nb, K)
    bwd = torch.stack(out[::-1], dim=1)
    alphas: list[Tensor] = []
    betas: list[Tensor] = []
    for r in range(L):
        fwd = _shift(log_matmul(fwd[:, :, None], steps(r))[:, :, 0])
        alphas.append(fwd)
    for r in range(L - 1, -1, -1):
        betas.append(bwd)
        bwd = _shift(log_matmul(steps(r), bwd[..., None])[..., 0])
    alpha = torch.stack(alphas, dim=2).reshape(B, nb * L, K)[:, :N]
    beta = torch.stack(betas[::-1], dim=2).reshape(B, nb * L, K)[:, :N]
    return alpha, beta


_CASE_BUDGET = 1 << 23
"""The most numbers of one step of :func:`clamped_ratios`, ``2 * C * K^2`` (64 MiB in float64)."""


def clamped_ratios(
    chain: WordChain,
    alpha: Tensor,
    beta: Tensor,
    rows: Tensor,
    first: Tensor,
    length: Tensor,
    clamps: tuple[Tensor, Tensor, Tensor],
) -> Tensor:
    """``Z_c / Z`` for ``C`` clamped windows: the probability that each window's tags are kept.

    Case ``c`` spans words ``first[c] .. first[c] + length[c]`` of row ``rows[c]``; at each word of
    it that ``clamps`` names it keeps only the given tags, elsewhere every tag. Its window ``[a, b]``
    costs ``(b - a) K^2``: from ``alpha`` at ``a`` restricted to the kept tags, the clamped recursion
    through ``a+1..b`` beside the unclamped one with the same shifts, each closed by ``beta`` at
    ``b``; the unclamped sum is ``Z`` up to the shift the clamped one has too, so their ratio is exact
    whatever the shifts of the messages. Cases run together, padded to the longest window of a group
    of similar lengths.

    Args:
        chain: the chains in word coordinates (:func:`words`).
        alpha: ``(B, N, K)`` forward messages (:func:`messages`).
        beta: ``(B, N, K)`` backward messages.
        rows: ``(C,)`` int64, the row of each case.
        first: ``(C,)`` int64, the first word of each window (``a``).
        length: ``(C,)`` int64, ``b - a`` (so ``first + length`` is less than the row's length).
        clamps: ``(case, offset, tags)``: ``(M,)`` int64 case and offset ``0..length[case]`` of each
            clamp and ``(M, K)`` bool, the tags it keeps (one clamp per case and offset).

    Returns:
        ``(C,)`` in the messages' dtype; 0 for a row with no valid path (never NaN).
    """
    C = rows.shape[0]
    K = chain.emissions.shape[2]
    out = alpha.new_zeros(C)
    chunk = max(1, _CASE_BUDGET // (2 * K * K))
    # Windows sorted by length, run in groups whose longest is at most twice their shortest: the
    # padding at most doubles the work, and one long span does not make every case long.
    order = torch.argsort(length, stable=True)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(C)
    case, offset, tags = clamps
    by_rank = torch.argsort(rank[case], stable=True)  # the clamps of each group contiguous
    clamp_rank = rank[case][by_rank]
    widths = length[order] + 1
    lo = 0
    while lo < C:
        hi = min(lo + chunk, int(torch.searchsorted(widths, 2 * widths[lo], right=True)))
        idx = order[lo:hi]
        j0, j1 = (int(torch.searchsorted(clamp_rank, r)) for r in (lo, hi))
        sel = by_rank[j0:j1]
        keep = torch.ones(hi - lo, int(widths[hi - 1]), K, dtype=torch.bool)
        keep[clamp_rank[j0:j1] - lo, offset[sel]] = tags[sel]
        out[idx] = _window_chunk(chain, alpha, beta, rows[idx], first[idx], length[idx], keep)
        lo = hi
    return out


def _window_chunk(
    chain: WordChain,
    alpha: Tensor,
    beta: Tensor,
    rows: Tensor,
    first: Tensor,
    length: Tensor,
    keep: Tensor,
) -> Tensor:
    """:func:`clamped_ratios` for cases whose windows all fit ``keep``'s ``W`` offsets."""
    impossible = alpha.new_tensor(float("-inf"))
    start = alpha[rows, first]  # (C, K)
    state = torch.stack([torch.where(keep[:, 0], start, impossible), start])  # clamped, free
    for o in range(1, keep.shape[1]):
        step = step_matrices(chain, rows, first + o)  # (C, K, K): identity past the row
        new = log_matmul(state[:, :, None], step)[:, :, 0]  # (2, C, K)
        new = new - safe_max(new[1], dim=-1)[None, :, None]  # the free chain's shift for both
        new[0] = torch.where(keep[:, o], new[0], impossible)
        state = torch.where((o <= length)[None, :, None], new, state)
    closing = beta[rows, first + length]  # (C, K)
    clamped, free = logsumexp(state + closing, dim=-1)  # (C,) each
    found = free > float("-inf")  # a row with no valid path has no span of any probability
    return torch.where(found, (clamped - torch.where(found, free, 0.0)).exp(), 0.0)
