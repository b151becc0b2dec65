"""Exact MAP of a higher-order CRF by integer linear programming, for validating the decoders (Qian & Liu, TACL 2014).

The seed (Qian & Liu, TACL 2014, "Results") compares its 2-slave dual decomposition against exact
inference by ILP (they used Gurobi); here HiGHS through :func:`scipy.optimize.milp` plays that part,
licence-free. The model is the group's linear chains (one per sentence) plus sparse non-local
:class:`~crfhead.higher_order.patterns.Pattern` factors; the program is the local polytope of the
chains plus one variable per pattern:

* node variables ``y[b, t, k]`` for each unmasked position, ``Σ_k y[b, t, k] = 1``;
* edge variables ``μ[e, k, l]`` for each link ``e`` between consecutive unmasked positions of a row
  (holes in the mask are skipped, as in :func:`crfhead.engine.score`), with
  ``Σ_l μ[e, k, l] = y[prev, k]`` and ``Σ_k μ[e, k, l] = y[cur, l]``;
* per pattern ``j`` with ``n`` cells a variable ``p_j`` in ``[0, 1]``: ``p_j ≤ y[cell]`` for every
  cell when its score is positive, ``p_j ≥ Σ_cells y − (n − 1)`` when it is negative;
* objective (maximised): ``Σ emissions·y + Σ transitions·μ + start·y[first] + end·y[last] + Σ score·p``.

"LP first": the relaxation is solved without integrality; when its node solution is integral it is
a MAP labelling (the LP value bounds every labelling's score). Otherwise the MIP is solved with
integrality on ``y`` only. That is enough: for a one-hot ``y`` the marginalisation constraints leave
each ``μ[e]`` a nonnegative ``K × K`` matrix whose row sums and column sums are one-hot, i.e. the
single entry ``μ[e, prev tag, cur tag] = 1``; and a positive pattern's ``p`` is bounded above by
``min_cells y ∈ {0, 1}`` while the objective pushes it up, a negative one's bounded below by
``max(0, Σ y − (n − 1)) ∈ {0, 1}`` while the objective pushes it down. So at any optimum with
integral ``y`` the objective equals the true score of the labelling, and the MIP optimum is the MAP.
The returned score is recomputed from the tags (:func:`crfhead.engine.score` plus
:func:`~crfhead.higher_order.patterns.pattern_score`), never read off the solver.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array
from torch import Tensor

from crfhead.engine import score as chain_score
from crfhead.engine.potentials import ChainPotentials, make_potentials
from crfhead.higher_order.patterns import Pattern, check_patterns, pattern_score

__all__ = ["ILPResult", "solve_ilp"]

_INTEGRAL_TOL = 1e-9
"""A relaxed node solution is integral when every entry is within this of 0 or 1."""


@dataclass(frozen=True)
class ILPResult:
    """The outcome of :func:`solve_ilp`.

    Attributes:
        tags: ``(B, T)`` int64, ``-1`` at masked positions (on the emissions' device).
        score: the full score of ``tags`` (chains plus the patterns that hold), float64.
        bound: an upper bound on every labelling's score: the LP relaxation's value (equal to
            ``score`` when the LP was integral); with ``lp_first=False``, or when the LP itself ran
            out of time, HiGHS's MIP dual bound (``inf`` when none is known).
        optimal: proven optimal by HiGHS (MIP status optimal, with zero relative and absolute
            gaps, or an integral LP).
        lp_integral: the LP relaxation was solved and its node solution is integral (``False`` when
            ``lp_first=False``).
        seconds: wall-clock time of the whole call.
    """

    tags: Tensor
    score: float
    bound: float
    optimal: bool
    lp_integral: bool
    seconds: float


@dataclass(frozen=True)
class _Program:
    """The program in HiGHS's form: minimise ``c @ x`` s.t. ``lb <= A @ x <= ub``, ``0 <= x <= upper``."""

    c: NDArray[np.float64]
    upper: NDArray[np.float64]  # 1, or 0 for a forbidden (-inf) node or link: excluded structurally
    constraints: LinearConstraint
    n_y: int  # y occupies x[:n_y], node-major (node * K + k)
    nodes: NDArray[np.int64]  # (N, 2): the (b, t) of each node, row-major order


def _validate(
    emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor, mask: Tensor
) -> ChainPotentials:
    """Check the inputs as the engine does, then return float64 potentials on the CPU."""
    for name, x in (("start", start), ("end", end), ("mask", mask)):
        if not isinstance(x, Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    make_potentials(emissions, transitions, start, end, mask)  # shapes, dtypes, devices
    for name, x in (("emissions", emissions), ("transitions", transitions)):
        x = x.detach()
        if bool(torch.isnan(x).any()) or bool(torch.isposinf(x).any()):
            raise ValueError(f"{name} must not hold NaN or +inf (shape {tuple(x.shape)})")
    for name, x in (("start", start), ("end", end)):
        x = x.detach()
        if bool(torch.isnan(x).any()) or bool(torch.isposinf(x).any()):
            raise ValueError(f"{name} must not hold NaN or +inf, got {x.tolist()}")
    cpu = torch.device("cpu")
    # -inf (forbidden) is kept: _build fixes those variables at 0.
    return make_potentials(
        emissions.detach().to(cpu, torch.float64),
        transitions.detach().to(cpu, torch.float64),
        start.detach().to(cpu, torch.float64),
        end.detach().to(cpu, torch.float64),
        mask.detach().to(cpu),
    )


def _build(pot: ChainPotentials, patterns: Sequence[Pattern]) -> _Program:
    B, T, K = pot.shape
    mask = pot.mask.numpy()
    em = pot.emissions.numpy()
    nodes = np.argwhere(mask).astype(np.int64)  # row-major: consecutive nodes of a row are links
    N = len(nodes)
    node_id = np.full((B, T), -1, dtype=np.int64)
    node_id[nodes[:, 0], nodes[:, 1]] = np.arange(N)
    n_y = N * K

    # Objective on y: emissions, plus start on each row's first node and end on its last.
    c_y = em[nodes[:, 0], nodes[:, 1]].copy()  # (N, K)
    same_row = nodes[1:, 0] == nodes[:-1, 0]
    first = np.ones(N, dtype=bool)
    first[1:] = ~same_row
    last = np.ones(N, dtype=bool)
    last[:-1] = ~same_row
    c_y[first] += pot.start.numpy()
    c_y[last] += pot.end.numpy()

    # Links: node i -> node i + 1 within a row; transitions entering the later position.
    prev = np.flatnonzero(same_row)
    cur = prev + 1
    E = len(prev)
    if pot.per_position:
        trans = pot.transitions.numpy()  # (B, T-1, K, K)
        c_mu = trans[nodes[cur, 0], nodes[cur, 1] - 1].reshape(E, K * K)
    else:
        c_mu = np.broadcast_to(pot.transitions.numpy().reshape(1, K * K), (E, K * K))
    n_mu = E * K * K

    active = [p for p in patterns if float(p.score) != 0.0]
    P = len(active)
    c_p = np.array([float(p.score) for p in active], dtype=np.float64)
    c = -np.concatenate([c_y.reshape(-1), c_mu.reshape(-1), c_p])  # milp minimises
    forbidden = np.isinf(c)  # a -inf score: the variable is fixed at 0, whatever the other scores
    upper = np.where(forbidden, 0.0, 1.0)
    c = np.where(forbidden, 0.0, c)

    rows: list[NDArray[np.int64]] = []
    cols: list[NDArray[np.int64]] = []
    vals: list[NDArray[np.float64]] = []
    lbs: list[NDArray[np.float64]] = []
    ubs: list[NDArray[np.float64]] = []
    n_rows = 0

    def add(
        r: NDArray[np.int64],
        cc: NDArray[np.int64],
        v: NDArray[np.float64],
        lo: Any,
        hi: Any,
        m: int,
    ) -> None:
        nonlocal n_rows
        rows.append(r + n_rows)
        cols.append(cc)
        vals.append(v)
        lbs.append(np.broadcast_to(np.asarray(lo, dtype=np.float64), (m,)))
        ubs.append(np.broadcast_to(np.asarray(hi, dtype=np.float64), (m,)))
        n_rows += m

    ks = np.arange(K, dtype=np.int64)
    # Σ_k y[i, k] = 1.
    add(
        np.repeat(np.arange(N, dtype=np.int64), K),
        np.arange(n_y, dtype=np.int64),
        np.ones(n_y),
        1.0,
        1.0,
        N,
    )
    if E:
        e = np.arange(E, dtype=np.int64)
        mu = n_y + (e[:, None, None] * K * K + ks[:, None] * K + ks[None, :])  # (E, k, l)
        # Σ_l μ[e, k, l] − y[prev, k] = 0: row (e, k).
        r_out = (e[:, None] * K + ks[None, :]).reshape(-1)  # (E*K,)
        add(
            np.concatenate([np.repeat(r_out, K), r_out]),
            np.concatenate([mu.reshape(-1), (prev[:, None] * K + ks[None, :]).reshape(-1)]),
            np.concatenate([np.ones(n_mu), -np.ones(E * K)]),
            0.0,
            0.0,
            E * K,
        )
        # Σ_k μ[e, k, l] − y[cur, l] = 0: row (e, l).
        add(
            np.concatenate([np.repeat(r_out, K), r_out]),
            np.concatenate(
                [mu.transpose(0, 2, 1).reshape(-1), (cur[:, None] * K + ks[None, :]).reshape(-1)]
            ),
            np.concatenate([np.ones(n_mu), -np.ones(E * K)]),
            0.0,
            0.0,
            E * K,
        )
    # Patterns: p_j ≤ y[cell] (score > 0), or Σ_cells y − p_j ≤ n − 1 (score < 0).
    pos_r: list[int] = []
    pos_p: list[int] = []
    pos_y: list[int] = []
    neg_r: list[int] = []
    neg_c: list[int] = []
    neg_v: list[float] = []
    neg_hi: list[float] = []
    for j, pat in enumerate(active):
        p_col = n_y + n_mu + j
        ys = [int(node_id[b, t]) * K + k for b, t, k in pat.cells]
        if pat.score > 0:
            for y_col in ys:
                pos_r.append(len(pos_p))
                pos_p.append(p_col)
                pos_y.append(y_col)
        else:
            r = len(neg_hi)
            neg_r.extend([r] * (len(ys) + 1))
            neg_c.extend([*ys, p_col])
            neg_v.extend([1.0] * len(ys) + [-1.0])
            neg_hi.append(float(len(ys) - 1))
    if pos_p:
        m = len(pos_p)
        r_pos = np.asarray(pos_r, dtype=np.int64)
        add(
            np.concatenate([r_pos, r_pos]),
            np.asarray(pos_p + pos_y, dtype=np.int64),
            np.concatenate([np.ones(m), -np.ones(m)]),
            -np.inf,
            0.0,
            m,
        )
    if neg_hi:
        add(
            np.asarray(neg_r, dtype=np.int64),
            np.asarray(neg_c, dtype=np.int64),
            np.asarray(neg_v, dtype=np.float64),
            -np.inf,
            np.asarray(neg_hi),
            len(neg_hi),
        )
    n_x = n_y + n_mu + P
    A = coo_array(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n_rows, n_x)
    ).tocsr()
    cons = LinearConstraint(A, np.concatenate(lbs), np.concatenate(ubs))
    return _Program(c=c, upper=upper, constraints=cons, n_y=n_y, nodes=nodes)


def _solve(prog: _Program, integral: bool, time_limit: float | None) -> Any:
    n_x = len(prog.c)
    integrality = np.zeros(n_x, dtype=np.int64)
    if integral:
        integrality[: prog.n_y] = 1
    options: dict[str, Any] = {"mip_rel_gap": 0.0, "mip_abs_gap": 0.0, "presolve": True}
    if time_limit is not None:
        options["time_limit"] = max(float(time_limit), 1e-3)
    with warnings.catch_warnings():
        # mip_abs_gap is a HiGHS option that scipy passes on but does not list (so it warns);
        # HiGHS's default absolute gap of 1e-6 would let "optimal" be 1e-6 short of the MAP.
        warnings.filterwarnings("ignore", message="Unrecognized options", category=RuntimeWarning)
        return milp(
            prog.c,
            integrality=integrality,
            bounds=Bounds(np.zeros(n_x), prog.upper),
            constraints=[prog.constraints],
            options=options,
        )


def _tags_from(
    y: NDArray[np.float64], prog: _Program, shape: tuple[int, int], K: int
) -> NDArray[np.int64]:
    tags = np.full(shape, -1, dtype=np.int64)
    if len(prog.nodes):
        best = np.asarray(y[: prog.n_y], dtype=np.float64).reshape(-1, K).argmax(axis=1)
        tags[prog.nodes[:, 0], prog.nodes[:, 1]] = best
    return tags


def _is_integral(y: NDArray[np.float64]) -> bool:
    return bool(np.all(np.abs(y - np.round(y)) <= _INTEGRAL_TOL))


def solve_ilp(
    emissions: Tensor,
    transitions: Tensor,
    start: Tensor,
    end: Tensor,
    mask: Tensor,
    patterns: Sequence[Pattern],
    *,
    time_limit: float | None = None,
    lp_first: bool = True,
) -> ILPResult:
    """Exact MAP labelling of a group of chains with non-local patterns (HiGHS, float64).

    Args:
        emissions: ``(B, T, K)`` floating point.
        transitions: ``(K, K)`` (or ``(B, T-1, K, K)`` per position, as in the engine), ``[from, to]``.
        start: ``(K,)``, the score of each row's first unmasked tag.
        end: ``(K,)``, the score of each row's last unmasked tag.
        mask: ``(B, T)`` bool, holes allowed (consecutive unmasked positions are linked).
        patterns: the non-local factors; cells at unmasked positions (see
            :func:`~crfhead.higher_order.patterns.check_patterns`). Zero scores are ignored.
        time_limit: seconds for the whole call (LP and MIP together); ``None``: no limit. On a
            timeout the best labelling found is returned with ``optimal=False`` (the LP's rounding
            when HiGHS found none).
        lp_first: solve the LP relaxation first and stop there if it is integral.

    Returns:
        An :class:`ILPResult`; a ``-inf`` potential is forbidden (its variable is fixed at 0), as in the
        engine.

    Raises:
        ValueError: a wrong shape, dtype or device (the message prints the actual shapes), NaN or
            ``+inf`` potentials, or a pattern that does not fit the group.
    """
    began = time.perf_counter()
    pot = _validate(emissions, transitions, start, end, mask)
    B, T, K = pot.shape
    check_patterns(patterns, (B, T, K), pot.mask)

    def remaining() -> float | None:
        return None if time_limit is None else time_limit - (time.perf_counter() - began)

    def finish(
        tags_np: NDArray[np.int64], bound: float, optimal: bool, integral: bool
    ) -> ILPResult:
        tags = torch.from_numpy(tags_np)
        total = float(chain_score(pot, tags).sum()) + float(pattern_score(patterns, tags))
        return ILPResult(
            tags=tags.to(emissions.device),
            score=total,
            bound=bound,
            optimal=optimal,
            lp_integral=integral,
            seconds=time.perf_counter() - began,
        )

    if not bool(pot.mask.any()):  # nothing to label (B = 0, T = 0 or every row masked)
        return finish(np.full((B, T), -1, dtype=np.int64), 0.0, True, lp_first)

    prog = _build(pot, patterns)
    bound = math.inf
    fallback: NDArray[np.float64] | None = None
    if lp_first:
        lp = _solve(prog, integral=False, time_limit=remaining())
        if lp.status == 0 and lp.x is not None:
            bound = -float(lp.fun)
            y = np.asarray(lp.x[: prog.n_y], dtype=np.float64)
            if _is_integral(y):
                return finish(_tags_from(y, prog, (B, T), K), bound, True, True)
            fallback = y
    mip = _solve(prog, integral=True, time_limit=remaining())
    optimal = mip.status == 0 and mip.x is not None
    if not math.isfinite(bound) and getattr(mip, "mip_dual_bound", None) is not None:
        dual = -float(mip.mip_dual_bound)
        if math.isfinite(dual):
            bound = dual
    if mip.x is not None:
        tags_np = _tags_from(np.asarray(mip.x, dtype=np.float64), prog, (B, T), K)
    elif fallback is not None:
        tags_np = _tags_from(fallback, prog, (B, T), K)
    else:  # no solution at all: the best node objective, position by position
        tags_np = _tags_from(-prog.c, prog, (B, T), K)
    return finish(tags_np, bound, optimal, False)
