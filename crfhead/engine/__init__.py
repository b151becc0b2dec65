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

Every function takes ``backend=``; each runs as one fused call (or two) on the ``cpu`` backend, and
the portable scan runs where a result must carry autograd history that the fused call does not give
(the marginals, edge marginals, max-marginals and entropy of potentials that require gradients).

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
from crfhead.engine.backends.autograd import Kernel
from crfhead.engine.backends.select import kernel, resolve
from crfhead.engine.potentials import ChainPotentials, check_tag_range, constrain, make_potentials
from crfhead.numerics import is_tracing, no_autocast

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


def _untraced(pot: ChainPotentials, backend: str | None) -> Kernel:
    """The kernel for an op the fused backends run outside tracing only (no custom op for it)."""
    name = resolve(pot.emissions.device, backend)
    return kernel("portable" if is_tracing() else name)


def _differentiable(
    pot: ChainPotentials, k: Kernel, op: Callable[[Kernel, ChainPotentials], Tensor]
) -> Tensor:
    """``op(k, pot)``, differentiable whatever the kernel.

    Where the potentials require gradients and ``k`` is fused, the gradient is the portable op's
    (:func:`~crfhead.engine.backends.autograd.recomputed`).
    """
    portable = kernel("portable")
    if k is portable or not pot.differentiable:
        return op(k, pot)
    return autograd.recomputed(functools.partial(op, k), functools.partial(op, portable), pot)


@_autocast_off
def marginals(pot: ChainPotentials, backend: str | None = None) -> Tensor:
    """Node marginals ``p(z_t = k | x)``, ``(B, T, K)``; 0 at masked positions.

    Computed by an explicit forward-backward (works under ``torch.inference_mode``): one fused call on
    the ``cpu``/``triton`` backends (the ``crfhead::marginals`` op while tracing on CPU), or the
    portable recursions. Differentiable: with potentials that require gradients the fused value's
    backward recomputes the portable recursions under autograd.
    """
    name = resolve(pot.emissions.device, backend)
    if name == "portable" or (is_tracing() and pot.differentiable):
        return scan.marginals(pot)
    return _differentiable(pot, kernel(name), lambda k, p: k.marginals(p))


@_autocast_off
def edge_marginals(pot: ChainPotentials, backend: str | None = None) -> Tensor:
    """Edge marginals, ``(B, T-1, K, K)``.

    Entry ``[b, t-1, i, j]`` is p(tag i at the previous unmasked position, tag j at ``t``); 0 where
    ``t`` is masked or has no unmasked predecessor. One fused call on the ``cpu`` backend;
    differentiable as :func:`marginals` is.
    """
    return _differentiable(pot, _untraced(pot, backend), lambda k, p: k.edge_marginals(p))


def _max_marginals(k: Kernel, pot: ChainPotentials) -> Tensor:
    both, best = k.max_sums(pot)
    log_z = k.forward_backward(pot, marginals=False).value
    with k.glue(pot):
        return scan.max_marginals_from(pot, both, best, log_z)


@_autocast_off
def max_marginals(pot: ChainPotentials, backend: str | None = None) -> Tensor:
    """Max-marginals ``mu_t(k) = max_{z: z_t = k} p(z | x)``, ``(B, T, K)``; 0 at masked positions.

    Theorem 1 (b) in the max semiring, divided by ``Z``: equal to ``p(viterbi path)`` along that path.
    Fused on the ``cpu`` backend (max-sums and ``log Z``, two calls); differentiable as
    :func:`marginals` is.
    """
    return _differentiable(pot, _untraced(pot, backend), _max_marginals)


def _entropy(k: Kernel, pot: ChainPotentials) -> Tensor:
    parts = k.forward_backward(pot, marginals=True, edges=True)
    with k.glue(pot):
        return scan.entropy_from(pot, parts)


@_autocast_off
def entropy(pot: ChainPotentials, backend: str | None = None) -> Tensor:
    """Entropy ``H(p(z | x))`` in nats, ``(B,)``: ``log Z - E[score(z)]`` from the marginals; 0 if empty.

    One fused forward-backward on the ``cpu`` and ``triton`` backends; differentiable as
    :func:`marginals` is.
    """
    return _differentiable(pot, _untraced(pot, backend), _entropy)


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
def topk(pot: ChainPotentials, k: int, backend: str | None = None) -> tuple[Tensor, Tensor]:
    """The ``k`` highest-scoring paths of each chain, best first.

    Paths that do not exist (the row has fewer than ``k`` allowed paths: paths through a ``-inf``
    score are not paths) are reported as missing: score ``-inf`` and path all ``-1``; every path
    returned with a finite score exists, however low that score. An empty row has one path, the empty
    one, of score 0. Ties go to the lowest previous tag on the fused backend; the scores are
    differentiable (the paths' scores) when the potentials require gradients.

    Returns:
        ``(scores, paths)``: ``(B, k)`` and ``(B, k, T)`` int64 (``-1`` at masked positions).
    """
    if k < 1:
        raise ValueError(f"k-best needs k >= 1, got k={k}")
    name = resolve(pot.emissions.device, backend)
    if name == "portable" or is_tracing():
        return decode.topk(pot, k)
    fused = kernel(name)
    scores, paths = fused.topk(pot, k)
    if pot.differentiable:
        with fused.glue(pot):
            scores = torch.where(scores > float("-inf"), _path_scores(pot, paths), scores)
    return scores, paths


def _path_scores(pot: ChainPotentials, paths: Tensor) -> Tensor:
    """Scores ``(B, R)`` of ``R`` paths per chain ``(B, R, T)`` (differentiable; ``-1`` entries read as 0)."""
    B, R, T = paths.shape
    spread = ChainPotentials(
        pot.emissions.repeat_interleave(R, 0),
        pot.transitions.repeat_interleave(R, 0) if pot.per_position else pot.transitions,
        pot.start,
        pot.end,
        pot.mask.repeat_interleave(R, 0),
    )
    return scan.score(spread, paths.clamp(min=0).reshape(B * R, T)).reshape(B, R)


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
    pot: ChainPotentials,
    num_samples: int,
    generator: torch.Generator | None = None,
    backend: str | None = None,
) -> Tensor:
    """Exact samples of ``p(z | x)``.

    On the ``cpu`` backend, draws from the fused edge marginals (``p(z_t | z_t')`` is an edge
    marginal over a node marginal); on the portable one, forward filtering, backward sampling. The
    two draw different (equally exact) samples from the same generator.

    Args:
        pot: the chain potentials.
        num_samples: ``S``, samples per chain.
        generator: optional random generator on the potentials' device.
        backend: see :mod:`crfhead.engine.backends.select`.

    Returns:
        ``(S, B, T)`` int64 paths, ``-1`` at masked positions (and everywhere for a row with no
        valid path).
    """
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    with torch.no_grad():
        return _untraced(pot, backend).sample(pot, num_samples, generator)
