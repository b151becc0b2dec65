"""Decoders over a chain, portable PyTorch: Viterbi, k-best, the MBR chain, sampling.

* :func:`viterbi` and :func:`topk` run the forward recursion in the max / k-max semiring with
  back-pointers, then a tensorised back-trace (a loop over time only: no loop over the batch, no
  ``.item()``). The Viterbi path is the Bayes decision for the sequence (0/1) loss: it minimises the
  expected number of wrong sequences.
* :func:`mbr_potentials` is the chain whose Viterbi path is the constrained posterior-marginal
  (minimum-Bayes-risk) decoding: the path of most expected correct tags ``sum_t gamma_t(z_t)`` among
  those of non-impossible score (the Bayes decision for the Hamming loss among allowed paths; the
  engine's ``posterior_decode`` uses it).
* :func:`sample` draws exact samples of ``p(z | x)`` by forward filtering, backward sampling.

Tie-breaking is deterministic: at every back-pointer and at the final tag, the lowest tag index wins
(``torch.max`` semantics).
"""

from __future__ import annotations

import torch
from torch import Tensor

from crfhead.engine.potentials import ChainPotentials
from crfhead.engine.scan import forward_scan
from crfhead.engine.semiring import KMaxSemiring, LogSemiring, MaxSemiring, Semiring
from crfhead.numerics import IMPOSSIBLE, is_impossible

__all__ = ["mbr_potentials", "sample", "topk", "viterbi"]


def _best_paths(semiring: Semiring, pot: ChainPotentials) -> tuple[Tensor, Tensor]:
    """Forward max-type scan and back-trace: scores ``(B, R)`` and paths ``(B, R, T)``."""
    B, T, K = pot.shape
    R = semiring.ranks
    fwd = forward_scan(semiring, pot)
    assert fwd.final_indices is not None  # max-type semirings always return indices
    tag = fwd.final_indices // R  # (B, R)
    rank = fwd.final_indices % R
    steps: list[Tensor] = []
    follow = pot.mask & pot.has_prev  # positions whose back-pointer leads somewhere
    for t in reversed(range(T)):
        on = pot.mask[:, t, None]
        steps.append(torch.where(on, tag, torch.full_like(tag, -1)))
        if t > 0 and R == 1:  # Viterbi: no ranks to follow
            tag = torch.where(follow[:, t, None], fwd.pointers[t][..., 0].gather(1, tag), tag)
        elif t > 0:
            flat = fwd.pointers[t].reshape(B, K * R).gather(1, tag * R + rank)  # (B, R)
            go = follow[:, t, None]
            tag = torch.where(go, flat // R, tag)
            rank = torch.where(go, flat % R, rank)
    if T == 0:
        return fwd.total, torch.full((B, R, 0), -1, dtype=torch.long, device=pot.mask.device)
    paths = torch.stack(steps[::-1], dim=2)
    # A score of -inf is a path that does not exist (every path of the row, or all but fewer than
    # R, is forbidden): its back-trace followed arbitrary pointers, so it is erased.
    missing = is_impossible(fwd.total)
    return fwd.total, torch.where(missing[..., None], torch.full_like(paths, -1), paths)


def viterbi(pot: ChainPotentials) -> tuple[Tensor, Tensor]:
    """:func:`crfhead.engine.viterbi` on the portable backend: the max scan and its back-trace."""
    best, all_paths = _best_paths(MaxSemiring(), pot)
    return best[:, 0], all_paths[:, 0]


def topk(pot: ChainPotentials, k: int) -> tuple[Tensor, Tensor]:
    """:func:`crfhead.engine.topk`: the k-max scan and its back-trace (missing paths: ``-inf``, ``-1``)."""
    return _best_paths(KMaxSemiring(k), pot)


def mbr_potentials(pot: ChainPotentials, gamma: Tensor) -> ChainPotentials:
    """The chain whose best path maximises ``sum_t gamma_t(z_t)`` over the paths ``pot`` allows.

    Args:
        pot: the chain potentials (their forbidden emissions, starts, transitions and ends are kept).
        gamma: ``(B, T, K)`` node marginals of ``pot``.
    """

    def gate(x: Tensor) -> Tensor:
        return torch.where(is_impossible(x), torch.full_like(x, IMPOSSIBLE), torch.zeros_like(x))

    return ChainPotentials(
        emissions=torch.where(is_impossible(pot.emissions), IMPOSSIBLE, gamma),
        transitions=gate(pot.transitions),
        start=gate(pot.start),
        end=gate(pot.end),
        mask=pot.mask,
    )


def _gumbel_argmax(logits: Tensor, generator: torch.Generator | None) -> Tensor:
    """One exact sample per row of ``softmax(logits)`` by the Gumbel-max trick, over the last dim."""
    u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=logits.dtype)
    tiny = torch.finfo(logits.dtype).tiny
    gumbel = -torch.log(-torch.log(u.clamp(min=tiny, max=1.0 - 1e-7)))
    return (logits + gumbel).argmax(dim=-1)


def sample(
    pot: ChainPotentials, num_samples: int, generator: torch.Generator | None = None
) -> Tensor:
    """:func:`crfhead.engine.sample`: forward filtering, then backward sampling by Gumbel-max."""
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    B, T, K = pot.shape
    S = num_samples
    alphas = forward_scan(LogSemiring(), pot).alphas[..., 0]  # (B, T, K)
    if T == 0:
        return torch.full((S, B, 0), -1, dtype=torch.long, device=pot.mask.device)
    z = _gumbel_argmax((alphas[:, -1] + pot.end).expand(S, B, K), generator)  # (S, B)
    follow = pot.mask & pot.has_prev
    steps: list[Tensor] = []
    batch = torch.arange(B, device=pot.mask.device)
    for t in reversed(range(T)):
        steps.append(torch.where(pot.mask[None, :, t], z, torch.full_like(z, -1)))
        if t > 0:
            trans = pot.transitions_into(t)
            into = trans.T[z] if trans.dim() == 2 else trans.transpose(1, 2)[batch, z]
            prev = _gumbel_argmax(alphas[:, t - 1] + into, generator)  # into: (S, B, K_from)
            z = torch.where(follow[None, :, t], prev, z)
    paths = torch.stack(steps[::-1], dim=2)
    none = ~(alphas[:, -1] + pot.end > float("-inf")).any(-1) & pot.nonempty  # no valid path, (B,)
    return torch.where(none[None, :, None], torch.full_like(paths, -1), paths)
