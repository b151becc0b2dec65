"""float64 references for the ops pytorch-crf lacks: a plain forward-backward, position by position.

The arbiter of a disagreement on ``edge_marginals``, ``entropy``, ``max_marginals`` and ``topk``
(pytorch-crf's own float64 code, :func:`bench.anchors.torchcrf_float64`, covers the other ops). It
is written from the definitions and shares no code with crfhead or torch-struct: ``alpha_t(k)``
scores the prefixes ending in tag ``k`` at ``t`` (its emission included), ``beta_t(k)`` the
suffixes after ``t`` (the end score included); a masked position carries the previous value on.
Masks must be left-aligned (every case's are). A loop over ``T`` in float64 on the CPU: seconds at
the largest sizes, run only at a disagreement.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from bench.adapter import K_BEST
from bench.cases import Inputs

Reduce = Callable[[Tensor, int], Tensor]


def logsumexp(x: Tensor, dim: int) -> Tensor:
    return torch.logsumexp(x, dim)


def amax(x: Tensor, dim: int) -> Tensor:
    return x.amax(dim)


def scans(
    em: Tensor, trans: Tensor, start: Tensor, end: Tensor, mask: Tensor, reduce: Reduce
) -> tuple[Tensor, Tensor]:
    """``alpha`` and ``beta``, both ``(B, T, K)``, in the semiring of ``reduce``."""
    T = em.shape[1]
    alphas = [start + em[:, 0]]
    for t in range(1, T):
        new = reduce(alphas[-1][:, :, None] + trans[None], 1) + em[:, t]
        alphas.append(torch.where(mask[:, t, None], new, alphas[-1]))
    betas = [end.expand_as(em[:, 0])]
    for t in reversed(range(T - 1)):
        new = reduce(trans[None] + (em[:, t + 1] + betas[-1])[:, None, :], 2)
        betas.append(torch.where(mask[:, t + 1, None], new, betas[-1]))
    return torch.stack(alphas, 1), torch.stack(betas[::-1], 1)


def kbest_scores(
    em: Tensor, trans: Tensor, start: Tensor, end: Tensor, mask: Tensor, k: int
) -> Tensor:
    """Scores ``(B, k)`` of the ``k`` best paths, best first (``-inf`` where fewer exist)."""
    B, T, K = em.shape

    def best(x: Tensor) -> Tensor:  # the k largest along the last dim, -inf padded
        top = x.topk(min(k, x.shape[-1]), dim=-1).values
        return torch.cat([top, top.new_full((*top.shape[:-1], k - top.shape[-1]), -torch.inf)], -1)

    alpha = torch.full((B, K, k), -torch.inf, dtype=em.dtype)
    alpha[:, :, 0] = start + em[:, 0]
    for t in range(1, T):
        cand = alpha[:, :, None, :] + trans[None, :, :, None]  # (B, K_from, K_to, k)
        new = best(cand.permute(0, 2, 1, 3).reshape(B, K, K * k)) + em[:, t, :, None]
        alpha = torch.where(mask[:, t, None, None], new, alpha)
    return best((alpha + end[None, :, None]).reshape(B, K * k))


def chain_float64(inp: Inputs, k: int = K_BEST) -> dict[str, Tensor]:
    """``edge_marginals``, ``entropy``, ``max_marginals`` and ``topk_scores`` in float64 (CPU)."""
    em = inp.emissions.cpu().double()
    p = {name: v.cpu().double() for name, v in inp.params.items()}
    trans, start, end = p["transitions"], p["start_transitions"], p["end_transitions"]
    mask, lengths = inp.mask.cpu(), inp.lengths.cpu()
    alpha, beta = scans(em, trans, start, end, mask, logsumexp)
    last = alpha[torch.arange(em.shape[0]), lengths - 1]  # (B, K)
    logz = torch.logsumexp(last + end, -1)
    node = torch.where(mask[..., None], (alpha + beta - logz[:, None, None]).exp(), 0.0)
    pair = alpha[:, :-1, :, None] + trans + (em[:, 1:] + beta[:, 1:])[:, :, None, :]
    edge = torch.where(mask[:, 1:, None, None], (pair - logz[:, None, None, None]).exp(), 0.0)
    expected = (
        (node * em).sum((1, 2))
        + node[:, 0] @ start
        + (edge * trans).sum((1, 2, 3))
        + (last + end - logz[:, None]).exp() @ end
    )
    amax_alpha, amax_beta = scans(em, trans, start, end, mask, amax)
    max_marg = (amax_alpha + amax_beta - logz[:, None, None]).exp()
    return {
        "edge_marginals": edge,
        "entropy": logz - expected,
        "max_marginals": torch.where(mask[..., None], max_marg, 0.0),
        "topk_scores": kbest_scores(em, trans, start, end, mask, k),
    }
