"""2-slave dual decomposition (seed ``001``, Qian & Liu 2014, §3; the design note's §4).

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
iterations without a new best dual (the paper's halving of the step on a dual increase stalls), or
``α0 / (1 + #dual increases)`` (Rush & Collins 2012). Every iteration scores the chain slave's labelling
under the full objective and keeps the best (primal recovery); the run stops when the slaves agree
(``g = 0``) or the best primal reaches the best dual (a certificate), or at the iteration cap.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from crfhead.higher_order.group import Group, add_to_cells, viterbi_with
from crfhead.higher_order.pseudo_boolean import maximize
from crfhead.higher_order.reparam import reparameterise
from crfhead.higher_order.result import DecodeResult, certifies

__all__ = ["STEPS", "dd2slave"]

STEPS = ("polyak", "diminishing")
_PATIENCE = 20  # Polyak: iterations without a new best dual before γ is halved


def dd2slave(
    group: Group,
    max_iterations: int = 300,
    step: str = "polyak",
    step_size: float | None = None,
) -> DecodeResult:
    """Decode ``group`` by 2-slave dual decomposition.

    Args:
        group: the prepared group (:func:`~crfhead.higher_order.group.prepare`).
        max_iterations: the iteration cap.
        step: ``"polyak"`` or ``"diminishing"`` (see the module docstring).
        step_size: ``γ``'s start for Polyak (default 1), ``α0`` for the diminishing rule (default: the
            mean absolute pattern score).
    """
    if step not in STEPS:
        raise ValueError(f"step must be one of {STEPS}, got {step!r}")
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
    scores = [abs(p.score) for p in group.patterns] or [1.0]
    gamma = 1.0 if step_size is None else float(step_size)
    alpha0 = float(np.mean(scores)) if step_size is None else float(step_size)
    best_dual, best_primal = math.inf, -math.inf
    best_tags = torch.full((B, T), -1, dtype=torch.long)
    duals: list[float] = []
    primals: list[float] = []
    stale, increases = 0, 0
    certified = False
    iteration = 0
    while iteration < max_iterations:
        iteration += 1
        theta_t = torch.as_tensor(theta, dtype=emissions.dtype, device=emissions.device)
        chain_value, tags = viterbi_with(group, add_to_cells(emissions, tokens, labels, theta_t))
        linear = base.copy()
        linear[:V] -= theta
        x, _, bound = maximize(rep.pb.with_linear(linear))
        dual = chain_value + bound - rep.constant
        primal = group.score(tags)
        if primal > best_primal:
            best_primal, best_tags = primal, tags
        if duals and dual > duals[-1]:
            increases += 1
        if dual < best_dual:
            best_dual, stale = dual, 0
        else:
            stale += 1
        duals.append(dual)
        primals.append(best_primal)
        flat = tags.reshape(-1).cpu().numpy()
        chosen = (flat[rep.coupled[:, 0]] == rep.coupled[:, 1]).astype(np.float64)
        g = chosen - x[:V].astype(np.float64)
        norm2 = float(g @ g)
        if norm2 == 0.0 or certifies(best_primal, best_dual):
            # Agreement leaves θ where it is; it certifies up to the cut's rounding slack.
            certified = certifies(best_primal, best_dual)
            break
        if step == "polyak":
            if stale >= _PATIENCE:
                gamma, stale = gamma / 2, 0
            alpha = gamma * (dual - best_primal) / norm2
        else:
            alpha = alpha0 / (1 + increases)
        theta -= alpha * g
    return DecodeResult(
        tags=best_tags,
        primal=best_primal,
        dual=best_dual,
        certified=certified,
        iterations=iteration,
        method="dd2slave",
        dual_history=duals,
        primal_history=primals,
    )
