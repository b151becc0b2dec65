"""Supermodular quadratic pseudo-Boolean functions and their maximisation by one s–t minimum cut.

The pattern slave of the 2-slave dual decomposition (Qian & Liu, TACL 2014, §3)
maximises ``f(x) = c + Σ_u b_u x_u + Σ_e a_e x_l x_r`` over
``x ∈ {0,1}^n`` with every ``a_e >= 0``. Such an ``f`` is supermodular, so ``E = -f`` is submodular and
graph-representable (Kolmogorov & Zabih, *What energy functions can be minimized via graph cuts?*,
PAMI 2004). With ``x_u = 1`` for a node on the sink side of a cut ``(S, T)``, ``s ∈ S``, ``t ∈ T``:

* ``-a x_u x_v = (a/2)[(1 - x_u) x_v + x_u (1 - x_v)] - (a/2)(x_u + x_v)``: arcs ``u → v`` and
  ``v → u`` of capacity ``a/2`` (cut exactly when ``u`` and ``v`` are on different sides), plus
  ``-a/2`` on each endpoint's linear term;
* the linear term of ``E`` becomes ``w_u x_u`` with ``w_u = -b_u - ½ Σ_{v~u} a_uv``: an arc ``s → u``
  of capacity ``w_u`` when ``w_u >= 0`` (cut when ``x_u = 1``), else ``w_u + |w_u| (1 - x_u)``: an arc
  ``u → t`` of capacity ``-w_u`` (cut when ``x_u = 0``) and ``w_u`` into the constant;

so ``E(x) = K0 + cut(x)`` with ``K0 = -c + Σ_u min(w_u, 0)`` and ``max f = -K0 - mincut``.

``scipy.sparse.csgraph.maximum_flow`` (Dinic) needs int32 capacities. One integer rounding at a scale
that keeps the flow in int32 resolves the cut only to about ``(#arcs) / 2³⁰`` of the total capacity,
far coarser than a certificate needs on a 10⁴-node graph, so :func:`maximize` refines: it rounds the
*residual* capacities *down* at a scale fitted to what is left of the flow, pushes that integer flow,
and repeats until the gap is at the level of float64 round-off. Flows rounded down are feasible for
the true capacities, so their summed value is a guaranteed lower bound on the minimum cut, and
``-K0 - flow`` a guaranteed upper bound on ``max f`` (the proof is in :func:`maximize`).

The arc structure is built once per function and shared by every :meth:`QuadraticPB.with_linear`
copy (the dual decomposition changes only the linear terms). The default backend (``"auto"``) is
the native Boykov–Kolmogorov kernel of :mod:`~crfhead.higher_order.native_maxflow`: float64
capacities, one solve, its flow and search trees kept with the graph and reused by the next copy's
solve (only terminal capacities differ), and a bound proven from the residual graph rather than by
integer arithmetic (the proof is in that module). Where the kernel cannot be built (no compiler),
``"auto"`` falls back to OR-Tools when installed, else to scipy's Dinic: scipy's ``maximum_flow``
has no warm start (each call rebuilds its residual structure from the CSR input), so every round
solves from zero, on the subgraph without the variables that have no pairwise term (see
:class:`_Graph`). The optional backend ``"ortools"`` (OR-Tools' ``SimpleMaxFlow``, Apache-2.0,
push–relabel on int64 capacities) keeps one solver per graph and only resets capacities.
"""

from __future__ import annotations

import copy
import functools
import importlib
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import csr_array
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from crfhead.higher_order.native_maxflow import Maxflow
from crfhead.higher_order.native_maxflow import bound as native_bound

__all__ = ["BACKENDS", "QuadraticPB", "has_ortools", "maximize", "resolve_backend"]

