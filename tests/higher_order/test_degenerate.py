"""Degenerate cases of the higher-order decoders: label permutations, constant shifts, duplicates, K = 1,
one token in many cliques, cliques spanning sentences; each checked against the exact optimum."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crfhead.higher_order import Pattern, decode

METHODS = ("dd2slave", "dd_factor", "ilp")


def _group(seed: int, B: int = 3, T: int = 4, K: int = 3) -> tuple[torch.Tensor, ...]:
    rng = np.random.default_rng(seed)
    em = torch.tensor(rng.normal(size=(B, T, K)))
    tr = torch.tensor(rng.normal(size=(K, K)))
    st, en = torch.tensor(rng.normal(size=K)), torch.tensor(rng.normal(size=K))
    return em, tr, st, en


def _skips(K: int, pairs: list[tuple[tuple[int, int], tuple[int, int]]], s: float) -> list[Pattern]:
    return [Pattern(((*u, k), (*v, k)), s) for u, v in pairs for k in range(K)]


@pytest.mark.parametrize("method", METHODS)
def test_permuting_the_labels_permutes_the_answer(method: str) -> None:
    both = 0
    for seed in range(10):
        em, tr, st, en = _group(seed)
        K = em.shape[2]
        patterns = [
            *_skips(K, [((0, 0), (1, 2)), ((1, 1), (2, 3))], 1.5),
            Pattern(((0, 1, 2), (1, 1, 2), (2, 0, 1)), 2.0),
        ]
        perm = torch.tensor([2, 0, 1])  # new label j is old label perm[j]
        inv = torch.argsort(perm)
        moved = [
            Pattern(tuple((b, t, int(inv[k])) for b, t, k in p.cells), p.score) for p in patterns
        ]
        a = decode(em, tr, st, en, None, patterns, method=method)
        b = decode(em[..., perm], tr[perm][:, perm], st[perm], en[perm], None, moved, method=method)
        exact = decode(em, tr, st, en, None, patterns, method="ilp").primal
        assert b.primal == pytest.approx(a.primal, abs=1e-9) or not (a.certified and b.certified)
        if a.certified and b.certified:
            both += 1
            assert torch.equal(perm[b.tags], a.tags)
        for r in (a, b):
            assert r.dual >= exact - 1e-9 and r.primal <= exact + 1e-9
    assert both >= 5, both  # the comparison above ran


@pytest.mark.parametrize("method", METHODS)
def test_a_constant_on_every_entry_of_a_factor_shifts_optimum_and_bound_alike(method: str) -> None:
    em, tr, st, en = _group(3)
    K = em.shape[2]
    table = [Pattern(((0, 0, k), (2, 1, j)), float(k == j)) for k in range(K) for j in range(K)]
    shifted = [Pattern(p.cells, p.score + 0.75) for p in table]
    a = decode(em, tr, st, en, None, table, method=method)
    b = decode(em, tr, st, en, None, shifted, method=method)
    exact = decode(em, tr, st, en, None, table, method="ilp").primal
    exact_shifted = decode(em, tr, st, en, None, shifted, method="ilp").primal
    assert exact_shifted == pytest.approx(exact + 0.75)
    assert a.dual >= exact - 1e-9 and b.dual >= exact_shifted - 1e-9
    assert a.primal <= exact + 1e-9 and b.primal <= exact_shifted + 1e-9
    if a.certified and b.certified:
        assert b.primal == pytest.approx(a.primal + 0.75, abs=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_duplicate_patterns_are_one_pattern_of_their_summed_score(method: str) -> None:
    em, tr, st, en = _group(4)
    p = Pattern(((0, 0, 1), (1, 3, 1)), 1.25)
    twice = decode(em, tr, st, en, None, [p, p], method=method)
    once = decode(em, tr, st, en, None, [Pattern(p.cells, 2.5)], method=method)
    reordered = decode(em, tr, st, en, None, [Pattern(p.cells[::-1], 2.5)], method=method)
    assert twice.primal == pytest.approx(once.primal) == pytest.approx(reordered.primal)
    assert twice.dual_history == pytest.approx(once.dual_history)


@pytest.mark.parametrize("method", METHODS)
def test_one_label_is_certified_at_once(method: str) -> None:
    em, tr, st, en = _group(5, K=1)
    patterns = [
        Pattern(((0, 0, 0), (1, 1, 0)), -2.0),
        Pattern(((0, 1, 0), (2, 2, 0), (1, 0, 0)), 3.0),
    ]
    r = decode(em, tr, st, en, None, patterns, method=method)
    assert r.certified and (r.tags == 0).all()
    want = float(em.sum() + 9 * tr.sum() + 3 * (st + en).sum()) - 2.0 + 3.0  # 3 rows x 3 edges
    assert r.primal == pytest.approx(want)


@pytest.mark.parametrize("method", METHODS)
def test_one_token_in_many_cliques_across_sentences(method: str) -> None:
    em, tr, st, en = _group(6, B=3, T=4, K=2)
    hub = (1, 2)
    patterns = [
        Pattern(((*hub, 1), (b, t, 1), (2 - b if b != 1 else 0, 3, 1)), 1.0)
        for b, t in [(0, 0), (0, 2), (2, 1), (2, 3)]
    ] + [Pattern(((*hub, 0), (0, 1, 0)), -0.5)]
    exact = decode(em, tr, st, en, None, patterns, method="ilp")
    r = decode(em, tr, st, en, None, patterns, method=method, max_iterations=500)
    assert r.dual >= exact.primal - 1e-9 >= r.primal - 1e-9 - 1e-9
    if r.certified:
        assert r.primal == pytest.approx(exact.primal, abs=1e-9)
