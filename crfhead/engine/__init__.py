"""The linear-chain engine: one dynamic program, any semiring, three backends, behind these functions.

Theorem 1 of the seed ``000_7c5bc3c5795a6d4c.txt`` (the chain distributive law) gives every quantity
from one forward and one backward recursion; only ⊕ changes (:mod:`~crfhead.engine.semiring`). The
functions here take :class:`~crfhead.engine.potentials.ChainPotentials` (built and validated by
:func:`~crfhead.engine.potentials.make_potentials`) and return tensors; they choose a backend
(:mod:`~crfhead.engine.backends`) and run with autocast off, so recursions are in float32 (float64
when given float64).

* ``log_partition``, ``nll``, ``score``: ``log Z``, the CRF loss and the score of given paths; the
  first two through the one autograd function, whose gradient is the marginals (minus the gold counts);
* ``marginals``, ``edge_marginals``, ``max_marginals``, ``entropy``;
* ``viterbi``, ``topk``, ``posterior_decode`` (minimum-Bayes-risk, Theorem 4), ``sample``.

Layers below, imported one way: :mod:`~crfhead.engine.backends` (select, autograd, portable, cpu,
triton) → :mod:`~crfhead.engine.decode` → :mod:`~crfhead.engine.scan` →
:mod:`~crfhead.engine.semiring`, :mod:`~crfhead.engine.potentials` → :mod:`crfhead.numerics`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

import torch
from torch import Tensor

from crfhead.engine import decode, scan
from crfhead.engine.backends import autograd
from crfhead.engine.backends.select import kernel, resolve
from crfhead.engine.potentials import ChainPotentials, check_tag_range, constrain, make_potentials
from crfhead.numerics import no_autocast

__all__ = [
    "ChainPotentials",
    "check_tag_range",
    "constrain",
    "edge_marginals",
    "entropy",
    "log_partition",
    "make_potentials",
    "marginals",
    "max_marginals",
    "nll",
    "posterior_decode",
    "sample",
    "score",
    "topk",
    "viterbi",
]

P = ParamSpec("P")
R = TypeVar("R")


def _autocast_off(
    fn: Callable[Concatenate[ChainPotentials, P], R],
) -> Callable[Concatenate[ChainPotentials, P], R]:
    """Run ``fn(pot, ...)`` with autocast off on the potentials' device."""

    def run(pot: ChainPotentials, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with no_autocast(pot.emissions.device):
            return fn(pot, *args, **kwargs)

    functools.update_wrapper(run, fn)
    return run


@_autocast_off
def log_partition(pot: ChainPotentials, backend: str | None = None) -> Tensor:
    """``log Z`` of each chain, ``(B,)``: the log-sum-exp of every path's score (0 for empty rows).

    Differentiable; the gradient with respect to the emissions is the node marginals.

    Args:
        pot: the chain potentials.
        backend: ``"portable"``, ``"cpu"``, ``"triton"`` or ``"auto"`` (default: see
            :mod:`crfhead.engine.backends.select`).
    """
    return autograd.log_partition(kernel(resolve(pot.emissions.device, backend)), pot)


def score(pot: ChainPotentials, tags: Tensor) -> Tensor:
    """Score of the given paths, ``(B,)``: start + emissions + transitions + end over unmasked positions.

    Args:
        pot: the chain potentials.
        tags: ``(B, T)`` int64; entries at masked positions are ignored (``-100`` padding is fine).
    """
    return scan.score(pot, tags)


@_autocast_off
def nll(pot: ChainPotentials, tags: Tensor, backend: str | None = None) -> tuple[Tensor, Tensor]:
    """The CRF loss per chain and the gold score: ``(log Z - score(tags), score(tags))``, each ``(B,)``.

    The first is differentiable, its gradient the marginals minus the gold path's indicators, both
    from one backend call; the gold score carries no gradient.

    Args:
        pot: the chain potentials.
        tags: ``(B, T)`` int64, in ``[0, K)`` at unmasked positions (ignored elsewhere).
        backend: see :mod:`crfhead.engine.backends.select`.

    Raises:
        ValueError: an unmasked tag outside ``[0, K)``.
    """
    return autograd.nll(kernel(resolve(pot.emissions.device, backend)), pot, tags)


@_autocast_off
def marginals(pot: ChainPotentials, backend: str | None = None) -> Tensor:
    """Node marginals ``p(z_t = k | x)``, ``(B, T, K)``; 0 at masked positions.

    Computed by an explicit forward-backward (works under ``torch.inference_mode``): one fused call on
    the ``cpu``/``triton`` backends, or the portable recursions, which are differentiable by autograd
    (used whenever the potentials require gradients and gradients are enabled).
    """
    name = resolve(pot.emissions.device, backend)
    if name == "portable" or pot.differentiable:
        return scan.marginals(pot)
    return kernel(name).marginals(pot)


@_autocast_off
def edge_marginals(pot: ChainPotentials) -> Tensor:
    """Edge marginals, ``(B, T-1, K, K)``.

    Entry ``[b, t-1, i, j]`` is p(tag i at the previous unmasked position, tag j at ``t``); 0 where
    ``t`` is masked or has no unmasked predecessor.
    """
    return scan.edge_marginals(pot)


@_autocast_off
def max_marginals(pot: ChainPotentials) -> Tensor:
    """Max-marginals ``mu_t(k) = max_{z: z_t = k} p(z | x)``, ``(B, T, K)``; 0 at masked positions.

    Theorem 1 (b) in the max semiring, divided by ``Z``: equal to ``p(viterbi path)`` along that path.
    """
    return scan.max_marginals(pot)


@_autocast_off
def entropy(pot: ChainPotentials) -> Tensor:
    """Entropy ``H(p(z | x))`` in nats, ``(B,)``: ``log Z - E[score(z)]`` from the marginals; 0 if empty."""
    return scan.entropy(pot)


@_autocast_off
def viterbi(pot: ChainPotentials, backend: str | None = None) -> tuple[Tensor, Tensor]:
    """The highest-scoring path of each chain (ties: the lowest tag).

    Args:
        pot: the chain potentials.
        backend: ``"portable"``, ``"cpu"``, ``"triton"`` or ``"auto"``.

    Returns:
        ``(scores, paths)``: ``(B,)`` best score (0 for an empty row; differentiable, as the score of
        the path) and ``(B, T)`` int64 tags, ``-1`` at masked positions. A row none of whose paths is
        allowed (every one uses a ``-inf`` score) has score ``-inf`` and path all ``-1``.
    """
    name = resolve(pot.emissions.device, backend)
    if name == "portable":
        return decode.viterbi(pot)
    scores, paths = kernel(name).viterbi(pot)
    if pot.differentiable:
        found = scores > float("-inf")
        scores = torch.where(found, scan.score(pot, paths.clamp(min=0)), scores)
    return scores, paths


@_autocast_off
def topk(pot: ChainPotentials, k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` highest-scoring paths of each chain, best first.

    Paths that do not exist (the row has fewer than ``k`` allowed paths: paths through a ``-inf``
    score are not paths) are reported as missing: score ``-inf`` and path all ``-1``; every path
    returned with a finite score exists, however low that score. An empty row has one path, the empty
    one, of score 0.

    Returns:
        ``(scores, paths)``: ``(B, k)`` and ``(B, k, T)`` int64 (``-1`` at masked positions).
    """
    return decode.topk(pot, k)


@_autocast_off
def posterior_decode(
    pot: ChainPotentials, valid_only: bool = False, backend: str | None = None
) -> Tensor:
    """Posterior-marginal (minimum-Bayes-risk) decoding, ``(B, T)`` int64, ``-1`` at masked positions.

    Args:
        pot: the chain potentials.
        valid_only: instead of the per-position argmax (which may string together a forbidden bigram),
            return the path of largest expected number of correct tags ``sum_t gamma_t(z_t)`` among
            paths that use no forbidden (``-inf``) emission, start, transition or end.
        backend: the engine backend for the marginals and the constrained Viterbi.
    """
    gamma = marginals(pot, backend=backend)  # (B, T, K)
    if not valid_only:
        best = gamma.argmax(dim=-1)
        return torch.where(pot.mask, best, torch.full_like(best, -1))
    return viterbi(decode.mbr_potentials(pot, gamma), backend=backend)[1]


@_autocast_off
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
    return decode.sample(pot, num_samples, generator)
