"""2-slave dual decomposition (Qian & Liu, TACL 2014, §3).

The group's score splits into the chains and the non-local patterns. With multipliers ``θ`` on every
``(token, label)`` of the tokens the patterns touch (all labels of those tokens, not only the labels in
patterns):

* slave 1, ``V(θ) = max_y chains(y) + Σ θ_ik 1[y_i = k]``: Viterbi on each sentence;
* slave 2, ``P(θ) = max_{z, w} g̃(z, w) - Σ θ_ik z_ik``: the patterns reparameterised into a supermodular
  quadratic pseudo-Boolean function (:mod:`~crfhead.higher_order.reparam`), maximised by one minimum
  cut (:mod:`~crfhead.higher_order.pseudo_boolean`);

and ``L(θ) = V(θ) + P(θ) - K >= OPT`` for every ``θ`` (weak duality; ``P`` is taken as the cut's
guaranteed upper bound, so the inequality survives the integer capacities). The subgradient is
``1[y*_i = k] - z*_ik``; steps are Polyak's, ``γ (L - best primal) / |g|²`` with ``γ`` halved after 20
iterations without a new best dual, or ``α0 / (1 + #dual increases)``; the bookkeeping, primal recovery
and stopping rules are :mod:`~crfhead.higher_order.subgradient`'s.
"""

from __future__ import annotations

import numpy as np
import torch

from crfhead.higher_order.group import Group, add_to_cells, viterbi_rows
from crfhead.higher_order.pseudo_boolean import maximize
from crfhead.higher_order.reparam import reparameterise
from crfhead.higher_order.result import DecodeResult
from crfhead.higher_order.subgradient import Subgradient

__all__ = ["dd2slave"]


def dd2slave(
    group: Group,
    max_iterations: int = 300,
    step: str = "polyak",
    step_size: float | None = None,
    backend: str = "scipy",
) -> DecodeResult:
    """Decode ``group`` by 2-slave dual decomposition.

    Args:
        group: the prepared group (:func:`~crfhead.higher_order.group.prepare`).
        max_iterations: the iteration cap.
        step: ``"polyak"`` or ``"diminishing"`` (see the module docstring).
        step_size: ``γ``'s start for Polyak (default 1), ``α0`` for the diminishing rule (default: the
            mean absolute pattern score).
        backend: the pattern slave's max-flow: ``"scipy"`` (the default), ``"ortools"`` (the optional
            package, several times faster per iteration) or ``"auto"`` (``"ortools"`` when installed);
            see :func:`~crfhead.higher_order.pseudo_boolean.maximize`.
    """
    if max_iterations < 1:
        raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
    B, T, K = group.shape
    emissions = group.chain.emissions
    rep = reparameterise(group.token_patterns(), K)
    V = rep.coupled.shape[0]
    tokens = torch.as_tensor(rep.coupled[:, 0], dtype=torch.long, device=emissions.device)
    labels = torch.as_tensor(rep.coupled[:, 1], dtype=torch.long, device=emissions.device)
    base = rep.pb.linear.copy()
    theta = np.zeros(V)
    magnitudes = [abs(p.score) for p in group.patterns]
    scale = float(np.mean(magnitudes or [1.0]))
    loop = Subgradient((B, T), step, step_size, scale, mass=float(sum(magnitudes)))
    rows = group.coupled_rows  # the dual and primal are of these sentences plus the patterns
    # The chain slave's labelling often repeats between iterations: its full score is then reused.
    last_tags: torch.Tensor | None = None
    last_score = 0.0
    for _ in range(max_iterations):
        theta_t = torch.as_tensor(theta, dtype=emissions.dtype, device=emissions.device)
        values, tags = viterbi_rows(group, add_to_cells(emissions, tokens, labels, theta_t))
        chain_value = float(values[rows].sum())
        linear = base.copy()
        linear[:V] -= theta
        x, _, bound = maximize(rep.pb.with_linear(linear), backend=backend)
        flat = tags.reshape(-1).cpu().numpy()
        chosen = (flat[rep.coupled[:, 0]] == rep.coupled[:, 1]).astype(np.float64)
        g = chosen - x[:V].astype(np.float64)
        if last_tags is None or not torch.equal(tags, last_tags):
            last_tags, last_score = tags, group.split_score(tags)[0]
        # g is in {-1, 0, 1}: |g|² is the count of its non-zeros, exact (and without BLAS, whose
        # threaded dot product costs milliseconds on a busy machine).
        norm2 = float(np.count_nonzero(g))
        alpha = loop.record(chain_value + bound - rep.constant, last_score, tags, norm2)
        if alpha is None:
            break
        theta -= alpha * g
    return loop.result("dd2slave", offset=group.split_score(loop.best_tags)[1])
