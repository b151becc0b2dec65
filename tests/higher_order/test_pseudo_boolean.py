"""The min-cut maximiser of supermodular quadratic pseudo-Boolean functions against oracles.

Oracles: enumeration of all ``2^n`` assignments (``n <= 12``), scored with numpy by a formula
written here, independently of :meth:`QuadraticPB.value`; and, on larger functions, HiGHS's MILP
(:func:`scipy.optimize.milp`) on the standard linearisation ``y_e <= x_l, y_e <= x_r``. The
min-cut slave's contract (Qian & Liu, TACL 2014, §3): the value must be the brute-force maximum, the labelling must
attain it, and the bound must be a true upper bound (the dual decomposition's certificates rest on
it).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_array

from crfhead.higher_order import native_maxflow
from crfhead.higher_order.pseudo_boolean import (
    QuadraticPB,
    _aligned_flow,
    has_ortools,
    maximize,
    resolve_backend,
)

NATIVE = pytest.param(
    "native",
    marks=pytest.mark.skipif(not native_maxflow.available(), reason="no native max-flow kernel"),
)
BACKENDS = [NATIVE, "scipy"]


def _all_values(pb: QuadraticPB) -> np.ndarray:
    """``(2^n,)``: f at every assignment, row ``r`` having ``x_u = bit u of r``."""
    n = pb.n
    X = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(np.float64)
    return pb.constant + X @ pb.linear + (X[:, pb.left] * X[:, pb.right]) @ pb.quadratic


def _magnitude(pb: QuadraticPB) -> float:
    return abs(pb.constant) + float(np.abs(pb.linear).sum()) + float(pb.quadratic.sum())


def _random_pb(seed: int, n: int) -> QuadraticPB:
    """Repeated pairs (either order), zero coefficients, both signs, magnitudes over 12 decades."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(0, 4 * n + 1)) if n >= 2 else 0
    pool = rng.integers(0, n, size=(max(1, m // 2), 2)) if n >= 2 else np.zeros((1, 2), int)
    pairs = pool[rng.integers(0, pool.shape[0], size=m)]
    flip = rng.random(m) < 0.5
    pairs[flip] = pairs[flip][:, ::-1]
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    decades = 10.0 ** rng.uniform(-4, 8, size=3)
    quadratic = rng.exponential(decades[0], pairs.shape[0]) * (rng.random(pairs.shape[0]) < 0.8)
    linear = rng.normal(0, decades[1], n) * (rng.random(n) < 0.9)
    if rng.random() < 0.5:  # make the cut non-trivial: terminal weights near zero
        half = np.zeros(n)
        np.add.at(half, pairs[:, 0], quadratic / 2)
        np.add.at(half, pairs[:, 1], quadratic / 2)
        linear = -half + rng.normal(0, decades[1] * 1e-3, n)
    return QuadraticPB(
        linear, pairs[:, 0], pairs[:, 1], quadratic, float(rng.normal(0, decades[2]))
    )


def _check_against_enumeration(pb: QuadraticPB, x: np.ndarray, value: float, bound: float) -> None:
    values = _all_values(pb)
    best = float(values.max())
    tiny = 1e-9 * max(1.0, _magnitude(pb))
    assert x.dtype == np.bool_ and x.shape == (pb.n,)
    assert value == pb.value(x)
    row = int((x.astype(np.int64) << np.arange(pb.n)).sum())
    assert abs(values[row] - value) <= tiny  # pb.value agrees with the oracle's formula
    assert bound >= best  # a true upper bound: no tolerance
    assert best - value <= tiny  # the maximum (up to float round-off in the oracle)
    assert bound - value <= tiny


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 12))
def test_maximize_matches_enumeration(backend: str, seed: int, n: int) -> None:
    pb = _random_pb(seed, n)
    _check_against_enumeration(pb, *maximize(pb, backend=backend))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12), rounds=st.integers(1, 3))
def test_every_round_count_gives_a_true_bound(seed: int, n: int, rounds: int) -> None:
    pb = _random_pb(seed, n)
    x, value, bound = maximize(pb, max_rounds=rounds, backend="scipy")
    best = float(_all_values(pb).max())
    assert value == pb.value(x)
    assert bound >= best >= value - 1e-9 * max(1.0, _magnitude(pb))


