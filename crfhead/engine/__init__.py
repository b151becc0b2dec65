"""The linear-chain engine: one dynamic program, any semiring, three backends, behind these functions.

The chain distributive law (the generalised distributive law of Aji and McEliece, 2000, on a chain:
every marginal and max-marginal from one forward and one backward recursion) gives every quantity;
only ⊕ changes
(:mod:`~crfhead.engine.semiring`). The functions here take
:class:`~crfhead.engine.potentials.ChainPotentials` (built and validated by
:func:`~crfhead.engine.potentials.make_potentials`) and return tensors; each is one line of the op
table (:mod:`~crfhead.engine.table`), whose :func:`run` chooses the backend
(:mod:`~crfhead.engine.backends`), falls back to the portable scan for an op the backend does not
fuse and differentiates by the op's rule. They run with autocast off, so recursions are in float32
(float64 when given float64).

* ``log_partition``, ``nll``, ``score``: ``log Z``, the CRF loss and the score of given paths; the
  first two through the one autograd function, whose gradient is the marginals (minus the gold counts);
* ``marginals``, ``edge_marginals``, ``max_marginals``, ``entropy``;
* ``viterbi``, ``topk``, ``posterior_decode`` (minimum-Bayes-risk: the Bayes decision for the
  Hamming loss), ``sample``.

Every function takes ``backend=``; each runs as one fused call (or two) on the ``cpu`` backend; the
marginals, edge marginals, max-marginals and entropy of potentials that require gradients keep the
fused value and get their gradient from the portable op.

Layers below, imported one way: :mod:`~crfhead.engine.table` → :mod:`~crfhead.engine.backends`
(select, autograd, portable, cpu, triton) → :mod:`~crfhead.engine.decode` →
:mod:`~crfhead.engine.scan` → :mod:`~crfhead.engine.semiring`, :mod:`~crfhead.engine.potentials` →
:mod:`crfhead.numerics`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

import torch
from torch import Tensor

from crfhead.checks import require_int
from crfhead.engine import decode, scan
from crfhead.engine.potentials import (
    ChainPotentials,
    check_tag_range,
    constrain,
    make_potentials,
    restrict,
)
from crfhead.engine.table import OPS, run
from crfhead.numerics import no_autocast

__all__ = [
    "OPS",
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
    "restrict",
    "run",
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

    def wrapped(pot: ChainPotentials, /, *args: P.args, **kwargs: P.kwargs) -> R:
        em = pot.emissions
        if not torch.is_autocast_enabled("cpu" if em.is_cpu else em.device.type):  # the common case
            return fn(pot, *args, **kwargs)
        with no_autocast(em.device):
            return fn(pot, *args, **kwargs)

    functools.update_wrapper(wrapped, fn)
    return wrapped


@_autocast_off
def log_partition(pot: ChainPotentials, backend: str | None = None) -> Tensor:
    """``log Z`` of each chain, ``(B,)``: the log-sum-exp of every path's score (0 for empty rows).

    Differentiable; the gradient with respect to the emissions is the node marginals.

    Args:
        pot: the chain potentials.
        backend: ``"portable"``, ``"cpu"``, ``"triton"`` or ``"auto"`` (default: see
            :mod:`crfhead.engine.backends.select`).
    """
    out: Tensor = run("log_partition", pot, backend=backend)
    return out


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
    out: tuple[Tensor, Tensor] = run("nll", pot, tags, backend=backend)
    return out


@_autocast_off
def marginals(pot: ChainPotentials, backend: str | None = None) -> Tensor:
    """Node marginals ``p(z_t = k | x)``, ``(B, T, K)``; 0 at masked positions.

    Computed by an explicit forward-backward (works under ``torch.inference_mode``): one fused call on
    the ``cpu``/``triton`` backends (the ``crfhead::marginals`` dispatcher op on CPU, eager or traced), or the
    portable recursions. Differentiable: with potentials that require gradients the fused value's
    backward recomputes the portable recursions under autograd.
    """
    out: Tensor = run("marginals", pot, backend=backend)
    return out


@_autocast_off
def edge_marginals(pot: ChainPotentials, backend: str | None = None) -> Tensor:
    """Edge marginals, ``(B, T-1, K, K)``.

    Entry ``[b, t-1, i, j]`` is p(tag i at the previous unmasked position, tag j at ``t``); 0 where
    ``t`` is masked or has no unmasked predecessor. One fused call on the ``cpu`` backend;
    differentiable as :func:`marginals` is.
    """
    out: Tensor = run("edge_marginals", pot, backend=backend)
    return out


@_autocast_off
def max_marginals(pot: ChainPotentials, backend: str | None = None) -> Tensor:
    """Max-marginals ``mu_t(k) = max_{z: z_t = k} p(z | x)``, ``(B, T, K)``; 0 at masked positions.

    The max-product ``alpha_t + beta_t`` (the chain distributive law in the max semiring) over ``Z``: equal to ``p(viterbi path)`` along that path.
    Fused on the ``cpu`` backend (max-sums and ``log Z``, two calls); differentiable as
    :func:`marginals` is.
    """
    out: Tensor = run("max_marginals", pot, backend=backend)
    return out


@_autocast_off
def entropy(pot: ChainPotentials, backend: str | None = None) -> Tensor:
    """Entropy ``H(p(z | x))`` in nats, ``(B,)``: ``log Z - E[score(z)]`` from the marginals; 0 if empty.

    One fused forward-backward on the ``cpu`` and ``triton`` backends; differentiable as
    :func:`marginals` is.
    """
    out: Tensor = run("entropy", pot, backend=backend)
    return out


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
    out: tuple[Tensor, Tensor] = run("viterbi", pot, backend=backend)
    return out


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

    Raises:
        ValueError: ``k`` is not an int ``>= 1`` (a ``bool`` is not an int here).
    """
    if isinstance(k, int) and not isinstance(k, bool) and k < 1:
        raise ValueError(f"k-best needs k >= 1, got k={k}")
    k = require_int("k", k, at_least=1)
    out: tuple[Tensor, Tensor] = run("topk", pot, k, backend=backend)
    return out


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
    if isinstance(num_samples, int) and not isinstance(num_samples, bool) and num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    num_samples = require_int("num_samples", num_samples, at_least=1)
    out: Tensor = run("sample", pot, num_samples, generator, backend=backend)
    return out
