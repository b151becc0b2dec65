"""The reparameterisation ψ of patterns against enumeration (steps 2 and 6 of its construction).

For random pattern sets over tiny groups, every labelling ``y`` of the coupled tokens is
enumerated: the patterns' score ``g(y)`` is computed here from the patterns themselves, and the
reparameterised function's ``max_w pb(z(y), w)`` by maximising over the auxiliaries with the
``z``'s fixed (in closed form when no two auxiliaries interact, else by enumeration), independently
of the min cut. The identity ``max_w pb(z(y), w) - constant == g(y)`` must hold to 1e-9. Seed
``001`` (Qian & Liu 2014); the auxiliary constructions are Živný & Jeavons (2010)'s.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crfhead.higher_order.pseudo_boolean import maximize
from crfhead.higher_order.reparam import Reparameterised, reparameterise

Patterns = list[tuple[tuple[tuple[int, int], ...], float]]


def _labellings(tokens: list[int], L: int) -> np.ndarray:
    """``(L^T, T)``: every labelling of ``tokens`` (columns in the order of ``tokens``)."""
    rows = list(itertools.product(range(L), repeat=len(tokens)))
    return np.array(rows, dtype=np.int64).reshape(len(rows), len(tokens))


def _g(patterns: Patterns, tokens: list[int], Y: np.ndarray) -> np.ndarray:
    """``(N,)``: the summed score of the patterns that hold in each row of ``Y``."""
    column = {t: c for c, t in enumerate(tokens)}
    total = np.zeros(Y.shape[0])
    for cells, s in patterns:
        holds = np.ones(Y.shape[0], dtype=bool)
        for t, k in cells:
            holds &= Y[:, column[t]] == k
        total += s * holds
    return total


def _max_over_aux(rep: Reparameterised, Z: np.ndarray) -> np.ndarray:
    """``(N,)``: ``max_w pb(z, w)`` for each row ``z`` of ``Z`` ``(N, V)``."""
    pb, V = rep.pb, Z.shape[1]
    A = pb.n - V
    X = np.concatenate([Z.astype(np.float64), np.zeros((Z.shape[0], A))], axis=1)
    left, right, q = pb.left, pb.right, pb.quadratic
    zz = (left < V) & (right < V)
    fixed = pb.constant + X[:, :V] @ pb.linear[:V] + (X[:, left[zz]] * X[:, right[zz]]) @ q[zz]
    ww = (left >= V) & (right >= V)
    # the auxiliaries' linear terms once the z's are fixed: (N, A)
    aux_linear = np.tile(pb.linear[V:], (Z.shape[0], 1))
    for e in np.flatnonzero(~zz & ~ww):
        z, w = (left[e], right[e]) if left[e] < V else (right[e], left[e])
        aux_linear[:, w - V] += q[e] * X[:, z]
    if not ww.any():  # separable: each auxiliary on iff its term is positive
        return fixed + np.maximum(aux_linear, 0.0).sum(axis=1)
    assert A <= 12, "interacting auxiliaries: too many to enumerate"
    W = ((np.arange(2**A)[:, None] >> np.arange(A)) & 1).astype(np.float64)
    pair = (W[:, left[ww] - V] * W[:, right[ww] - V]) @ q[ww]
    return fixed + (aux_linear @ W.T + pair[None, :]).max(axis=1)


def _one_hot(rep: Reparameterised, tokens: list[int], Y: np.ndarray) -> np.ndarray:
    """``(N, V)``: ``z(y)`` in the order of ``rep.coupled``."""
    column = {t: c for c, t in enumerate(tokens)}
    cols = np.array([column[int(t)] for t in rep.coupled[:, 0]], dtype=np.int64)
    return Y[:, cols] == rep.coupled[:, 1][None, :]


def _check_identity(patterns: Patterns, L: int) -> Reparameterised:
    rep = reparameterise(patterns, L)
    tokens = sorted({t for cells, s in patterns if s != 0 for t, _ in cells})
    Y = _labellings(tokens, L)
    want = _g(patterns, tokens, Y)
    got = _max_over_aux(rep, _one_hot(rep, tokens, Y)) - rep.constant
    scale = max(1.0, sum(abs(s) for _, s in patterns))
    assert np.abs(got - want).max(initial=0.0) <= 1e-9 * scale
    return rep


def _random_patterns(seed: int) -> tuple[Patterns, int]:
    rng = np.random.default_rng(seed)
    L = int(rng.integers(1, 4))
    n_tokens = int(rng.integers(2, 9 if L == 2 else 6))  # at most 3^5 or 2^8 labellings
    tokens = sorted(rng.choice(50, size=n_tokens, replace=False).tolist())  # non-contiguous ids
    sign = rng.choice(["positive", "negative", "mixed"])

    def score() -> float:
        s = float(rng.gamma(2.0, 1.5))
        return -s if sign == "negative" or (sign == "mixed" and rng.random() < 0.5) else s

    patterns: Patterns = []
    for _ in range(int(rng.integers(0, 3))):  # dense tables over token pairs
        i, j = rng.choice(tokens, size=2, replace=False).tolist()
        patterns += [(((i, k), (j, m)), score()) for k in range(L) for m in range(L)]
    for _ in range(int(rng.integers(0, 6))):  # patterns of sizes 2..8
        size = int(rng.integers(2, n_tokens + 1))
        chosen = rng.choice(tokens, size=size, replace=False).tolist()
        patterns.append((tuple((int(t), int(rng.integers(L))) for t in chosen), score()))
    if patterns and rng.random() < 0.3:
        patterns.append(patterns[int(rng.integers(len(patterns)))])  # a duplicate
    return patterns, L


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_identity_on_every_labelling(seed: int) -> None:
    patterns, L = _random_patterns(seed)
    rep = _check_identity(patterns, L)
    tokens = sorted({t for cells, s in patterns if s != 0 for t, _ in cells})
    assert rep.coupled.shape == (len(tokens) * L, 2) and rep.coupled.dtype == np.int64
    assert (rep.pb.quadratic > 0).all()


@pytest.mark.parametrize("size", range(2, 9))
@pytest.mark.parametrize("score", [-2.5, 1.75])
def test_one_pattern_of_each_size_and_sign(size: int, score: float) -> None:
    # L = 2 and the pattern on label 1: Σz over the pattern's cells takes every value 0..size.
    rep = _check_identity([(tuple((3 * t, 1) for t in range(size)), score)], 2)
    auxiliaries = rep.pb.n - rep.coupled.shape[0]
    assert auxiliaries == (0 if size == 2 else 1 if score > 0 or size == 3 else size - 3)


def test_every_label_of_a_coupled_token_is_coupled() -> None:
    rep = reparameterise([(((7, 2), (2, 0)), 1.0)], 4)
    assert rep.coupled.tolist() == [[2, k] for k in range(4)] + [[7, k] for k in range(4)]
    assert rep.index == {(t, k): v for v, (t, k) in enumerate(rep.coupled.tolist())}
    assert rep.pb.linear.shape == (8,) and not rep.pb.linear.any()


def test_a_negative_table_is_shifted_by_its_most_negative_entry() -> None:
    rep = _check_identity([(((0, 0), (1, 1)), -3.0), (((0, 1), (1, 1)), 1.0)], 2)
    assert rep.constant == 3.0
    assert sorted(rep.pb.quadratic.tolist()) == [3.0, 3.0, 4.0]  # the -3 entry becomes 0: dropped


def test_no_patterns() -> None:
    for patterns in ([], [(((0, 0), (1, 0)), 0.0)]):
        rep = reparameterise(patterns, 3)
        assert rep.coupled.shape == (0, 2) and rep.index == {}
        assert rep.pb.n == 0 and rep.constant == 0.0
        x, value, bound = maximize(rep.pb)
        assert x.shape == (0,) and value == bound == 0.0


def test_one_token_in_many_patterns() -> None:
    rng = np.random.default_rng(0)
    patterns: Patterns = []
    for other in range(1, 6):
        for size in (2, 3):
            cells = ((0, 1), (other, int(rng.integers(3))))
            if size == 3:
                cells += ((other % 5 + 1, int(rng.integers(3))),)
            patterns.append((cells, float(rng.normal(0, 2))))
    _check_identity(patterns, 3)


def test_duplicates_add() -> None:
    once = [(((0, 1), (1, 0), (2, 1)), -4.0), (((0, 0), (2, 0)), 1.5)]
    twice = [(((0, 1), (1, 0), (2, 1)), -2.0)] * 2 + [(((2, 0), (0, 0)), 0.75)] * 2
    Y = _labellings([0, 1, 2], 2)
    for patterns in (once, twice):
        rep = _check_identity(patterns, 2)
        got = _max_over_aux(rep, _one_hot(rep, [0, 1, 2], Y)) - rep.constant
        assert np.allclose(got, _g(once, [0, 1, 2], Y), atol=1e-12)


def test_one_label() -> None:
    rep = _check_identity([(((0, 0), (1, 0), (4, 0)), -2.0), (((0, 0), (4, 0)), 0.5)], 1)
    assert rep.coupled.tolist() == [[0, 0], [1, 0], [4, 0]]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_min_cut_slave_bounds_every_labelling(seed: int) -> None:
    # P(θ) = max_x pb(x) - θ·z >= max_y g(y) + K - θ·z(y): what weak duality needs of the slave.
    patterns, L = _random_patterns(seed)
    rep = reparameterise(patterns, L)
    rng = np.random.default_rng(seed)
    V = rep.coupled.shape[0]
    theta = rng.normal(0, 2.0, V)
    linear = rep.pb.linear.copy()
    linear[:V] -= theta
    _, _, bound = maximize(rep.pb.with_linear(linear))
    tokens = sorted({t for cells, s in patterns if s != 0 for t, _ in cells})
    Y = _labellings(tokens, L)
    Z = _one_hot(rep, tokens, Y)
    best = float((_g(patterns, tokens, Y) + rep.constant - Z @ theta).max())
    assert bound >= best - 1e-12 * max(1.0, abs(best))


@pytest.mark.parametrize(
    ("patterns", "L"),
    [
        ([(((0, 0),), 1.0)], 2),  # size 1
        ([(((0, 0), (0, 1)), 1.0)], 2),  # two cells on one token
        ([(((0, 2), (1, 0)), 1.0)], 2),  # label out of range
        ([(((-1, 0), (1, 0)), 1.0)], 2),  # negative token
        ([(((0, 0), (1, 0)), float("inf"))], 2),
        ([], 0),
    ],
)
def test_malformed_patterns_are_refused(patterns: Patterns, L: int) -> None:
    with pytest.raises(ValueError):
        reparameterise(patterns, L)


def _reference_terms(
    patterns: Patterns, L: int
) -> tuple[list[tuple[int, int, float]], list[float], float]:
    """ψ written pattern by pattern (the module docstring's steps, a plain loop over the patterns).

    Returns the pairwise terms ``(u, v, coefficient)`` (merged per unordered pair), the linear terms
    of the auxiliaries in order, and ``K``.
    """
    kept = [(cells, s) for cells, s in patterns if s != 0.0]
    tokens = sorted({t for cells, _ in kept for t, _ in cells})
    slot = {t: i for i, t in enumerate(tokens)}
    V = len(tokens) * L
    tables: dict[tuple[int, int], np.ndarray] = {}
    aux: list[tuple[list[int], float, float]] = []
    for cells, s in kept:
        n = len(cells)
        if n == 2 or s < 0:
            for (ta, ka), (tb, kb) in itertools.combinations(cells, 2):
                if slot[ta] > slot[tb]:
                    (ta, ka), (tb, kb) = (tb, kb), (ta, ka)
                tables.setdefault((slot[ta], slot[tb]), np.zeros((L, L)))[ka, kb] += s
        zs = [slot[t] * L + k for t, k in cells]
        if n >= 3 and s > 0:
            aux.append((zs, s, s * (1 - n)))
        elif n == 3:
            aux.append((zs, -s, s))
        elif n >= 4:
            aux.append((zs, -2 * s, 3 * s))
            aux.extend((zs, -s, (a + 2) * s) for a in range(1, n - 3))
    terms: dict[tuple[int, int], float] = {}
    constant = 0.0
    for (i, j), table in tables.items():
        shift = max(0.0, -float(table.min()))
        constant += shift
        for k, m in zip(*np.nonzero(table + shift > 0), strict=True):
            terms[(i * L + int(k), j * L + int(m))] = float(table[k, m] + shift)
    for a, (zs, coef, _) in enumerate(aux):
        for u in zs:
            terms[(u, V + a)] = terms.get((u, V + a), 0.0) + coef
    return [(u, v, c) for (u, v), c in terms.items()], [lin for _, _, lin in aux], constant


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_vectorised_construction_matches_a_pattern_by_pattern_loop(seed: int) -> None:
    patterns, L = _random_patterns(seed)
    rep = reparameterise(patterns, L)
    terms, aux_linear, constant = _reference_terms(patterns, L)
    V = rep.coupled.shape[0]
    assert np.array_equal(rep.pb.linear[:V], np.zeros(V))
    assert np.allclose(rep.pb.linear[V:], aux_linear, rtol=1e-12, atol=0.0)
    assert rep.pb.linear.shape[0] == V + len(aux_linear)
    assert abs(rep.constant - constant) <= 1e-12 * max(1.0, abs(constant))
    got: dict[tuple[int, int], float] = {}
    for u, v, c in zip(
        rep.pb.left.tolist(), rep.pb.right.tolist(), rep.pb.quadratic.tolist(), strict=True
    ):
        got[(u, v)] = got.get((u, v), 0.0) + c
    want = dict(((u, v), c) for u, v, c in terms)
    assert got.keys() == want.keys()
    for key, c in want.items():
        assert abs(got[key] - c) <= 1e-12 * max(1.0, abs(c))


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_chain_tables_plus_the_cut_are_the_patterns_on_every_labelling(seed: int) -> None:
    """Pair tables of chain edges moved out of the cut: ``max_w pb(z(y), w)`` plus the tables at
    ``y`` minus ``K`` is ``g(y)`` on every labelling; a token left without a term is not coupled."""
    patterns, L = _random_patterns(seed)
    rng = np.random.default_rng(seed)
    tokens = sorted({t for cells, s in patterns if s != 0 for t, _ in cells})
    pairs = [(i, j) for a, i in enumerate(tokens) for j in tokens[a + 1 :]]
    edges = np.array([p for p in pairs if rng.random() < 0.5] or [(0, 1)], dtype=np.int64).reshape(
        -1, 2
    )
    rep = reparameterise(patterns, L, edges)
    Y = _labellings(tokens, L)
    column = {t: c for c, t in enumerate(tokens)}
    want = _g(patterns, tokens, Y)
    got = _max_over_aux(rep, _one_hot(rep, tokens, Y)) - rep.constant
    for (i, j), table in zip(rep.chain_pairs.tolist(), rep.chain_tables, strict=True):
        assert [i, j] in edges.tolist()
        got = got + table[Y[:, column[i]], Y[:, column[j]]]
    scale = max(1.0, sum(abs(s) for _, s in patterns))
    assert np.abs(got - want).max(initial=0.0) <= 1e-9 * scale
    # Every coupled token keeps a term in the cut: a kept pair or a pattern of size >= 3.
    touched = set(rep.pb.left[rep.pb.left < rep.coupled.shape[0]].tolist())
    touched |= set(rep.pb.right[rep.pb.right < rep.coupled.shape[0]].tolist())
    coupled_tokens = set(rep.coupled[:, 0].tolist())
    big = {t for cells, s in patterns if s != 0 and len(cells) >= 3 for t, _ in cells}
    assert {int(rep.coupled[v, 0]) for v in touched} <= coupled_tokens
    assert big <= coupled_tokens


def test_an_adjacent_pair_alone_leaves_nothing_to_couple() -> None:
    patterns = [(((3, 0), (4, 1)), 2.0), (((3, 1), (4, 1)), -1.0)]
    rep = reparameterise(patterns, 2, np.array([[3, 4]]))
    assert rep.coupled.shape == (0, 2) and rep.pb.n == 0 and rep.constant == 0.0
    assert rep.chain_pairs.tolist() == [[3, 4]]
    assert rep.chain_tables.tolist() == [[[0.0, 2.0], [0.0, -1.0]]]
