"""The linear-chain dynamic program: one forward and one backward recursion, any semiring.

The chain distributive law (the generalised distributive law of Aji and McEliece, 2000, on a chain;
"Theorem 1" below) in log space:

    alpha_t(k) = U_t(k) + ⊕_j [alpha_{t'}(j) + P_t(j, k)]        (t' = previous unmasked position)
    beta_t(j)  = ⊕_k [P_{t''}(j, k) + U_{t''}(k) + beta_{t''}(k)]  (t'' = next unmasked position)

with ``alpha`` starting at ``start + U`` and ``beta`` at ``end``. Forbidden events are ``-inf``
(:data:`crfhead.numerics.IMPOSSIBLE`) and excluded exactly; a row none of whose paths is allowed has
``log Z = -inf``, all-zero marginals and no Viterbi path. (a) ``⊕_k alpha_T(k) + end(k)`` is
``log Z`` (log semiring) or the best score (max semiring); (b) ``alpha_t + beta_t`` aggregates the paths
through ``(t, k)``; (c) likewise for an edge.

Every state is renormalised at each step (its ⊕ subtracted and accumulated separately), so states stay
O(1) and marginals are a softmax of ``alpha_t + beta_t``: no cancellation of large numbers, and float32
marginals stay accurate for long chains.

The functions here are the portable backend: pure PyTorch over
:class:`~crfhead.engine.potentials.ChainPotentials`, any device, differentiable to any order by autograd.
They know nothing of the other backends; :mod:`crfhead.engine` dispatches to them, and
:func:`log_partition_grads` (the explicit forward-backward) is what every backend's double backward
recomputes.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from crfhead.engine.potentials import ChainPotentials
from crfhead.engine.semiring import LogSemiring, MaxSemiring, Semiring
from crfhead.numerics import EXP_FLOOR, safe_max, softmax, straight_clamp, without_impossible

__all__ = [
    "ForwardResult",
    "Moments",
    "backward_scan",
    "double_backward",
    "edge_marginals",
    "entropy",
    "entropy_from",
    "forward_scan",
    "log_partition",
    "log_partition_grads",
    "marginals",
    "max_marginals",
    "max_marginals_from",
    "max_sums",
    "moments",
    "node_marginals",
    "pair_marginals",
    "scale_grads",
    "score",
    "score_grads",
]

_LOG = LogSemiring()
_MAX = MaxSemiring()


class ForwardResult:
    """What a forward scan leaves behind.

    Attributes:
        alphas: ``(B, T, K, R)`` normalised forward states; at a masked position, the state of the
            previous unmasked one (so ``alphas[:, t-1]`` is always the state an edge into ``t`` leaves).
        total: ``(B, R)`` ⊕ over the final tags (``end`` included), un-normalised; 0 for empty rows
            (rank 0) and the semiring's "nothing" for missing ranks.
        final_indices: ``(B, R)`` flat index ``tag * R + rank`` of each final value (max-type only).
        pointers: list over ``t`` of ``(B, K, R)`` flat back-pointers ``prev_tag * R + prev_rank``
            (max-type only; entry 0 is unused).
    """

    def __init__(
        self,
        alphas: Tensor,
        total: Tensor,
        final_indices: Tensor | None,
        pointers: list[Tensor],
    ) -> None:
        self.alphas = alphas
        self.total = total
        self.final_indices = final_indices
        self.pointers = pointers


def _step(semiring: Semiring, state: Tensor, trans: Tensor) -> tuple[Tensor, Tensor | None]:
    """One ⊕⊗ step: ``new(k) = ⊕_{j, r} state(j, r) + trans(j, k)``.

    Args:
        semiring: the ⊕ to aggregate with.
        state: ``(B, K, R)``.
        trans: ``(K, K)`` or ``(B, K, K)``, ``[from, to]``.

    Returns:
        values ``(B, K, R')`` and back-pointers ``(B, K, R')`` into the flattened ``(from, rank)``.
    """
    B, K, R = state.shape
    scores = state.unsqueeze(-1) + trans.unsqueeze(-2)  # (B, K_from, R, K_to)
    values, idx = semiring.reduce(scores.reshape(B, K * R, scores.shape[-1]), dim=1)
    return values.transpose(1, 2), (None if idx is None else idx.transpose(1, 2))


def forward_scan(semiring: Semiring, pot: ChainPotentials) -> ForwardResult:
    """The forward recursion of Theorem 1 over a batch of chains with holes.

    Args:
        semiring: log, max or k-max (:mod:`crfhead.engine.semiring`).
        pot: the chain potentials.

    Returns:
        :class:`ForwardResult`; ``total[:, 0]`` is ``log Z`` (log semiring) or the best score.
    """
    E, mask = pot.emissions, pot.mask
    B, T, K = pot.shape
    R = semiring.ranks
    # Ranks beyond the first start as "no path" (-inf) so that k-best reports missing paths.
    pad = E.new_full((B, T, K, R - 1), float("-inf"))
    firsts = torch.cat([(pot.start + E).unsqueeze(-1), pad], dim=3)  # (B, T, K, R)
    emit = E.unsqueeze(-1)  # (B, T, K, 1)
    on = mask[:, :, None, None]  # (B, T, 1, 1)
    linked = pot.has_prev[:, :, None, None]  # an unmasked position precedes t
    state = firsts[:, 0] if T > 0 else firsts.new_zeros(B, K, R)
    alphas: list[Tensor] = []
    norms: list[Tensor] = []
    pointers: list[Tensor] = []
    for t in range(T):
        if t == 0:
            new = firsts[:, 0]
            if semiring.has_pointers:
                pointers.append(torch.zeros(B, K, R, dtype=torch.long, device=E.device))
        else:
            moved, ptr = _step(semiring, state, pot.transitions_into(t))
            new = torch.where(linked[:, t], moved + emit[:, t], firsts[:, t])
            if ptr is not None:
                pointers.append(ptr)
        norm = semiring.normalizer(new)  # (B,)
        state = torch.where(on[:, t], new - norm[:, None, None], state)
        norms.append(norm)
        alphas.append(state)
    if T == 0:
        log_norm = E.new_zeros(B)
    else:
        log_norm = torch.where(mask, torch.stack(norms, dim=1), E.new_zeros(())).sum(1)
    final = (state + pot.end[None, :, None]).reshape(B, 1, K * R)
    total, idx = semiring.reduce(final, dim=2)  # (B, 1, R)
    total = total[:, 0] + log_norm[:, None]
    empty_total = torch.cat([E.new_zeros(B, 1), E.new_full((B, R - 1), float("-inf"))], dim=1)
    total = torch.where(pot.nonempty[:, None], total, empty_total)
    stacked = torch.stack(alphas, dim=1) if T > 0 else E.new_zeros(B, 0, K, R)
    return ForwardResult(stacked, total, None if idx is None else idx[:, 0], pointers)


def backward_scan(semiring: Semiring, pot: ChainPotentials) -> Tensor:
    """The backward recursion of Theorem 1 (log or max semiring, one rank).

    Returns:
        ``(B, T, K)`` normalised ``beta_t``; meaningful at unmasked positions only.
    """
    E, mask = pot.emissions, pot.mask
    B, T, K = pot.shape
    msg = E.new_zeros(B, K)
    end = pot.end.expand(B, K)
    linked = pot.has_next[:, :, None]  # an unmasked position follows t
    betas: list[Tensor] = []
    for t in reversed(range(T)):
        beta = torch.where(linked[:, t], msg, end)
        beta = beta - semiring.normalizer(beta.unsqueeze(-1))[:, None]
        betas.append(beta)
        if t > 0:
            carry = (E[:, t] + beta).unsqueeze(-2)  # (B, 1, K_to)
            new_msg, _ = semiring.reduce(pot.transitions_into(t) + carry, dim=-1)  # (B, K_from, 1)
            msg = torch.where(mask[:, t, None], new_msg[..., 0], msg)
    if T == 0:
        return E.new_zeros(B, 0, K)
    return torch.stack(betas[::-1], dim=1)


def node_marginals(pot: ChainPotentials, alphas: Tensor, betas: Tensor) -> Tensor:
    """``(B, T, K)``: softmax of ``alpha_t + beta_t`` at unmasked positions, 0 elsewhere."""
    probs = softmax(alphas + betas, dim=-1)
    return torch.where(pot.mask[..., None], probs, torch.zeros_like(probs))


def pair_marginals(pot: ChainPotentials, alphas: Tensor, betas: Tensor) -> Tensor:
    """``(B, T-1, K, K)``: entry ``t-1`` is p(prev unmasked tag = i, tag at t = j), 0 if no such edge."""
    B, T, K = pot.shape
    if T < 2:
        return alphas.new_zeros(B, 0, K, K)
    logits = (
        alphas[:, :-1, :, None]
        + pot.edge_transitions()
        + (pot.emissions[:, 1:] + betas[:, 1:])[:, :, None, :]
    )  # (B, T-1, K_from, K_to)
    probs = softmax(logits.reshape(B, T - 1, K * K), dim=-1).reshape(B, T - 1, K, K)
    valid = (pot.mask & pot.has_prev)[:, 1:, None, None]
    return torch.where(valid, probs, torch.zeros_like(probs))


class Moments(NamedTuple):
    """A function of the chain and its gradient's parts, as every backend's forward-backward returns them.

    Attributes:
        value: ``(B,)`` the function (``log Z``, or the loss ``log Z - score(gold)``).
        node: ``(B, T, K)`` its gradient to the emissions (the node marginals for ``log Z``).
        edge: to the transitions: ``(B, K, K)`` summed over edges (shared transitions) or ``(B, T-1,
            K, K)`` per edge; ``None`` when not asked for.
        first: ``(B, K)`` to ``start`` (the first unmasked tag's marginals).
        last: ``(B, K)`` to ``end``.

    Entries not asked for are ``None``.
    """

    value: Tensor
    node: Tensor | None = None
    edge: Tensor | None = None
    first: Tensor | None = None
    last: Tensor | None = None


def moments(pot: ChainPotentials, edges: bool) -> Moments:
    """``log Z`` and its gradient's parts by the forward-backward (differentiable by autograd)."""
    fwd = forward_scan(_LOG, pot)
    alphas = fwd.alphas[..., 0]
    betas = backward_scan(_LOG, pot)
    node = node_marginals(pot, alphas, betas)
    edge: Tensor | None = None
    if edges:
        edge = pair_marginals(pot, alphas, betas)
        edge = edge if pot.per_position else edge.sum(1)
    first = (node * pot.is_first[..., None]).sum(1)
    last = (node * pot.is_last[..., None]).sum(1)
    return Moments(fwd.total[:, 0], node, edge, first, last)


def scale_grads(
    grad: Tensor, m: Moments, per_position: bool, need: tuple[bool, ...] = (True,) * 4
) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
    """Gradients of ``sum_b grad[b] * m.value[b]`` to (emissions, transitions, start, end).

    ``grad`` is ``(B,)``; the results are ``(B, T, K)``, ``(K, K)`` or ``(B, T-1, K, K)``, ``(K,)``,
    ``(K,)`` (``None`` where ``m`` lacks the part; every part is computed, whatever ``need`` says).
    """
    g_tr: Tensor | None = None
    if m.edge is not None:
        if per_position:
            g_tr = grad[:, None, None, None] * m.edge
        else:
            g_tr = torch.einsum("b,bij->ij", grad, m.edge)
    g_em = None if m.node is None else grad[:, None, None] * m.node
    g_start = None if m.first is None else grad @ m.first
    g_end = None if m.last is None else grad @ m.last
    return g_em, g_tr, g_start, g_end


def log_partition_grads(
    pot: ChainPotentials, grad: Tensor, need_edges: bool
) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
    """Gradients of ``sum_b grad[b] * log Z_b`` to (emissions, transitions, start, end).

    The explicit forward-backward, differentiable (so every backend's double backward uses it).
    """
    return scale_grads(grad, moments(pot, need_edges), pot.per_position)


def score(pot: ChainPotentials, tags: Tensor) -> Tensor:
    """Score of given paths: start + emissions + transitions + end over unmasked positions.

    ``(B,)`` for ``(B, T)`` tags; ``(B, R)`` for ``(B, R, T)`` tags, ``R`` paths of each chain (the
    k best), read from the chain's potentials through broadcast views: nothing is copied per path.

    Args:
        pot: the chain potentials.
        tags: ``(B, T)`` or ``(B, R, T)`` int64; entries at masked positions are ignored (``-100``
            padding is fine).
    """
    E, mask = pot.emissions, pot.mask
    B, T, K = pot.shape
    R = tags.shape[1] if tags.dim() == 3 else 0

    def per_path(x: Tensor) -> Tensor:  # (B, ...) -> (B, R, ...) as a view, for (B, R, T) tags
        return x.unsqueeze(1).expand(B, R, *x.shape[1:]) if R else x

    on = per_path(mask)
    safe = torch.where(on, tags, torch.zeros_like(tags))
    zero = E.new_zeros(())
    unary = torch.where(on, per_path(E).gather(-1, safe.unsqueeze(-1)).squeeze(-1), zero).sum(-1)
    start = torch.where(per_path(pot.is_first), pot.start[safe], zero).sum(-1)
    end = torch.where(per_path(pot.is_last), pot.end[safe], zero).sum(-1)
    total = unary + start + end
    if T > 1:
        prev = safe.gather(-1, per_path(pot.prev_index.clamp(min=0)))[..., 1:]  # (B, [R,] T-1)
        cur = safe[..., 1:]
        edge_on = per_path((mask & pot.has_prev)[:, 1:])
        if pot.per_position:
            flat = per_path(pot.transitions.reshape(B, T - 1, K * K))
            pair = flat.gather(-1, (prev * K + cur).unsqueeze(-1)).squeeze(-1)
        else:
            pair = pot.transitions[prev, cur]
        total = total + torch.where(edge_on, pair, zero).sum(-1)
    return total


def score_grads(
    pot: ChainPotentials, tags: Tensor, weights: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Gradients of ``sum(weights * score(pot, tags))`` to (emissions, transitions, start, end).

    A path's score is linear in the potentials: its gradient is the path's indicator counts, here
    added up with their ``weights`` (``(B,)`` for ``(B, T)`` tags, ``(B, R)`` for ``(B, R, T)``)
    into tensors shaped and typed as the potentials, without autograd.
    """
    E, mask = pot.emissions, pot.mask
    B, T, K = pot.shape
    paths = tags.unsqueeze(1) if tags.dim() == 2 else tags  # (B, R, T)
    R = paths.shape[1]
    w = weights.reshape(B, R, 1)
    on = mask.unsqueeze(1)
    safe = torch.where(on, paths, torch.zeros_like(paths))
    steps = torch.arange(T, device=E.device)
    at = (safe + steps * K).reshape(B, R * T)
    per_word = (w * on).to(E.dtype).reshape(B, R * T)
    d_em = E.new_zeros(B, T * K).scatter_add_(1, at, per_word).reshape(B, T, K)
    ends = []
    for where, x in ((pot.is_first, pot.start), (pot.is_last, pot.end)):
        counts = (w * where.unsqueeze(1)).to(x.dtype).reshape(-1)
        ends.append(x.new_zeros(K).index_add_(0, safe.reshape(-1), counts))
    tr = pot.transitions
    if T < 2:
        return d_em, torch.zeros_like(tr), ends[0], ends[1]
    prev = safe.gather(2, pot.prev_index.clamp(min=0).unsqueeze(1).expand(B, R, T))[:, :, 1:]
    edge = prev * K + safe[:, :, 1:]  # (B, R, T-1) into (K K)
    per_edge = (w * (mask & pot.has_prev)[:, 1:].unsqueeze(1)).to(tr.dtype)
    if pot.per_position:
        at = (edge + steps[: T - 1] * (K * K)).reshape(B, -1)
        d_tr = tr.new_zeros(B, (T - 1) * K * K).scatter_add_(1, at, per_edge.reshape(B, -1))
    else:
        d_tr = tr.new_zeros(K * K).index_add_(0, edge.reshape(-1), per_edge.reshape(-1))
    return d_em, d_tr.reshape(tr.shape), ends[0], ends[1]


def log_partition(pot: ChainPotentials) -> Tensor:
    """``log Z`` of each chain, ``(B,)``, by the forward scan alone (0 for empty rows)."""
    return forward_scan(_LOG, pot).total[:, 0]


def marginals(pot: ChainPotentials) -> Tensor:
    """Node marginals ``p(z_t = k | x)``, ``(B, T, K)``; 0 at masked positions."""
    alphas = forward_scan(_LOG, pot).alphas[..., 0]
    return node_marginals(pot, alphas, backward_scan(_LOG, pot))


def edge_marginals(pot: ChainPotentials) -> Tensor:
    """Edge marginals, ``(B, T-1, K, K)``.

    Entry ``[b, t-1, i, j]`` is p(tag i at the previous unmasked position, tag j at ``t``); 0 where
    ``t`` is masked or has no unmasked predecessor.
    """
    alphas = forward_scan(_LOG, pot).alphas[..., 0]
    return pair_marginals(pot, alphas, backward_scan(_LOG, pot))


def max_marginals(pot: ChainPotentials) -> Tensor:
    """Max-marginals ``mu_t(k) = max_{z: z_t = k} p(z | x)``, ``(B, T, K)``; 0 at masked positions.

    Theorem 1 (b) in the max semiring, divided by ``Z``: equal to ``p(viterbi path)`` along that path.
    """
    return max_marginals_from(pot, *max_sums(pot), log_partition(pot))


def max_sums(pot: ChainPotentials) -> tuple[Tensor, Tensor]:
    """``(both, best)``: the max-product ``alpha_t + beta_t`` and the best score ``(B,)``.

    ``both`` ``(B, T, K)`` is the best score of a path through each ``(t, k)``, up to a shift per
    ``(b, t)``.
    """
    fwd = forward_scan(_MAX, pot)
    return fwd.alphas[..., 0] + backward_scan(_MAX, pot), fwd.total[:, 0]


def max_marginals_from(pot: ChainPotentials, both: Tensor, best: Tensor, log_z: Tensor) -> Tensor:
    """Max-marginals from the max-sums, the best score and ``log Z``.

    ``both`` ``(B, T, K)`` is the best score through each ``(t, k)``, up to a shift per ``(b, t)``;
    ``best`` and ``log_z`` are ``(B,)``.

    Each position is shifted so that its best entry is ``log p(best path)``: the best path's
    max-marginal is exactly its probability, whatever the rounding of the sums. ``best <= log Z``
    exactly, but the two come from different recursions, each rounded: their difference is clamped
    at 0 (straight through), so that every max-marginal is in ``[0, 1]``.
    """
    found = best > float("-inf")
    log_best = torch.where(
        found, straight_clamp(best - torch.where(found, log_z, 0.0), max=0.0), float("-inf")
    )  # log p(best)
    log_mu = both - safe_max(both, dim=-1, keepdim=True) + log_best[:, None, None]
    mu = torch.where(log_mu < EXP_FLOOR, 0.0, log_mu.clamp(min=EXP_FLOOR).exp())
    return torch.where(pot.mask[..., None], mu, torch.zeros_like(mu))


def entropy(pot: ChainPotentials) -> Tensor:
    """Entropy ``H(p(z | x))`` in nats, ``(B,)``: ``log Z - E[score(z)]`` from the marginals.

    0 for an empty row and for a row with no valid path.
    """
    return entropy_from(pot, moments(pot, edges=True))


def entropy_from(pot: ChainPotentials, m: Moments) -> Tensor:
    """The entropy ``log Z - E[score(z)]`` from a forward-backward's parts (any backend's).

    ``m`` holds ``log Z`` and the node, first, last and edge marginals (the edges summed over
    positions with shared transitions, per edge otherwise). Never negative.
    """
    assert m.node is not None and m.edge is not None and m.first is not None and m.last is not None
    # A forbidden (-inf) score has probability exactly 0: its term is 0, never 0 * -inf.
    emissions, start, end = (without_impossible(x) for x in (pot.emissions, pot.start, pot.end))
    transitions = without_impossible(pot.transitions)
    expected = (m.node * emissions).sum((1, 2)) + m.first @ start + m.last @ end
    if pot.per_position:
        expected = expected + (m.edge * transitions).sum((1, 2, 3))
    else:
        expected = expected + (m.edge * transitions).sum((1, 2))
    log_z = m.value
    # A difference of two numbers of the size of log Z: where rounding takes it below 0 (scores far
    # above 1e4 in float32), it is 0 in value, with the difference's gradient.
    return torch.where(log_z > float("-inf"), straight_clamp(log_z - expected, min=0.0), 0.0)


def double_backward(
    pot: ChainPotentials, tags: Tensor | None, grad: Tensor, need_edges: bool
) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
    """Differentiable gradients of ``sum_b grad[b] * loss_b`` by the portable scan, for double backward.

    ``loss_b`` is ``log Z_b`` (``tags`` ``None``) or ``log Z_b - score_b(tags)``: the fused backends'
    first backward scales saved parts, which carry no graph, so a second derivative recomputes here.
    """
    g = log_partition_grads(pot, grad, need_edges)
    if tags is None:
        return g
    with torch.enable_grad():
        em, tr, st, en = (
            x.detach().requires_grad_(True)
            for x in (pot.emissions, pot.transitions, pot.start, pot.end)
        )
        leaves = (em, tr, st, en)
        gold = score(ChainPotentials(em, tr, st, en, pot.mask), torch.where(pot.mask, tags, 0))
        counts = torch.autograd.grad(gold, leaves, grad, allow_unused=True, create_graph=True)
    a: Tensor | None
    out: list[Tensor | None] = []
    for a, c in zip(g, counts, strict=True):
        out.append(None if a is None else a - (0 if c is None else c))
    return out[0], out[1], out[2], out[3]