# Integer capacities of one round are at most 2**29: a residual arc (capacity plus the reverse arc's
# flow) and the flow value (at most the cut of the best labelling so far, also scaled to 2**29) then
# stay below int32's 2**31 with room to spare.
_TOP = float(2**29)
_EPS = float(np.finfo(np.float64).eps)
# OR-Tools' int64 capacities are scaled so that their sum, which bounds every flow and excess, is at
# most 2**62.
_TOP64 = float(2**62)

BACKENDS = ("native", "scipy", "ortools", "auto")


def resolve_backend(backend: str) -> str:
    """The backend ``backend`` stands for (``"auto"``: native, else OR-Tools, else scipy).

    ``"auto"`` is ``"native"`` where the kernel builds, else ``"ortools"`` where it is installed,
    else ``"scipy"``.

    Raises:
        ValueError: ``backend`` is not one of :data:`BACKENDS`.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend != "auto":
        return backend
    from crfhead.higher_order.native_maxflow import available

    if available():
        return "native"
    return "ortools" if has_ortools() else "scipy"


@functools.cache
def has_ortools() -> bool:
    """Whether the optional OR-Tools max-flow (``ortools.graph.python.max_flow``) can be imported."""
    try:
        importlib.import_module("ortools.graph.python.max_flow")
    except ImportError:
        return False
    return True


def _frozen(a: object, dtype: type[np.generic], name: str) -> np.ndarray:
    """``a`` as a read-only 1-D array of ``dtype``: a private copy unless it already is one."""
    if isinstance(a, np.ndarray) and a.dtype == dtype and a.ndim == 1 and not a.flags.writeable:
        return a
    out = np.array(a, dtype=dtype, copy=True)
    if out.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {out.shape}")
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class _Arcs:
    """A CSR arc list: every arc with its reverse, sorted by (tail, head).

    Attributes:
        tails, heads: ``(A,)`` int64, the arcs in CSR order.
        indptr: ``(N + 1,)`` int32 and ``indices`` ``(A,)`` int32: the CSR structure over ``N`` nodes.
    """

    tails: np.ndarray
    heads: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray


@dataclass(frozen=True)
class _Graph(_Arcs):
    """The arc structure of a :class:`QuadraticPB`'s cut graph, shared by every ``with_linear`` copy.

    Nodes ``0..n-1`` are the variables, ``n`` the source, ``n + 1`` the sink. Every arc is stored with
    its reverse (capacity 0 where there is none), sorted by (tail, head), so the CSR matrix is canonical
    and the flow scipy returns has exactly this sparsity structure.

    The capacities and the flow are kept on these ``A`` arcs; the max-flow itself runs on ``flow_arcs``,
    the subgraph without the *isolated* variables (no pairwise arc): such a node carries no flow (its
    only non-zero arc is ``s → u`` or ``u → t``), so it is on the sink side exactly when its ``s → u``
    capacity of the round is 0. Its nodes keep their order, so Dinic visits the rest as on the full
    graph and pushes the same flow; the subgraph has a fraction of the arcs on pattern graphs, where
    most ``z``'s are labels no pattern names.

    Attributes:
        base: ``(A,)`` float64, the pairwise capacities ``a/2`` (terminal arcs 0).
        pairs: ``(u, v, a)``, each ``(p,)``: the merged pairwise terms, ``u < v``, ``a > 0``.
        source_arcs, sink_arcs: ``(n,)`` int64: the positions of ``s → u`` and of ``u → t``.
        half_degree: ``(n,)`` float64, ``½ Σ_{v~u} a_uv``.
        isolated: ``(n,)`` bool, the variables without a pairwise arc.
        flow_arcs: the subgraph over the ``n'`` other variables (renumbered in order), the source
            ``n'`` and the sink ``n' + 1``.
        kept: ``(A',)`` int64, the position in ``A`` of each arc of ``flow_arcs``.
    """

    base: np.ndarray
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray]
    source_arcs: np.ndarray
    sink_arcs: np.ndarray
    half_degree: np.ndarray
    isolated: np.ndarray
    flow_arcs: _Arcs
    kept: np.ndarray
    _solvers: dict[str, _PushRelabel | Maxflow] = field(
        default_factory=dict, repr=False, compare=False
    )

    def push_relabel(self) -> _PushRelabel:
        """The OR-Tools solver over the subgraph, built on first use and kept with the graph."""
        if "ortools" not in self._solvers:
            self._solvers["ortools"] = _PushRelabel(self)
        solver = self._solvers["ortools"]
        assert isinstance(solver, _PushRelabel)
        return solver

    def native(self) -> Maxflow:
        """The native Boykov–Kolmogorov graph (pairwise arcs ``a/2`` each way), kept with the graph.

        It keeps its flow and trees between solves: every ``with_linear`` copy's solve starts from
        the previous one's.
        """
        if "native" not in self._solvers:
            u, v, a = self.pairs
            self._solvers["native"] = Maxflow(self.half_degree.shape[0], u, v, a / 2, a / 2)
        solver = self._solvers["native"]
        assert isinstance(solver, Maxflow)
        return solver


class _PushRelabel:
    """OR-Tools' ``SimpleMaxFlow`` holding the subgraph's arcs; each round only sets capacities.

    Only the arcs that can have a capacity are given to OR-Tools (pairwise arcs, ``s → u``, ``u → t``;
    it keeps the reverse arcs itself); their flows are mapped back onto the ``A`` arcs of
    :class:`_Graph` as a skew-symmetric flow, as scipy returns it. The solver is state shared by every
    ``with_linear`` copy: one graph is not to be maximised from two threads at once.
    """

    def __init__(self, graph: _Graph) -> None:
        try:
            max_flow = importlib.import_module("ortools.graph.python.max_flow")
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError(
                'backend="ortools" needs the optional package ortools (pip install ortools)'
            ) from error
        A = graph.tails.shape[0]
        n = graph.half_degree.shape[0]
        arc_nodes = n + 2
        terminal = np.zeros(A, dtype=np.bool_)
        terminal[graph.source_arcs] = True
        terminal[graph.sink_arcs] = True
        usable = np.zeros(A, dtype=np.bool_)
        usable[graph.kept] = (graph.base[graph.kept] > 0) | terminal[graph.kept]
        self.positions = np.flatnonzero(usable)  # (A_o,) positions in A
        keys = graph.tails * arc_nodes + graph.heads  # sorted: the arcs are in CSR order
        reverse = graph.heads[self.positions] * arc_nodes + graph.tails[self.positions]
        self.reverse = np.searchsorted(keys, reverse)  # (A_o,) the reverse arcs' positions
        sub = graph.flow_arcs
        self.n_sub = sub.indptr.shape[0] - 3
        where = np.full(A, -1, dtype=np.int64)
        where[graph.kept] = np.arange(graph.kept.shape[0])
        sub_arcs = where[self.positions]
        self.solver = max_flow.SimpleMaxFlow()
        self.arcs = self.solver.add_arcs_with_capacity(
            sub.tails[sub_arcs], sub.heads[sub_arcs], np.zeros(sub_arcs.shape[0], dtype=np.int64)
        )

    def solve(self, integer: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
        """One round with capacities ``integer`` ``(A,)`` int64: as :func:`_dinic`."""
        flow = np.zeros(integer.shape[0], dtype=np.int64)
        x_sub = np.ones(self.n_sub + 2, dtype=np.bool_)
        if self.positions.shape[0] == 0:
            return flow, 0, x_sub[: self.n_sub]
        self.solver.set_arcs_capacity(self.arcs, integer[self.positions])
        status = self.solver.solve(self.n_sub, self.n_sub + 1)
        if status != self.solver.OPTIMAL:  # pragma: no cover - the capacities are scaled to fit
            raise RuntimeError(f"OR-Tools max flow failed: {status}")
        arc_flow = np.asarray(self.solver.flows(self.arcs), dtype=np.int64)
        flow[self.positions] = arc_flow
        flow[self.reverse] -= arc_flow
        x_sub[np.asarray(self.solver.get_source_side_min_cut(), dtype=np.int64)] = False
        return flow, int(self.solver.optimal_flow()), x_sub[: self.n_sub]


@dataclass(frozen=True, eq=False)
class QuadraticPB:
    """``f(x) = constant + Σ_u linear[u]·x_u + Σ_e quadratic[e]·x[left[e]]·x[right[e]]``, ``x ∈ {0,1}^n``.

    Every ``quadratic[e] >= 0``, so ``f`` is supermodular and :func:`maximize` finds its maximum by one
    minimum cut. The arrays are stored as private read-only copies; equality is identity (``eq=False``:
    arrays have no single truth value).

    Attributes:
        linear: ``(n,)`` float64, the linear coefficients (any sign).
        left, right: ``(m,)`` int64 in ``[0, n)``, ``left[e] != right[e]``; repeated pairs (in either
            order) add.
        quadratic: ``(m,)`` float64, ``>= 0`` (zeros allowed).
        constant: added to every value.

    Raises:
        ValueError: on mismatched shapes, an index out of range, ``left[e] == right[e]``, a negative
            quadratic coefficient, or a non-finite number.
    """

    linear: np.ndarray
    left: np.ndarray
    right: np.ndarray
    quadratic: np.ndarray
    constant: float = 0.0
    _graph: _Graph | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        linear = _frozen(self.linear, np.float64, "linear")
        left = _frozen(self.left, np.int64, "left")
        right = _frozen(self.right, np.int64, "right")
        quadratic = _frozen(self.quadratic, np.float64, "quadratic")
        object.__setattr__(self, "linear", linear)
        object.__setattr__(self, "left", left)
        object.__setattr__(self, "right", right)
        object.__setattr__(self, "quadratic", quadratic)
        object.__setattr__(self, "constant", float(self.constant))
        n, m = linear.shape[0], left.shape[0]
        if right.shape != (m,) or quadratic.shape != (m,):
            raise ValueError(
                f"left, right and quadratic must have one shape, got {left.shape}, {right.shape}, "
                f"{quadratic.shape}"
            )
        if not (np.isfinite(linear).all() and np.isfinite(quadratic).all()):
            raise ValueError("linear and quadratic must be finite")
        if not math.isfinite(self.constant):
            raise ValueError(f"constant must be finite, got {self.constant}")
        if m:
            if (
                min(int(left.min()), int(right.min())) < 0
                or max(int(left.max()), int(right.max())) >= n
            ):
                raise ValueError(f"left and right must lie in [0, {n})")
            if bool((left == right).any()):
                raise ValueError("left[e] == right[e] for some edge; x_u·x_u is a linear term")
            if bool((quadratic < 0).any()):
                raise ValueError("quadratic coefficients must be >= 0 (supermodular)")

    @property
    def n(self) -> int:
        """The number of variables."""
        return int(self.linear.shape[0])

    def value(self, x: np.ndarray) -> float:
        """``f(x)`` for ``x`` ``(n,)`` bool or 0/1: the selected terms summed in float64."""
        xb = np.asarray(x)
        if xb.shape != (self.n,):
            raise ValueError(f"x must have shape ({self.n},), got {xb.shape}")
        if xb.dtype != np.bool_:
            if not bool(np.isin(xb, (0, 1)).all()):
                raise ValueError("x must be 0/1")
            xb = xb.astype(np.bool_)
        both = xb[self.left] & xb[self.right]
        return float(self.constant + self.linear[xb].sum() + self.quadratic[both].sum())

    def with_linear(self, linear: np.ndarray) -> QuadraticPB:
        """The same function with ``linear`` ``(n,)`` as its linear terms; the cut graph is shared."""
        linear = np.array(linear, dtype=np.float64, copy=True)
        if linear.shape != (self.n,):
            raise ValueError(f"linear must have shape ({self.n},), got {linear.shape}")
        if not np.isfinite(linear).all():
            raise ValueError("linear must be finite")
        linear.flags.writeable = False
        # The other fields were validated when ``self`` was made: copy them without ``__post_init__``.
        out = copy.copy(self)
        object.__setattr__(out, "linear", linear)
        object.__setattr__(out, "_graph", self._graph_structure())
        return out

    def _graph_structure(self) -> _Graph:
        """The cut graph's arcs, built once per ``(left, right, quadratic)`` (vectorised)."""
        if self._graph is None:
            object.__setattr__(self, "_graph", _build_graph(self))
        assert self._graph is not None
        return self._graph


def _build_graph(pb: QuadraticPB) -> _Graph:
    n = pb.n
    lo = np.minimum(pb.left, pb.right)
    hi = np.maximum(pb.left, pb.right)
    # Repeated pairs are merged (their coefficients add) and zero pairs dropped: one arc each way.
    keys, inverse = np.unique(lo * max(n, 1) + hi, return_inverse=True)
    coef = np.bincount(inverse.reshape(-1), weights=pb.quadratic, minlength=keys.shape[0])
    keep = coef > 0
    pu, pv, pa = keys[keep] // max(n, 1), keys[keep] % max(n, 1), coef[keep]
    half_degree = 0.5 * (
        np.bincount(pu, weights=pa, minlength=n) + np.bincount(pv, weights=pa, minlength=n)
    )
    nodes = np.arange(n, dtype=np.int64)
    s = np.full(n, n, dtype=np.int64)
    t = np.full(n, n + 1, dtype=np.int64)
    tails = np.concatenate([pu, pv, s, nodes, nodes, t])
    heads = np.concatenate([pv, pu, nodes, s, t, nodes])
    caps = np.concatenate([pa / 2, pa / 2, np.zeros(4 * n)])
    order = np.lexsort((heads, tails))
    position = np.empty_like(order)
    position[order] = np.arange(order.shape[0])
    p = pa.shape[0]
    tails, heads = tails[order], heads[order]
    isolated = np.ones(n, dtype=np.bool_)
    isolated[pu] = False
    isolated[pv] = False
    # The subgraph: drop the isolated nodes' arcs, renumber the rest (order kept), s = n', t = n' + 1.
    renumber = np.full(n + 2, -1, dtype=np.int64)
    on = np.concatenate([~isolated, [True, True]])
    renumber[on] = np.arange(int(on.sum()), dtype=np.int64)
    kept = np.flatnonzero(on[tails] & on[heads])
    sub_tails, sub_heads = renumber[tails[kept]], renumber[heads[kept]]
    return _Graph(
        tails=tails,
        heads=heads,
        indptr=_indptr(tails, n + 2),
        indices=heads.astype(np.int32),
        base=caps[order],
        pairs=(pu, pv, pa),
        source_arcs=position[2 * p : 2 * p + n],
        sink_arcs=position[2 * p + 2 * n : 2 * p + 3 * n],
        half_degree=half_degree,
        isolated=isolated,
        flow_arcs=_Arcs(
            tails=sub_tails,
            heads=sub_heads,
            indptr=_indptr(sub_tails, int(on.sum())),
            indices=sub_heads.astype(np.int32),
        ),
        kept=kept,
    )


def _indptr(tails: np.ndarray, nodes: int) -> np.ndarray:
    """``(nodes + 1,)`` int32: the CSR row pointer of arcs ``tails`` ``(A,)`` sorted by tail."""
    return np.concatenate([[0], np.cumsum(np.bincount(tails, minlength=nodes))]).astype(np.int32)


def _aligned_flow(flow: csr_array, graph: _Arcs) -> np.ndarray:
    """The flow on each arc of ``graph`` ``(A,)`` int64 (scipy keeps the canonical structure given)."""
    if np.array_equal(flow.indptr, graph.indptr) and np.array_equal(flow.indices, graph.indices):
        return np.asarray(flow.data, dtype=np.int64)
    return np.asarray(flow[graph.tails, graph.heads], dtype=np.int64).reshape(-1)


def _sink_side(graph: _Arcs, open_arcs: np.ndarray, n: int) -> np.ndarray:
    """``(n,)`` bool: the nodes the source ``n`` cannot reach over ``open_arcs`` ``(A,)`` bool (``x = 1``)."""
    indptr = _indptr(graph.tails[open_arcs], n + 2)
    indices = graph.indices[open_arcs]
    residual = csr_array((np.ones(indices.shape[0]), indices, indptr), shape=(n + 2, n + 2))
    reached = breadth_first_order(residual, n, directed=True, return_predecessors=False)
    x = np.ones(n + 2, dtype=np.bool_)
    x[reached] = False
    return x[:n]


def _dinic(graph: _Graph, integer: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """One scipy Dinic round on the subgraph with capacities ``integer`` ``(A,)``.

    Returns the skew-symmetric flow ``(A,)`` int64 on every arc, its value, and the sink side
    ``(n',)`` bool of the subgraph's variables.
    """
    sub = graph.flow_arcs
    n_sub = sub.indptr.shape[0] - 3
    sub_integer = integer[graph.kept]
    graph_k = csr_array((sub_integer, sub.indices, sub.indptr), shape=(n_sub + 2, n_sub + 2))
    result = maximum_flow(graph_k, n_sub, n_sub + 1, method="dinic")
    flow = np.zeros(integer.shape[0], dtype=np.int64)
    sub_flow = _aligned_flow(result.flow, sub)
    flow[graph.kept] = sub_flow
    return flow, int(result.flow_value), _sink_side(sub, sub_integer > sub_flow, n_sub)


def maximize(
    pb: QuadraticPB, *, tolerance: float = 0.0, max_rounds: int = 8, backend: str = "auto"
) -> tuple[np.ndarray, float, float]:
    """Maximise ``pb`` by minimum cut: ``(x, value, bound)``.

    ``x`` ``(n,)`` bool is the best labelling found, ``value = pb.value(x)``, and ``bound >= max f``
    is guaranteed; ``bound - value`` is at most ``tolerance`` plus the float64 round-off slack unless
    ``max_rounds`` ran out first (then it is whatever the last round reached, still a true bound).

    Each round ``k`` rounds the residual capacities ``r_k`` (true capacities minus the flow pushed so
    far) down to integers at scale ``σ_k`` (clipped at ``U_k``, the residual cut of the best labelling,
    which bounds the remaining flow), runs Dinic, adds ``F_k / σ_k`` to the flow, and reads a labelling
    from the integer residual's reachability from ``s``; it stops when the gap is round-off, when a round
    changes nothing, once ``bound - value <= tolerance + slack``, or after ``max_rounds``. Proof that ``bound`` is an upper bound:
    ``F_k <= ⌊σ_k r_k⌋`` so ``Σ_k F_k / σ_k`` is a feasible flow for the true capacities, hence
    ``LB := Σ_k |F_k| / σ_k <= mincut`` (weak max-flow/min-cut duality), and
    ``max f = -K0 - mincut <= -K0 - LB``; ``bound`` adds to this a slack covering the float64 round-off
    of the capacities, the flow bookkeeping and the sums (``~(n + m)·ε`` times the total magnitude).

    Args:
        pb: the function.
        tolerance: the gap ``bound - value`` (beyond the round-off slack) at which refining stops; the
            default 0 refines to round-off: 2 rounds with scipy (1 with OR-Tools) on the MSM2013 and
            CoNLL pattern graphs, while one int32 round alone can leave a gap of a few score units
            on a 10⁴-node graph.
        max_rounds: the most integer max-flow rounds (each at a finer scale), at least 1.
        backend: one of :data:`BACKENDS`: ``"native"`` (Boykov–Kolmogorov in float64 with tree
            reuse, :mod:`~crfhead.higher_order.native_maxflow`; one solve, so ``tolerance`` and
            ``max_rounds`` do not apply), ``"scipy"`` (Dinic on int32 capacities in refinement
            rounds, the reference results), ``"ortools"`` (OR-Tools' ``SimpleMaxFlow``,
            push–relabel on int64 capacities scaled to ``2**62`` of their sum, so one round
            usually reaches round-off; the optional package ``ortools``), or ``"auto"`` (the
            default, :func:`resolve_backend`: native where it builds). Every backend returns a
            true bound and the minimal minimum cut (the sink side is what the source cannot reach);
            labellings can differ only where the maximum is tied up to the rounding.

    Raises:
        ImportError: ``backend="ortools"`` without the ``ortools`` package.
        RuntimeError: ``backend="native"`` where the kernel cannot be built.
    """
    backend = resolve_backend(backend)
    if max_rounds < 1:
        raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
    if not tolerance >= 0.0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    n = pb.n
    magnitude = abs(pb.constant) + float(np.abs(pb.linear).sum()) + float(pb.quadratic.sum())
    if n == 0:
        return np.zeros(0, dtype=np.bool_), pb.constant, pb.constant
    graph = pb._graph_structure()
    w = -pb.linear - graph.half_degree
    if backend == "native":
        x, parts = graph.native().solve(w)
        value = pb.value(x)
        bound = native_bound(pb.constant, parts, magnitude, n + pb.left.shape[0])
        return x, value, max(bound, value)
    capacity = graph.base.copy()
    capacity[graph.source_arcs] = np.maximum(w, 0.0)
    capacity[graph.sink_arcs] = np.maximum(-w, 0.0)
    neg_k0 = pb.constant - float(np.minimum(w, 0.0).sum())  # max f = neg_k0 - mincut
    slack = (
        4.0
        * _EPS
        * (n + pb.left.shape[0] + 2 * max_rounds + 8)
        * (magnitude + float(capacity.sum()) + abs(neg_k0))
    )
    in_t = np.zeros(n + 2, dtype=np.bool_)
    in_t[n + 1] = True
    solver = None if backend == "scipy" else graph.push_relabel()

    def cut_arcs(x: np.ndarray) -> np.ndarray:
        in_t[:n] = x
        return np.asarray(~in_t[graph.tails] & in_t[graph.heads])

    # Start from the better of "all on the source side" and "all on the sink side".
    zeros, ones = np.zeros(n, dtype=np.bool_), np.ones(n, dtype=np.bool_)
    v0, v1 = pb.value(zeros), pb.value(ones)
    best, best_value = (ones, v1) if v1 > v0 else (zeros, v0)
    residual = capacity
    pushed = 0.0  # LB: the value of the (feasible) flow pushed so far
    for _ in range(max_rounds):
        if neg_k0 - pushed - best_value <= slack + tolerance:
            break
        remaining = np.maximum(residual, 0.0)
        bound_left = float(remaining[cut_arcs(best)].sum())  # >= the flow still to push
        if bound_left <= 0.0:
            break
        clipped = np.minimum(remaining, bound_left)
        if solver is None:
            scale = _TOP / bound_left
            integer = np.floor(clipped * scale).astype(np.int32)
            flow, flow_value, x_sub = _dinic(graph, integer)
        else:
            scale = _TOP64 / max(bound_left, float(clipped.sum()))
            integer = np.floor(clipped * scale).astype(np.int64)
            flow, flow_value, x_sub = solver.solve(integer)
        pushed += float(flow_value) / scale
        residual = residual - flow / scale
        x = np.empty(n, dtype=np.bool_)
        x[~graph.isolated] = x_sub
        x[graph.isolated] = integer[graph.source_arcs[graph.isolated]] == 0
        value = pb.value(x)
        if value > best_value:
            best, best_value = x, value
        elif flow_value == 0:
            break  # nothing moved at this scale: a finer one sees the same cut
    bound = max(neg_k0 - pushed + slack, best_value)
    return best, best_value, bound
