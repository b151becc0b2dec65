"""The native Boykov–Kolmogorov max flow with tree reuse against enumeration, scipy and itself.

The pattern slave of the 2-slave dual decomposition (Qian & Liu, TACL 2014, §3) solves one cut per
iteration on one graph whose terminal capacities alone change. Every solve of a sequence (trees and
flow reused, capacities rescaled in between) must return the enumerated maximum and a bound that is
a true upper bound with no tolerance, and the same labelling as a fresh solve and as scipy's Dinic
(the smallest source side: the minimal minimum cut is unique). Where no compiler exists the kernel
is reported unavailable and ``auto`` falls back, which a fresh interpreter checks.
"""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crfhead.higher_order import native_maxflow
from crfhead.higher_order.pseudo_boolean import QuadraticPB, maximize

pytestmark = pytest.mark.skipif(
    not native_maxflow.available(), reason="no native max-flow kernel (no compiler)"
)


def _all_values(pb: QuadraticPB) -> np.ndarray:
    n = pb.n
    X = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(np.float64)
    return np.asarray(pb.constant + X @ pb.linear + (X[:, pb.left] * X[:, pb.right]) @ pb.quadratic)


def _random_pb(rng: np.random.Generator, n: int, m: int, spread: float = 2.0) -> QuadraticPB:
    left, right = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = left != right
    quadratic = rng.exponential(1.0, int(keep.sum())) * 10.0 ** rng.uniform(-spread, spread)
    half = np.zeros(n)
    np.add.at(half, left[keep], quadratic / 2)
    np.add.at(half, right[keep], quadratic / 2)
    linear = -half + rng.normal(0, 1.0, n) * (half + 1e-3)
    return QuadraticPB(linear, left[keep], right[keep], quadratic, float(rng.normal()))


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 11))
def test_a_sequence_of_solves_with_reused_trees_is_exact_every_time(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    pb = _random_pb(rng, n, int(rng.integers(0, 4 * n + 1)), spread=float(rng.uniform(0, 6)))
    linear = pb.linear.copy()
    for _ in range(6):
        moved = pb.with_linear(linear)
        x, value, bound = maximize(moved, backend="native")
        values = _all_values(moved)
        best = float(values.max())
        tiny = 1e-9 * max(1.0, float(np.abs(values).max()))
        assert value == moved.value(x)
        assert best - value <= tiny
        assert bound >= best  # no tolerance
        assert bound - value <= tiny
        fresh = QuadraticPB(linear, pb.left, pb.right, pb.quadratic, pb.constant)
        assert (
            np.array_equal(x, maximize(fresh, backend="scipy")[0])
            or abs(moved.value(maximize(fresh, backend="scipy")[0]) - value) <= tiny
        )
        # Multipliers move a few terminal terms at a time, as in the dual decomposition.
        change = rng.random(n) < 0.4
        linear = linear + change * rng.normal(0, 1.0, n) * np.abs(linear).mean()


@pytest.mark.parametrize("seed", range(4))
def test_larger_graphs_agree_with_scipy_through_tree_reuse_and_rescaling(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 400
    pb = _random_pb(rng, n, 2000)
    graph = pb._graph_structure()
    u, v, a = graph.pairs
    solver = native_maxflow.Maxflow(n, u, v, a / 2, a / 2)
    scale = 1.0
    linear = pb.linear.copy()
    for step in range(30):
        if step % 10 == 9:  # a new weight: capacities rescaled, trees kept
            ratio = float(rng.choice([0.5, 2.0, 3.0]))
            solver.scale(ratio)
            scale *= ratio
        current = QuadraticPB(scale * linear, pb.left, pb.right, scale * pb.quadratic, 0.0)
        w = -current.linear - scale * graph.half_degree
        x, parts = solver.solve(w)
        magnitude = float(np.abs(current.linear).sum() + current.quadratic.sum())
        bound = native_maxflow.bound(0.0, parts, magnitude, n + u.shape[0])
        _, vs, bs = maximize(current, backend="scipy")
        value = current.value(x)
        tiny = 1e-9 * max(1.0, magnitude)
        assert abs(value - vs) <= tiny
        assert bound >= vs - tiny and bs >= value - tiny
        assert bound - value <= tiny
        assert solver.visited <= n
        linear = linear + (rng.random(n) < 0.1) * rng.normal(0, 0.5, n)


def test_only_the_changed_nodes_are_revisited() -> None:
    rng = np.random.default_rng(0)
    pb = _random_pb(rng, 50, 200)
    graph = pb._graph_structure()
    u, v, a = graph.pairs
    solver = native_maxflow.Maxflow(50, u, v, a / 2, a / 2)
    w = -pb.linear - graph.half_degree
    solver.solve(w)
    assert solver.visited == 50
    w[[3, 7]] += 1.0
    solver.solve(w)
    assert solver.visited == 2
    solver.solve(w, reuse=False)
    assert solver.visited == 50


def test_copies_and_pickles_rebuild_the_graph() -> None:
    solver = native_maxflow.Maxflow(3, np.array([0, 1]), np.array([1, 2]), np.ones(2), np.ones(2))
    w = np.array([2.0, 0.0, -1.0])
    want = solver.solve(w)
    for other in (copy.deepcopy(solver), pickle.loads(pickle.dumps(solver))):
        got = other.solve(w)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        assert other.visited == 3  # a fresh start


def test_bad_arguments_are_refused() -> None:
    solver = native_maxflow.Maxflow(2, np.array([0]), np.array([1]), np.ones(1), np.ones(1))
    with pytest.raises(ValueError, match="ratio must be > 0"):
        solver.scale(0.0)
    with pytest.raises(ValueError, match=r"w must have shape \(2,\)"):
        solver.solve(np.zeros(3))


def test_without_a_compiler_auto_falls_back_to_scipy(tmp_path: object) -> None:
    code = (
        "import numpy as np, torch\n"
        "from crfhead.higher_order import native_maxflow, decode, Pattern\n"
        "from crfhead.higher_order.pseudo_boolean import resolve_backend\n"
        "print('AVAILABLE', native_maxflow.available())\n"
        "print('WHY', native_maxflow.status()[1])\n"
        "print('AUTO', resolve_backend('auto'))\n"
        "r = decode(torch.zeros(2, 2, 2), torch.zeros(2, 2),"
        " patterns=[Pattern(((0, 0, 1), (1, 1, 1)), 1.0)])\n"
        "print('CERTIFIED', r.certified, r.tags.tolist())\n"
    )
    env = {**os.environ, "CXX": "no-such-compiler", "CRFHEAD_CACHE": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "AVAILABLE False" in done.stdout
    assert "WHY no C++ compiler found" in done.stdout
    assert "AUTO scipy" in done.stdout or "AUTO ortools" in done.stdout
    assert "CERTIFIED True [[1, 0], [0, 1]]" in done.stdout
