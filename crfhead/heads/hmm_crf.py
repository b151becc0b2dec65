"""HMMs and indicator CRFs give the same conditionals (Theorem 3 of *Sequence Labeling: From HMMs to Linear-Chain CRFs*).

An *indicator CRF* scores a path with one weight per transition ``θ[j, k]``, per tag-word pair
``μ[k, w]``, per start tag ``s[k]`` and per end tag ``η[k]``: in crfhead, a :class:`~crfhead.heads.crf.CRF`
(``transitions``, ``start_transitions``, ``end_transitions``) on a word-identity encoder
(:class:`~crfhead.encoders.WordWindowEncoder` with ``offsets=(0,)``, whose table is ``μ.T``).

(a) :func:`hmm_to_crf`: an HMM's conditional is the indicator CRF with the log-parameters as weights.
(b) :func:`crf_to_hmm`: conversely, with ``S_k = sum_w e^{μ_kw}``, ``M_jk = e^{θ_jk} S_k``, any
    ``c > ρ(M)`` and ``h = (cI - M)^{-1} e^η > 0``, the HMM

        b_k(w) = e^{μ_kw} / S_k,   a_jk = M_jk h_k / (c h_j),   a_j,stop = e^{η_j} / (c h_j),
        ν_k ∝ e^{s_k} S_k h_k

    has the CRF's conditional for every sentence of every length (the ``h`` factors telescope).

Pure float64 tensor functions. The construction exponentiates the weights: it is exact for weights of
moderate size (|weights| up to a few hundred), which covers every trained indicator CRF we have seen.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from crfhead.engine.potentials import ChainPotentials, make_potentials
from crfhead.heads.hmm import HMMParameters

__all__ = [
    "IndicatorCRFWeights",
    "crf_to_hmm",
    "hmm_potentials",
    "hmm_to_crf",
    "indicator_crf_potentials",
]


@dataclass(frozen=True)
class IndicatorCRFWeights:
    """The weights of an indicator CRF (float64).

    Attributes:
        transitions: ``(K, K)`` ``θ[from, to]``.
        emissions: ``(K, V)`` ``μ[tag, word]``.
        start: ``(K,)`` ``s``.
        end: ``(K,)`` ``η``.
    """

    transitions: Tensor
    emissions: Tensor
    start: Tensor
    end: Tensor


def hmm_to_crf(hmm: HMMParameters) -> IndicatorCRFWeights:
    """Theorem 3(a): the indicator CRF whose weights are the HMM's log-parameters."""
    return IndicatorCRFWeights(
        transitions=hmm.log_transitions.clone(),
        emissions=hmm.log_emissions.clone(),
        start=hmm.log_start.clone(),
        end=hmm.log_end.clone(),
    )


def crf_to_hmm(weights: IndicatorCRFWeights, c: float | None = None) -> HMMParameters:
    """Theorem 3(b): an HMM (with an end state) with the same conditional as the indicator CRF.

    Args:
        weights: real (finite) CRF weights.
        c: any number above the spectral radius ``ρ(M)`` (default ``2 ρ(M)``).

    Raises:
        ValueError: ``c <= ρ(M)``.
    """
    th, mu, s, eta = (
        x.to(torch.float64)
        for x in (weights.transitions, weights.emissions, weights.start, weights.end)
    )
    log_S = torch.logsumexp(mu, dim=1)  # (K,)
    M = (th + log_S[None, :]).exp()  # (K, K): M[j, k] = e^θ[j, k] S_k
    rho = float(torch.linalg.eigvals(M).abs().max())
    if c is None:
        c = 2.0 * rho
    if not c > rho:
        raise ValueError(f"c must exceed the spectral radius rho(M) = {rho:.6g}, got {c}")
    K = M.shape[0]
    eye = torch.eye(K, dtype=M.dtype, device=M.device)
    h = torch.linalg.solve(c * eye - M, eta.exp())  # (K,), positive by the Neumann series
    log_h = h.log()
    log_c = torch.log(torch.tensor(c, dtype=M.dtype, device=M.device))
    log_start = s + log_S + log_h
    return HMMParameters(
        log_start=log_start - torch.logsumexp(log_start, dim=0),
        log_transitions=M.log() + log_h[None, :] - log_c - log_h[:, None],
        log_end=eta - log_c - log_h,
        log_emissions=mu - log_S[:, None],
    )


def hmm_potentials(
    hmm: HMMParameters, words: Tensor, mask: Tensor | None = None
) -> ChainPotentials:
    """The chain of an HMM on word ids ``(B, T)``: ``log Z = log p(x)``, ``p(z) = p(z | x)``."""
    emissions = hmm.log_emissions.T[words]  # (B, T, K)
    return make_potentials(emissions, hmm.log_transitions, hmm.log_start, hmm.log_end, mask)


def indicator_crf_potentials(
    weights: IndicatorCRFWeights, words: Tensor, mask: Tensor | None = None
) -> ChainPotentials:
    """The chain of an indicator CRF on word ids ``(B, T)``."""
    emissions = weights.emissions.T[words]  # (B, T, K)
    return make_potentials(emissions, weights.transitions, weights.start, weights.end, mask)