def test_one_round_is_too_coarse_and_refinement_fixes_it() -> None:
    # Two huge opposed terminal terms fix the first round's scale near 2**29 / 1e9; the unit-sized
    # structure on the other nodes is invisible at that scale and resolved by the later rounds.
    rng = np.random.default_rng(7)
    n = 10
    left, right = np.arange(2, n - 1), np.arange(3, n)
    quadratic = rng.uniform(0.5, 1.5, left.shape[0])
    linear = np.concatenate([[1e9, -1e9], rng.normal(-0.7, 0.6, n - 2)])
    pb = QuadraticPB(linear, left, right, quadratic)
    coarse = maximize(pb, max_rounds=1, backend="scipy")
    best = float(_all_values(pb).max())
    assert coarse[2] >= best
    assert coarse[2] - coarse[1] > 1e-3  # the one-round bound is loose here ...
    _check_against_enumeration(pb, *maximize(pb, backend="scipy"))  # ... and the refined one exact


def test_tolerance_stops_refining_early_with_a_true_bound() -> None:
    pb = _random_pb(11, 12)
    x, value, bound = maximize(pb, tolerance=1e300, backend="scipy")
    assert bound >= float(_all_values(pb).max())
    assert value == pb.value(x)


def _milp_max(pb: QuadraticPB) -> float:
    """max f by HiGHS over (x, y), y_e <= x_l, y_e <= x_r (y_e = x_l x_r at an optimum: a >= 0)."""
    n, m = pb.n, pb.left.shape[0]
    rows = np.repeat(np.arange(2 * m), 2)
    cols = np.stack(
        [np.concatenate([n + np.arange(m)] * 2), np.concatenate([pb.left, pb.right])], axis=1
    ).reshape(-1)
    data = np.tile([1.0, -1.0], 2 * m)
    A = csr_array((data, (rows, cols)), shape=(2 * m, n + m))
    result = milp(
        -np.concatenate([pb.linear, pb.quadratic]),
        constraints=LinearConstraint(A, -np.inf, 0.0),
        integrality=np.ones(n + m),
        bounds=Bounds(0, 1),
        options={"mip_rel_gap": 0.0},
    )
    assert result.status == 0
    return pb.constant - float(result.fun)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(3))
def test_maximize_matches_milp_on_larger_functions(seed: int, backend: str) -> None:
    rng = np.random.default_rng(100 + seed)
    n, m = 150, 1200
    left, right = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = left != right
    left, right = left[keep], right[keep]
    quadratic = rng.exponential(1.0, left.shape[0]) * 10.0 ** rng.uniform(-2, 2, left.shape[0])
    half = np.zeros(n)
    np.add.at(half, left, quadratic / 2)
    np.add.at(half, right, quadratic / 2)
    pb = QuadraticPB(-half + rng.normal(0, 1.0, n) * half, left, right, quadratic, 1.5)
    x, value, bound = maximize(pb, backend=backend)
    best = _milp_max(pb)
    tiny = 1e-7 * max(1.0, _magnitude(pb))
    assert 0.05 < x.mean() < 0.95  # a non-trivial cut
    assert value == pb.value(x)
    assert abs(best - value) <= tiny
    assert bound >= best - tiny and bound - value <= tiny


def test_no_variables() -> None:
    x, value, bound = maximize(
        QuadraticPB(np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), -2.5)
    )
    assert x.shape == (0,) and value == bound == -2.5


@pytest.mark.parametrize("b", [-3.0, 0.0, 2.0])
def test_one_variable(b: float) -> None:
    pb = QuadraticPB(np.array([b]), np.zeros(0), np.zeros(0), np.zeros(0), 1.0)
    x, value, bound = maximize(pb)
    assert value == pb.value(x) == 1.0 + max(b, 0.0)
    if b != 0.0:
        assert bool(x[0]) == (b > 0)
    assert bound >= value and bound - value < 1e-12


def test_all_zero_capacities_and_isolated_nodes() -> None:
    pb = QuadraticPB(np.zeros(5), [0, 1, 0], [1, 0, 1], [0.0, 0.0, 0.0], 4.0)
    x, value, bound = maximize(pb)
    assert value == 4.0 and bound >= 4.0 and bound - value < 1e-12
    # an isolated node with a positive term, one with a negative term, an attractive pair
    pb = QuadraticPB(np.array([0.0, 2.0, -1.0, -0.5, -0.5]), [3], [4], [2.0])
    _check_against_enumeration(pb, *maximize(pb))
    x, _, _ = maximize(pb)
    assert x[1:].tolist() == [True, False, True, True]


def test_duplicates_add_in_either_order() -> None:
    once = QuadraticPB(np.array([-1.0, -1.0]), [0], [1], [3.0])
    split = QuadraticPB(np.array([-1.0, -1.0]), [0, 1, 0], [1, 0, 1], [1.0, 1.5, 0.5])
    assert maximize(once)[1] == maximize(split)[1] == 1.0
    assert maximize(split)[0].tolist() == [True, True]


