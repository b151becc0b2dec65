"""Decoders over a chain: Viterbi, k-best, posterior-marginal (minimum-Bayes-risk) decoding, sampling.

* :func:`viterbi` and :func:`topk` run the forward recursion in the max / k-max semiring with
  back-pointers, then a tensorised back-trace (a loop over time only: no loop over the batch, no
  ``.item()``). Theorem 4 (a) of the seed ``000_7c5bc3c5795a6d4c.txt``: the Viterbi path minimises the
  expected sequence (0/1) loss.
* :func:`posterior_decode` takes ``argmax_k p(z_t = k | x)`` at each position, which minimises the expected
  Hamming loss (Theorem 4 (b)); with ``valid_only=True`` it returns the path with the largest expected
  number of correct tags among the paths of non-impossible score (constrained MBR).
* :func:`sample` draws exact samples of ``p(z | x)`` by forward filtering, backward sampling.

Tie-breaking is deterministic: at every back-pointer and at the final tag, the lowest tag index wins
(``torch.max`` semantics).
"""

from __future__ import annotations

import torch
from torch import Tensor

from crfhead.backends import resolve
from crfhead.chain import _fused, forward_scan, marginals, score
from crfhead.numerics import IMPOSSIBLE, is_impossible, no_autocast
from crfhead.potentials import ChainPotentials
from crfhead.semiring import KMaxSemiring, LogSemiring, MaxSemiring, Semiring

__all__ = ["posterior_decode", "sample", "topk", "viterbi"]


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
    return fwd.total, torch.stack(steps[::-1], dim=2)


def viterbi(pot: ChainPotentials, backend: str | None = None) -> tuple[Tensor, Tensor]:
    """The highest-scoring path of each chain (ties: the lowest tag).

    Args:
        pot: the chain potentials.
        backend: ``"portable"``, ``"cpu"``, ``"triton"`` or ``"auto"`` (see :mod:`crfhead.backends`).

    Returns:
        ``(scores, paths)``: ``(B,)`` best score (0 for an empty row; differentiable, as the score of
        the path) and ``(B, T)`` int64 tags, ``-1`` at masked positions.
    """
    with no_autocast(pot.emissions.device):
        name = resolve(pot.emissions.device, backend)
        if name != "portable":
            fused = _fused(name)
            scores, paths = fused.viterbi(pot)
            tensors = (pot.emissions, pot.transitions, pot.start, pot.end)
            if torch.is_grad_enabled() and any(x.requires_grad for x in tensors):
                scores = score(pot, paths)
            return scores, paths
        best, all_paths = _best_paths(MaxSemiring(), pot)
    return best[:, 0], all_paths[:, 0]


def topk(pot: ChainPotentials, k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` highest-scoring paths of each chain, best first.

    Paths that do not exist (fewer than ``k`` paths) or that go through an ``IMPOSSIBLE`` potential are
    reported as missing: score ``-inf`` and path all ``-1``. An empty row has one path, the empty one,
    of score 0.

    Returns:
        ``(scores, paths)``: ``(B, k)`` and ``(B, k, T)`` int64 (``-1`` at masked positions).
    """
    with no_autocast(pot.emissions.device):
        scores, paths = _best_paths(KMaxSemiring(k), pot)
    missing = is_impossible(scores)
    scores = torch.where(missing, torch.full_like(scores, float("-inf")), scores)
    paths = torch.where(missing[..., None], torch.full_like(paths, -1), paths)
    return scores, paths


def posterior_decode(
    pot: ChainPotentials, valid_only: bool = False, backend: str | None = None
) -> Tensor:
    """Posterior-marginal (minimum-Bayes-risk) decoding, ``(B, T)`` int64, ``-1`` at masked positions.

    Args:
        pot: the chain potentials.
        valid_only: instead of the per-position argmax (which may string together a forbidden bigram),
            return the path of largest expected number of correct tags ``sum_t gamma_t(z_t)`` among
            paths that use no ``IMPOSSIBLE`` start, transition or end.
        backend: the engine backend for the marginals and the constrained Viterbi.
    """
    with no_autocast(pot.emissions.device):
        gamma = marginals(pot, backend=backend)  # (B, T, K)
        if not valid_only:
            best = gamma.argmax(dim=-1)
            return torch.where(pot.mask, best, torch.full_like(best, -1))

        def gate(x: Tensor) -> Tensor:
            return torch.where(
                is_impossible(x), torch.full_like(x, IMPOSSIBLE), torch.zeros_like(x)
            )

        mea = ChainPotentials(
            emissions=gamma,
            transitions=gate(pot.transitions),
            start=gate(pot.start),
            end=gate(pot.end),
            mask=pot.mask,
        )
        return viterbi(mea, backend=backend)[1]


def _gumbel_argmax(logits: Tensor, generator: torch.Generator | None) -> Tensor:
    """One exact sample per row of ``softmax(logits)`` by the Gumbel-max trick, over the last dim."""
    u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=logits.dtype)
    tiny = torch.finfo(logits.dtype).tiny
    gumbel = -torch.log(-torch.log(u.clamp(min=tiny, max=1.0 - 1e-7)))
    return (logits + gumbel).argmax(dim=-1)


def sample(
    pot: ChainPotentials, num_samples: int, generator: torch.Generator | None = None
) -> Tensor:
    """Exact samples of ``p(z | x)`` by forward filtering, backward sampling.

    Args:
        pot: the chain potentials.
        num_samples: ``S``, samples per chain.
        generator: optional random generator on the potentials' device.

    Returns:
        ``(S, B, T)`` int64 paths, ``-1`` at masked positions.
    """
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    B, T, K = pot.shape
    S = num_samples
    with no_autocast(pot.emissions.device):
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
        return torch.stack(steps[::-1], dim=2)
