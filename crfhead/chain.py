"""The linear-chain dynamic program: one forward and one backward recursion, any semiring.

Theorem 1 of the seed ``000_7c5bc3c5795a6d4c.txt`` (the chain distributive law) in log space:

    alpha_t(k) = U_t(k) + ⊕_j [alpha_{t'}(j) + P_t(j, k)]        (t' = previous unmasked position)
    beta_t(j)  = ⊕_k [P_{t''}(j, k) + U_{t''}(k) + beta_{t''}(k)]  (t'' = next unmasked position)

with ``alpha`` starting at ``start + U`` and ``beta`` at ``end``. (a) ``⊕_k alpha_T(k) + end(k)`` is
``log Z`` (log semiring) or the best score (max semiring); (b) ``alpha_t + beta_t`` aggregates the paths
through ``(t, k)``; (c) likewise for an edge.

Every state is renormalised at each step (its ⊕ subtracted and accumulated separately), so states stay
O(1) and marginals are a softmax of ``alpha_t + beta_t``: no cancellation of large numbers, and float32
marginals stay accurate for long chains.

The functions here are pure: they take :class:`~crfhead.potentials.ChainPotentials` and return tensors.
:func:`log_partition` is a custom autograd function whose backward is the explicit forward-backward
(marginals), the seam where fused kernels plug in; double backward (Hessian-vector products) recomputes
the marginals differentiably.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from crfhead.backends import resolve
from crfhead.numerics import EXP_FLOOR, no_autocast, softmax
from crfhead.potentials import ChainPotentials, check_tag_range
from crfhead.semiring import LogSemiring, MaxSemiring, Semiring

__all__ = [
    "ForwardResult",
    "backward_scan",
    "edge_marginals",
    "entropy",
    "forward_scan",
    "log_partition",
    "log_partition_grads",
    "marginals",
    "max_marginals",
    "nll",
    "score",
]

_LOG = LogSemiring()
_MAX = MaxSemiring()


def _fused(name: str) -> Any:
    """The module of a fused backend (imported on first use)."""
    if name == "cpu":
        from crfhead.backends import cpu

        return cpu
    from crfhead.backends import gpu

    return gpu


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
        semiring: log, max or k-max (:mod:`crfhead.semiring`).
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


def _node_marginals(pot: ChainPotentials, alphas: Tensor, betas: Tensor) -> Tensor:
    """``(B, T, K)``: softmax of ``alpha_t + beta_t`` at unmasked positions, 0 elsewhere."""
    probs = softmax(alphas + betas, dim=-1)
    return torch.where(pot.mask[..., None], probs, torch.zeros_like(probs))


def _edge_marginals(pot: ChainPotentials, alphas: Tensor, betas: Tensor) -> Tensor:
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


def _chain_grads(
    pot: ChainPotentials, alphas: Tensor, betas: Tensor, need_edges: bool
) -> tuple[Tensor, Tensor | None]:
    node = _node_marginals(pot, alphas, betas)
    edge = _edge_marginals(pot, alphas, betas) if need_edges else None
    return node, edge


def log_partition_grads(
    pot: ChainPotentials, grad: Tensor, need_edges: bool, alphas: Tensor | None
) -> tuple[Tensor | None, ...]:
    """Gradients of ``sum_b grad[b] * log Z_b`` to (emissions, transitions, start, end, mask).

    The explicit forward-backward; differentiable when gradients are enabled (double backward), in
    which case ``alphas`` (``(B, T, K)`` from an earlier forward scan) is recomputed.
    """
    if alphas is None or torch.is_grad_enabled():
        alphas = forward_scan(_LOG, pot).alphas[..., 0]
    betas = backward_scan(_LOG, pot)
    node, edge = _chain_grads(pot, alphas, betas, need_edges)
    g_em = grad[:, None, None] * node
    g_tr: Tensor | None = None
    if edge is not None:
        if pot.per_position:
            g_tr = grad[:, None, None, None] * edge
        else:
            g_tr = torch.einsum("b,btij->ij", grad, edge)
    g_start = torch.einsum("b,btk->k", grad, node * pot.is_first[..., None])
    g_end = torch.einsum("b,btk->k", grad, node * pot.is_last[..., None])
    return g_em, g_tr, g_start, g_end, None


class _LogPartition(torch.autograd.Function):
    """``log Z`` with the explicit forward-backward as its backward (gradient = marginals)."""

    @staticmethod
    def forward(
        ctx: Any, emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor, mask: Tensor
    ) -> Tensor:
        pot = ChainPotentials(emissions, transitions, start, end, mask)
        fwd = forward_scan(_LOG, pot)
        ctx.save_for_backward(emissions, transitions, start, end, mask, fwd.alphas[..., 0])
        return fwd.total[:, 0]

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        emissions, transitions, start, end, mask, alphas = ctx.saved_tensors
        pot = ChainPotentials(emissions, transitions, start, end, mask)
        return log_partition_grads(pot, grad, bool(ctx.needs_input_grad[1]), alphas)


def log_partition(pot: ChainPotentials, backend: str | None = None) -> Tensor:
    """``log Z`` of each chain, ``(B,)``: the log-sum-exp of every path's score (0 for empty rows).

    Differentiable; the gradient with respect to the emissions is the node marginals.

    Args:
        pot: the chain potentials.
        backend: ``"portable"``, ``"cpu"``, ``"triton"`` or ``"auto"`` (default: see
            :mod:`crfhead.backends`).
    """
    with no_autocast(pot.emissions.device):
        name = resolve(pot.emissions.device, backend)
        if name != "portable":
            return _fused(name).log_partition(pot)  # type: ignore[no-any-return]
        tensors = (pot.emissions, pot.transitions, pot.start, pot.end)
        if torch.is_grad_enabled() and any(x.requires_grad for x in tensors):
            out: Tensor = _LogPartition.apply(*tensors, pot.mask)  # type: ignore[no-untyped-call]
            return out
        return forward_scan(_LOG, pot).total[:, 0]


def score(pot: ChainPotentials, tags: Tensor) -> Tensor:
    """Score of the given paths, ``(B,)``: start + emissions + transitions + end over unmasked positions.

    Args:
        pot: the chain potentials.
        tags: ``(B, T)`` int64; entries at masked positions are ignored (``-100`` padding is fine).
    """
    E, mask = pot.emissions, pot.mask
    B, T, K = pot.shape
    safe = torch.where(mask, tags, torch.zeros_like(tags))
    zero = E.new_zeros(())
    unary = torch.where(mask, E.gather(2, safe.unsqueeze(-1)).squeeze(-1), zero).sum(1)
    start = torch.where(pot.is_first, pot.start[safe], zero).sum(1)
    end = torch.where(pot.is_last, pot.end[safe], zero).sum(1)
    total = unary + start + end
    if T > 1:
        prev = safe.gather(1, pot.prev_index.clamp(min=0))[:, 1:]  # (B, T-1)
        cur = safe[:, 1:]
        edge_on = (mask & pot.has_prev)[:, 1:]
        if pot.per_position:
            flat = pot.transitions.reshape(B, T - 1, K * K)
            pair = flat.gather(2, (prev * K + cur).unsqueeze(-1)).squeeze(-1)
        else:
            pair = pot.transitions[prev, cur]
        total = total + torch.where(edge_on, pair, zero).sum(1)
    return total


def nll(pot: ChainPotentials, tags: Tensor, backend: str | None = None) -> tuple[Tensor, Tensor]:
    """The CRF loss per chain and the gold score: ``(log Z - score(tags), score(tags))``, each ``(B,)``.

    The first is differentiable, its gradient the marginals minus the gold path's indicators; on the
    ``cpu`` backend both come from one native call. The gold score carries no gradient.

    Args:
        pot: the chain potentials.
        tags: ``(B, T)`` int64, in ``[0, K)`` at unmasked positions (ignored elsewhere).
        backend: see :mod:`crfhead.backends`.

    Raises:
        ValueError: an unmasked tag outside ``[0, K)``.
    """
    with no_autocast(pot.emissions.device):
        if resolve(pot.emissions.device, backend) == "cpu":
            return _fused("cpu").nll(pot, tags)  # type: ignore[no-any-return]
        if not torch.compiler.is_compiling():
            check_tag_range(tags, pot.mask, pot.shape[2])
        gold = score(pot, tags)
        return log_partition(pot, backend) - gold, gold.detach()


def marginals(pot: ChainPotentials, backend: str | None = None) -> Tensor:
    """Node marginals ``p(z_t = k | x)``, ``(B, T, K)``; 0 at masked positions.

    Computed by an explicit forward-backward (works under ``torch.inference_mode``): one fused call on
    the ``cpu``/``triton`` backends, or the portable recursions, which are differentiable by autograd
    (used whenever the potentials require gradients and gradients are enabled).
    """
    with no_autocast(pot.emissions.device):
        name = resolve(pot.emissions.device, backend)
        tensors = (pot.emissions, pot.transitions, pot.start, pot.end)
        differentiable = torch.is_grad_enabled() and any(x.requires_grad for x in tensors)
        if name != "portable" and not differentiable:
            return _fused(name).marginals(pot)  # type: ignore[no-any-return]
        alphas = forward_scan(_LOG, pot).alphas[..., 0]
        return _node_marginals(pot, alphas, backward_scan(_LOG, pot))


def edge_marginals(pot: ChainPotentials) -> Tensor:
    """Edge marginals, ``(B, T-1, K, K)``.

    Entry ``[b, t-1, i, j]`` is p(tag i at the previous unmasked position, tag j at ``t``); 0 where
    ``t`` is masked or has no unmasked predecessor.
    """
    with no_autocast(pot.emissions.device):
        alphas = forward_scan(_LOG, pot).alphas[..., 0]
        return _edge_marginals(pot, alphas, backward_scan(_LOG, pot))


def max_marginals(pot: ChainPotentials) -> Tensor:
    """Max-marginals ``mu_t(k) = max_{z: z_t = k} p(z | x)``, ``(B, T, K)``; 0 at masked positions.

    Theorem 1 (b) in the max semiring, divided by ``Z``: equal to ``p(viterbi path)`` along that path.
    """
    with no_autocast(pot.emissions.device):
        fwd = forward_scan(_MAX, pot)
        both = fwd.alphas[..., 0] + backward_scan(_MAX, pot)  # (B, T, K), up to a per-(b, t) shift
        log_best = fwd.total[:, 0] - forward_scan(_LOG, pot).total[:, 0]  # log p(best path), (B,)
        log_mu = both - both.amax(dim=-1, keepdim=True) + log_best[:, None, None]
        mu = torch.where(log_mu < EXP_FLOOR, 0.0, log_mu.clamp(min=EXP_FLOOR).exp())
        return torch.where(pot.mask[..., None], mu, torch.zeros_like(mu))


def entropy(pot: ChainPotentials) -> Tensor:
    """Entropy ``H(p(z | x))`` in nats, ``(B,)``: ``log Z - E[score(z)]`` from the marginals; 0 if empty."""
    with no_autocast(pot.emissions.device):
        fwd = forward_scan(_LOG, pot)
        alphas = fwd.alphas[..., 0]
        betas = backward_scan(_LOG, pot)
        node = _node_marginals(pot, alphas, betas)
        edge = _edge_marginals(pot, alphas, betas)
        expected = (node * pot.emissions).sum((1, 2))
        expected = expected + (node * pot.is_first[..., None] * pot.start).sum((1, 2))
        expected = expected + (node * pot.is_last[..., None] * pot.end).sum((1, 2))
        expected = expected + (edge * pot.edge_transitions()).sum((1, 2, 3))
        return fwd.total[:, 0] - expected