def test_with_linear_shares_the_graph_and_matches_a_fresh_function() -> None:
    rng = np.random.default_rng(3)
    pb = _random_pb(5, 12)
    maximize(pb)
    for _ in range(5):
        linear = rng.normal(0, 2.0, pb.n)
        moved = pb.with_linear(linear)
        fresh = QuadraticPB(linear, pb.left, pb.right, pb.quadratic, pb.constant)
        assert moved._graph is pb._graph
        assert moved.linear is not linear and not moved.linear.flags.writeable
        _check_against_enumeration(moved, *maximize(moved))
        assert maximize(moved)[1] == maximize(fresh)[1]


def test_inputs_are_copied_and_read_only() -> None:
    linear = np.array([1.0, -1.0])
    pb = QuadraticPB(linear, [0], [1], [1.0])
    linear[0] = 5.0
    assert pb.linear[0] == 1.0
    with pytest.raises(ValueError):
        pb.linear[0] = 2.0


def test_the_flow_is_aligned_when_scipy_changes_the_structure() -> None:
    pb = QuadraticPB(np.array([1.0, -2.0, 0.5]), [0, 1], [1, 2], [1.0, 2.0])
    graph = pb._graph_structure()
    values = np.arange(1, graph.tails.shape[0] + 1, dtype=np.int64)
    values[::3] = 0  # explicit zeros dropped below: a different sparsity structure
    dense = np.zeros((pb.n + 2, pb.n + 2), dtype=np.int64)
    dense[graph.tails, graph.heads] = values
    assert np.array_equal(_aligned_flow(csr_array(dense), graph), values)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"left": [0], "right": [0], "quadratic": [1.0]},  # self-loop
        {"left": [0], "right": [2], "quadratic": [1.0]},  # out of range
        {"left": [0], "right": [1], "quadratic": [-1.0]},  # submodular
        {"left": [0], "right": [1], "quadratic": [1.0, 2.0]},  # shapes
        {"left": [0], "right": [1], "quadratic": [np.nan]},
    ],
)
def test_malformed_functions_are_refused(kwargs: dict[str, list[float]]) -> None:
    with pytest.raises(ValueError):
        QuadraticPB(linear=np.zeros(2), **kwargs)  # type: ignore[arg-type]


def test_value_refuses_a_non_binary_vector() -> None:
    pb = QuadraticPB(np.zeros(2), [0], [1], [1.0])
    with pytest.raises(ValueError):
        pb.value(np.array([0, 2]))
    with pytest.raises(ValueError):
        pb.value(np.array([True]))
    with pytest.raises(ValueError):
        maximize(pb, max_rounds=0)


def test_an_unknown_backend_is_refused() -> None:
    with pytest.raises(ValueError, match="backend"):
        maximize(QuadraticPB(np.zeros(2), [0], [1], [1.0]), backend="networkx")


def test_with_linear_refuses_non_finite_terms() -> None:
    pb = QuadraticPB(np.zeros(2), [0], [1], [1.0])
    with pytest.raises(ValueError):
        pb.with_linear(np.array([np.inf, 0.0]))
    with pytest.raises(ValueError):
        pb.with_linear(np.zeros(3))


@pytest.mark.parametrize("seed", range(40))
def test_isolated_variables_are_cut_off_the_flow_graph_exactly(seed: int) -> None:
    """Variables without a pairwise term (most of a pattern graph) leave the max-flow subgraph.

    The subgraph holds exactly the other variables, the answer is the enumerated maximum, and each
    isolated variable follows the sign of its own linear term.
    """
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 11))
    pb = _random_pb(seed, n)
    linear = pb.linear.copy()
    linear[rng.random(n) < 0.5] = 0.0  # ties: zero terms on isolated variables
    pb = QuadraticPB(linear, pb.left, pb.right, pb.quadratic, pb.constant)
    graph = pb._graph_structure()
    x, value, bound = maximize(pb)
    _check_against_enumeration(pb, x, value, bound)
    assert graph.flow_arcs.indptr.shape[0] - 3 == int((~graph.isolated).sum())
    alone = pb.linear[graph.isolated]
    assert not (x[graph.isolated] & (alone < 0)).any()
    assert not (~x[graph.isolated] & (alone > 0)).any()


def test_auto_uses_a_backend_that_is_there() -> None:
    pb = _random_pb(3, 8)
    _check_against_enumeration(pb, *maximize(pb, backend="auto"))
    assert isinstance(has_ortools(), bool)
    want = "native" if native_maxflow.available() else "ortools" if has_ortools() else "scipy"
    assert resolve_backend("auto") == want
