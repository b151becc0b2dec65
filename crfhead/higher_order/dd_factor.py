"""Per-factor ("naive") dual decomposition (Komodakis 2011; the seed's baseline), vectorised in torch.

One slave is the chains (Viterbi on every sentence, one engine call); every pattern ``p`` is a slave of
its own over the labels of its tokens, with multipliers ``θ_p`` ``(cells, K)``:

    slave_p(θ_p) = max_y  s_p·1[y matches p] - Σ_cells θ_p[cell, y_cell].

Its maximum is the better of the pattern's own labels (``s_p - Σ θ_p[cell, k_cell]``) and the best
other assignment: the unconstrained per-token argmax of ``-θ_p``, or, when that argmax *is* the pattern,
the argmax with the token of smallest first-to-second gap switched to its second label. So every slave
of the group is solved at once on ``(P, S, K)`` tensors (``S`` the largest pattern, padded), on the
device the emissions are on. ``L(θ) = chains(Σ_p θ_p) + Σ_p slave_p(θ_p) >= OPT`` exactly; the
subgradient for ``θ_p[cell, k]`` is ``1[y*_cell = k] - 1[y_p cell = k]``, the steps as in
:mod:`~crfhead.higher_order.dd2slave` (Polyak by default).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from crfhead.higher_order.group import Group, viterbi_rows
from crfhead.higher_order.result import DecodeResult
from crfhead.higher_order.subgradient import Subgradient

__all__ = ["dd_factor"]


def _slaves(theta: Tensor, labels: Tensor, valid: Tensor, score: Tensor) -> tuple[Tensor, Tensor]:
    """Every pattern slave's maximum ``(P,)`` and maximiser ``(P, S)`` (see the module docstring).

    Args:
        theta: ``(P, S, K)`` multipliers (0 on padding cells).
        labels: ``(P, S)`` the pattern's labels (0 on padding).
        valid: ``(P, S)`` bool, real cells.
        score: ``(P,)`` pattern scores.
    """
    P, _, K = theta.shape
    neg = torch.where(valid[..., None], -theta, torch.zeros_like(theta))
    own = score + neg.gather(2, labels[..., None])[..., 0].sum(1)  # (P,)
    if K == 1:
        return own, labels
    top = neg.topk(2, dim=2)
    first, second = top.values[..., 0], top.values[..., 1]  # (P, S)
    best = top.indices[..., 0]  # (P, S)
    free = first.sum(1)  # (P,): the unconstrained maximum of -θ
    is_pattern = ((best == labels) | ~valid).all(1)
    gap = torch.where(valid, first - second, torch.full_like(first, math.inf))
    worst = gap.argmin(1)  # (P,): the cheapest token to move off the pattern
    other = torch.where(is_pattern, free - gap.gather(1, worst[:, None])[:, 0], free)
    moved = best.clone()
    rows = torch.arange(P, device=theta.device)
    moved[rows, worst] = torch.where(is_pattern, top.indices[rows, worst, 1], best[rows, worst])
    take_own = own >= other
    choice = torch.where(take_own[:, None], labels, moved)
    return torch.maximum(own, other), choice


def dd_factor(
    group: Group,
    max_iterations: int = 300,
    step: str = "polyak",
    step_size: float | None = None,
) -> DecodeResult:
    """Decode ``group`` by per-pattern dual decomposition (arguments as :func:`dd2slave`)."""
    if max_iterations < 1:
        raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
    B, T, K = group.shape
    emissions = group.chain.emissions
    device, dtype = emissions.device, emissions.dtype
    tokens, labels, valid, score = group.cells
    P, S = tokens.shape
    theta = torch.zeros(P, S, K, dtype=dtype, device=device)
    flat_tokens = tokens[valid]  # (N,)
    scale = float(score.abs().mean()) if P else 1.0
    loop = Subgradient((B, T), step, step_size, scale, mass=float(score.abs().sum()))
    rows = group.coupled_rows  # the dual and primal are of these sentences plus the patterns
    onehot = torch.eye(K, dtype=dtype, device=device)
    for _ in range(max_iterations):
        shifted = emissions.reshape(B * T, K).index_add(0, flat_tokens, theta[valid])
        row_values, tags = viterbi_rows(group, shifted.reshape(B, T, K))
        chain_value = float(row_values[rows].sum())
        values, choice = _slaves(theta, labels, valid, score)
        chain_labels = tags.reshape(-1).to(device)[tokens]  # (P, S)
        g = (onehot[chain_labels] - onehot[choice]) * valid[..., None]
        dual = chain_value + float(values.sum())
        alpha = loop.record(dual, group.split_score(tags)[0], tags, float((g * g).sum()))
        if alpha is None:
            break
        theta = theta - alpha * g
    return loop.result("dd_factor", offset=group.split_score(loop.best_tags)[1])
