"""The optional OR-Tools max-flow backend of :func:`maximize` against the scipy default.

Skipped without the optional package ``ortools``. On random supermodular functions (those of
``test_pseudo_boolean``) both backends must reach the enumerated maximum with a true bound, and give
the same cut where the maximum is unique; the 2-slave decomposition with either backend must decode
random groups alike.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_pseudo_boolean import _all_values, _check_against_enumeration, _random_pb

from crfhead.higher_order import Pattern
from crfhead.higher_order.dd2slave import dd2slave
from crfhead.higher_order.group import prepare
from crfhead.higher_order.pseudo_boolean import QuadraticPB, has_ortools, maximize

pytest.importorskip("ortools.graph.python.max_flow")


@pytest.mark.parametrize("seed", range(300))
def test_ortools_matches_enumeration_and_scipy(seed: int) -> None:
    pb = _random_pb(seed, int(np.random.default_rng(seed).integers(0, 13)))
    x, value, bound = maximize(pb, backend="ortools")
    _check_against_enumeration(pb, x, value, bound)
    sx, svalue, _ = maximize(pb)
    values = _all_values(pb)
    if pb.n and int((values >= values.max() - 1e-9 * max(1.0, abs(values.max()))).sum()) == 1:
        assert np.array_equal(x, sx) and value == svalue  # a unique maximum: the same cut


@pytest.mark.parametrize("seed", range(5))
def test_ortools_on_larger_functions_agrees_with_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m = 3000, 9000
    left, right = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = left != right
    quadratic = rng.exponential(1.0, int(keep.sum()))
    pb = QuadraticPB(rng.normal(0, 2.0, n), left[keep], right[keep], quadratic)
    _, value, bound = maximize(pb, backend="ortools")
    _, svalue, sbound = maximize(pb)
    tiny = 1e-9 * (float(np.abs(pb.linear).sum()) + float(quadratic.sum()))
    assert abs(value - svalue) <= tiny and bound >= value and sbound >= svalue
    assert bound - value <= tiny and min(bound, sbound) >= max(value, svalue)


def test_ortools_reuses_its_solver_across_linear_terms() -> None:
    pb = _random_pb(7, 10)
    maximize(pb, backend="ortools")
    graph = pb._graph_structure()
    solver = graph.push_relabel()
    for shift in (-1.0, 0.0, 2.5):
        moved = pb.with_linear(pb.linear + shift)
        _check_against_enumeration(moved, *maximize(moved, backend="ortools"))
        assert moved._graph_structure().push_relabel() is solver


@pytest.mark.parametrize("seed", range(10))
def test_dd2slave_decodes_alike_with_either_backend(seed: int) -> None:
    rng = np.random.default_rng(seed)
    B, T, K = 3, 6, 3
    em, tr = torch.tensor(rng.normal(size=(B, T, K))), torch.tensor(rng.normal(size=(K, K)))
    patterns = [
        Pattern(((0, int(t), k), (int(b), int(u), k)), float(rng.exponential()))
        for t, b, u in rng.integers((0, 1, 0), (T, B, T), size=(6, 3))
        for k in range(K)
    ]
    group = prepare(em, tr, None, None, None, patterns)
    a, b = dd2slave(group), dd2slave(group, backend="ortools")
    assert abs(a.primal - b.primal) <= 1e-9 * max(1.0, abs(a.primal))
    assert a.certified == b.certified
    if a.certified:
        assert abs(a.dual - b.dual) <= 1e-6 * max(1.0, abs(a.dual))


def test_auto_picks_ortools_when_installed_and_the_native_kernel_is_not() -> None:
    from crfhead.higher_order import native_maxflow

    assert has_ortools()
    pb = _random_pb(11, 9)
    maximize(pb, backend="auto")
    want = "native" if native_maxflow.available() else "ortools"
    assert want in pb._graph_structure()._solvers
