"""Higher-order decoding against enumeration: no wrong value, weak duality, no false certificate.

The oracle scores every labelling of a tiny group at once with numpy (chains: start, emissions, the
transitions between consecutive unmasked positions, end; plus the patterns that hold), independently
of the engine and of the decoders. Each method sees 200 random groups in the default suite and 1,000
with ``--full``; ``HO_INSTANCES`` sets any other number.
"""

from __future__ import annotations

import itertools
import math
import os

import numpy as np
import pytest
import torch
from helpers import full

from crfhead.engine import viterbi
from crfhead.engine.potentials import make_potentials
from crfhead.higher_order import METHODS, Pattern, decode
from crfhead.higher_order.dd2slave import TwoSlave
from crfhead.higher_order.dd_factor import _slaves
from crfhead.higher_order.decode import PreparedGroup
from crfhead.higher_order.group import add_to_cells, prepare, viterbi_with
from crfhead.higher_order.pseudo_boolean import maximize
from crfhead.higher_order.reparam import reparameterise

INSTANCES = int(os.environ.get("HO_INSTANCES", "1000" if full() else "200"))
TOL = 1e-6


def _instance(seed: int) -> tuple[torch.Tensor, ...] | tuple[object, ...]:
    rng = np.random.default_rng(seed)
    B, T, K = int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
    mask = rng.random((B, T)) < 0.8
    if rng.random() < 0.2 and B > 1:
        mask[-1] = False  # a fully masked row
    cells = [(b, t) for b in range(B) for t in range(T) if mask[b, t]]
    while len(cells) > 7:  # keep the enumeration small: K ** 7 labellings at most
        b, t = cells.pop(int(rng.integers(len(cells))))
        mask[b, t] = False
    scale = float(rng.choice([0.5, 2.0, 5.0]))
    em = torch.tensor(rng.normal(size=(B, T, K)) * scale)
    tr = torch.tensor(rng.normal(size=(K, K)) * scale)
    st, en = torch.tensor(rng.normal(size=K)), torch.tensor(rng.normal(size=K))
    sign = rng.choice(["positive", "negative", "mixed"])
    patterns = []
    for _ in range(int(rng.integers(0, 7)) if cells else 0):
        size = int(rng.integers(1, min(8, len(cells)) + 1))
        chosen = rng.choice(len(cells), size=size, replace=False)
        s = float(rng.gamma(2.0, scale))
        if sign == "negative" or (sign == "mixed" and rng.random() < 0.5):
            s = -s
        patterns.append(
            Pattern(tuple((*cells[i], int(rng.integers(K))) for i in sorted(chosen)), s)
        )
    return em, tr, st, en, torch.tensor(mask), patterns


def _optimum(em, tr, st, en, mask, patterns) -> tuple[float, np.ndarray]:  # type: ignore[no-untyped-def]
    """(best score, all scores) by enumeration of every labelling of the unmasked positions."""
    B, T, K = em.shape
    cells = [(b, t) for b in range(B) for t in range(T) if mask[b, t]]
    if not cells:
        total = sum(p.score for p in patterns if not p.cells)
        return float(total), np.array([total])
    A = np.array(list(itertools.product(range(K), repeat=len(cells))))  # (N, n)
    E, Tr, S, En = (x.numpy() for x in (em, tr, st, en))
    pos = {c: i for i, c in enumerate(cells)}
    total = np.zeros(len(A))
    for i, (b, t) in enumerate(cells):
        total += E[b, t][A[:, i]]
    for b in range(B):
        row = [pos[(b, t)] for t in range(T) if mask[b, t]]
        if row:
            total += S[A[:, row[0]]] + En[A[:, row[-1]]]
        for i, j in itertools.pairwise(row):
            total += Tr[A[:, i], A[:, j]]
    for p in patterns:
        holds = np.ones(len(A), dtype=bool)
        for b, t, k in p.cells:
            holds &= A[:, pos[(b, t)]] == k
        total += p.score * holds
    return float(total.max()), total


@pytest.mark.parametrize("method", METHODS)
def test_no_wrong_value_weak_duality_and_no_false_certificate(method: str) -> None:
    certified = 0
    for seed in range(INSTANCES):
        em, tr, st, en, mask, patterns = _instance(seed)
        best, _ = _optimum(em, tr, st, en, mask, patterns)
        r = decode(em, tr, st, en, mask, patterns, method=method, max_iterations=200)
        tol = TOL * max(1.0, abs(best))
        group = prepare(em, tr, st, en, mask, patterns)
        assert r.primal == pytest.approx(group.score(r.tags), abs=1e-9), seed
        assert r.primal <= best + tol, (seed, r.primal, best)
        assert ((r.tags >= 0) == mask).all(), seed
        assert r.dual >= best - tol, (seed, r.dual, best)
        assert all(d >= best - tol for d in r.dual_history), seed
        assert all(b >= a for a, b in itertools.pairwise(r.primal_history)), seed
        if r.certified:
            certified += 1
            assert r.primal == pytest.approx(best, abs=tol), (seed, method, r.primal, best)
    if method == "ilp":
        assert certified == INSTANCES
    elif method != "viterbi":
        assert certified >= INSTANCES // 2, certified


def test_the_dual_bounds_the_optimum_at_random_multipliers() -> None:
    for seed in range(60):
        em, tr, st, en, mask, patterns = _instance(1000 + seed)
        best, _ = _optimum(em, tr, st, en, mask, patterns)
        group = prepare(em, tr, st, en, mask, patterns)
        if not group.patterns:
            continue
        rng = np.random.default_rng(seed)
        B, T, K = group.shape
        # 2-slave: L(θ) = V(θ) + P(θ) - K.
        rep = reparameterise(group.token_patterns(), K)
        V = rep.coupled.shape[0]
        theta = rng.normal(size=V) * 3
        tokens = torch.as_tensor(rep.coupled[:, 0])
        labels = torch.as_tensor(rep.coupled[:, 1])
        shifted = add_to_cells(group.chain.emissions, tokens, labels, torch.as_tensor(theta))
        chain, _ = viterbi_with(group, shifted)
        linear = rep.pb.linear.copy()
        linear[:V] -= theta
        _, _, bound = maximize(rep.pb.with_linear(linear))
        assert chain + bound - rep.constant >= best - TOL * max(1, abs(best)), seed
        # Per-pattern: L(θ) = chains(Σ θ_p) + Σ slave_p(θ_p).
        P = len(group.patterns)
        Smax = max(len(p.cells) for p in group.patterns)
        th = torch.tensor(rng.normal(size=(P, Smax, K)) * 3)
        tok = torch.zeros(P, Smax, dtype=torch.long)
        lab = torch.zeros(P, Smax, dtype=torch.long)
        valid = torch.zeros(P, Smax, dtype=torch.bool)
        for i, p in enumerate(group.patterns):
            n = len(p.cells)
            tok[i, :n] = torch.tensor([b * T + t for b, t, _ in p.cells])
            lab[i, :n] = torch.tensor([k for _, _, k in p.cells])
            valid[i, :n] = True
        th = th * valid[..., None]
        score = torch.tensor([p.score for p in group.patterns], dtype=torch.float64)
        shifted = group.chain.emissions.reshape(B * T, K).index_add(0, tok[valid], th[valid])
        chain, _ = viterbi_with(group, shifted.reshape(B, T, K))
        values, _ = _slaves(th, lab, valid, score)
        assert chain + float(values.sum()) >= best - TOL * max(1, abs(best)), seed


def test_a_pattern_slave_is_the_max_over_every_assignment() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        K, n = int(rng.integers(1, 4)), int(rng.integers(2, 5))
        theta = torch.tensor(rng.normal(size=(1, n, K)))
        labels = torch.tensor(rng.integers(0, K, size=(1, n)))
        score = torch.tensor([rng.normal() * 2])
        values, choice = _slaves(theta, labels, torch.ones(1, n, dtype=torch.bool), score)
        brute, arg = -math.inf, None
        for y in itertools.product(range(K), repeat=n):
            v = float(score[0]) * all(y[i] == int(labels[0, i]) for i in range(n))
            v -= sum(float(theta[0, i, y[i]]) for i in range(n))
            if v > brute:
                brute, arg = v, y
        assert float(values[0]) == pytest.approx(brute, abs=1e-12)
        got = tuple(int(c) for c in choice[0])
        v = float(score[0]) * (got == tuple(int(x) for x in labels[0]))
        v -= sum(float(theta[0, i, got[i]]) for i in range(n))
        assert v == pytest.approx(brute, abs=1e-12), (arg, got)


@pytest.mark.parametrize("method", METHODS)
def test_a_chain_only_group_is_viterbi_certified_at_iteration_one(method: str) -> None:
    g = torch.Generator().manual_seed(0)
    em = torch.randn(3, 5, 4, generator=g, dtype=torch.float64)
    tr = torch.randn(4, 4, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], dtype=torch.bool)
    _, want = viterbi(make_potentials(em, tr, mask=mask))
    for patterns in ([], [Pattern(((0, 0, 1), (1, 2, 1)), 0.0)]):
        r = decode(em, tr, mask=mask, patterns=patterns, method=method)
        assert torch.equal(r.tags, want)
        assert r.certified and r.iterations == 1 and r.primal == pytest.approx(r.dual)
        assert r.method == method


def test_bad_patterns_and_methods_are_refused_by_name() -> None:
    em = torch.zeros(1, 3, 2)
    tr = torch.zeros(2, 2)
    mask = torch.tensor([[True, False, True]])
    with pytest.raises(ValueError, match=r"pattern 0 has cell .* at a masked position"):
        decode(em, tr, mask=mask, patterns=[Pattern(((0, 1, 0), (0, 2, 0)), 1.0)])
    with pytest.raises(ValueError, match=r"pattern 1 has cell \(0, 0, 5\) outside"):
        decode(em, tr, patterns=[Pattern(((0, 0, 0),), 1.0), Pattern(((0, 0, 5),), 1.0)])
    with pytest.raises(ValueError, match="two cells on one position"):
        decode(em, tr, patterns=[Pattern(((0, 0, 0), (0, 0, 1)), 1.0)])
    with pytest.raises(ValueError, match="non-finite score"):
        decode(em, tr, patterns=[Pattern(((0, 0, 0), (0, 1, 1)), math.nan)])
    with pytest.raises(ValueError, match="pattern 1 has no cells"):
        decode(em, tr, patterns=[Pattern(((0, 0, 0),), 1.0), Pattern((), 1.0)])
    with pytest.raises(ValueError, match="pattern 0 must be a Pattern, got tuple"):
        decode(em, tr, patterns=[(((0, 0, 0),), 1.0)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"pattern 0 has cell \(0, -1, 0\) outside"):
        decode(em, tr, patterns=[Pattern(((0, -1, 0), (0, 0, 0)), 1.0)])
    with pytest.raises(ValueError, match=r"pattern 0 has cell \(0, 0.0, 0\): not three integers"):
        decode(em, tr, patterns=[Pattern(((0, 0.0, 0), (0, 2, 0)), 1.0)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="method must be one of"):
        decode(em, tr, method="bp")
    with pytest.raises(ValueError, match=r"shared transitions \(K, K\)"):
        decode(em, torch.zeros(1, 2, 2, 2))


@pytest.mark.parametrize("method", METHODS)
def test_a_huge_uncoupled_sentence_cannot_certify_a_suboptimal_labelling(method: str) -> None:
    """Sentence 0 scores ~2e11 and no pattern touches it; sentence 1's chain prefers ``[0, 0]`` by 2
    and a pattern adds 50 to ``[1, 1]``: the optimum is 48 above the chain's labelling. A tolerance
    relative to the whole group's score (1e-9 of 2e11 = 200) would certify the chain's labelling."""
    rng = np.random.default_rng(7)
    em = torch.zeros(2, 2, 2, dtype=torch.float64)
    em[0] = torch.tensor(1e11 + rng.normal(size=(2, 2)))  # the chain scores ~2e11
    em[1] = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    tr = torch.zeros(2, 2, dtype=torch.float64)
    st = en = torch.zeros(2, dtype=torch.float64)
    mask = torch.ones(2, 2, dtype=torch.bool)
    patterns = [Pattern(((1, 0, 1), (1, 1, 1)), 50.0)]
    best, _ = _optimum(em, tr, st, en, mask, patterns)
    r = decode(em, tr, st, en, mask, patterns, method=method)
    assert r.dual >= best - 1e-3
    if r.certified:
        assert r.primal == pytest.approx(best, abs=1e-3), (r.primal, best)
    if method != "viterbi":  # the coupled part is tiny and LP-tight: every decomposition solves it
        assert r.certified and r.tags[1].tolist() == [1, 1]


@pytest.mark.parametrize("method", METHODS)
def test_a_sentence_with_no_allowed_labelling_is_named(method: str) -> None:
    em = torch.zeros(3, 2, 2)
    em[2, 1] = -math.inf  # sentence 2: every label of its second token forbidden
    patterns = [Pattern(((0, 0, 1), (1, 1, 1)), 1.0)]
    for given in (patterns, []):
        with pytest.raises(ValueError, match="sentence 2 of the group has no allowed labelling"):
            decode(em, torch.zeros(2, 2), patterns=given, method=method)
    start = torch.tensor([-math.inf, -math.inf])  # every start forbidden: sentence 0 first
    with pytest.raises(ValueError, match="sentence 0 of the group has no allowed labelling"):
        decode(torch.zeros(2, 2, 2), torch.zeros(2, 2), start, patterns=patterns, method=method)


def test_patterns_checked_at_once_name_the_first_bad_one_as_one_by_one() -> None:
    """The vectorised check refuses exactly what the walk over the patterns refuses, with its message."""
    from crfhead.higher_order.patterns import _name_the_first_fault, check_patterns

    B, T, K = 3, 4, 3
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, 3] = False
    refused = 0
    for seed in range(300):
        rng = np.random.default_rng(seed)
        patterns = []
        for _ in range(int(rng.integers(1, 6))):
            n = int(rng.integers(0 if rng.random() < 0.05 else 1, 4))
            cells = tuple(
                (
                    int(rng.integers(-1, B + 1)) if rng.random() < 0.05 else int(rng.integers(B)),
                    int(rng.integers(T + 1)) if rng.random() < 0.1 else int(rng.integers(T)),
                    int(rng.integers(K + 1)) if rng.random() < 0.05 else int(rng.integers(K)),
                )
                for _ in range(n)
            )
            score = math.inf if rng.random() < 0.03 else float(rng.normal())
            patterns.append(Pattern(cells, score))
        try:
            _name_the_first_fault(patterns, (B, T, K), mask)
        except ValueError as walk:
            if "integer cells" in str(walk):  # the walk accepts them: check_patterns must too
                check_patterns(patterns, (B, T, K), mask)
                continue
            refused += 1
            with pytest.raises(ValueError) as at_once:
                check_patterns(patterns, (B, T, K), mask)
            assert str(at_once.value) == str(walk), seed
    assert refused > 50, refused


def _scaled(patterns: list[Pattern], scale: float) -> list[Pattern]:
    return [Pattern(p.cells, p.score * scale) for p in patterns]


@pytest.mark.parametrize("method", METHODS)
def test_a_prepared_group_decodes_every_scale_as_a_fresh_decode(method: str) -> None:
    """One :class:`PreparedGroup` over a grid of scales (the 2-slave structure built once,
    rescaled, warm-started): at each scale no wrong value, weak duality, no false certificate."""
    certified = total = 0
    for seed in range(INSTANCES // 4):
        em, tr, st, en, mask, patterns = _instance(5000 + seed)
        prepared = PreparedGroup(em, tr, st, en, mask, patterns)
        for scale in (0.0, 0.5, 1.0, 2.0, 8.0, 3.0):
            scaled = _scaled(patterns, scale)
            best, _ = _optimum(em, tr, st, en, mask, scaled)
            r = prepared.decode(scale, method, max_iterations=200)
            tol = TOL * max(1.0, abs(best))
            group = prepare(em, tr, st, en, mask, scaled)
            assert r.primal == pytest.approx(group.score(r.tags), abs=1e-9), (seed, scale)
            assert r.primal <= best + tol and r.dual >= best - tol, (seed, scale, r)
            assert all(d >= best - tol for d in r.dual_history), (seed, scale)
            assert ((r.tags >= 0) == mask).all()
            total += 1
            if r.certified:
                certified += 1
                assert r.primal == pytest.approx(best, abs=tol), (seed, scale, method)
            if scale == 0.0:
                assert r.certified and r.iterations == 1
    if method not in ("viterbi",):
        assert certified >= total // 2, (certified, total)


@pytest.mark.parametrize(
    ("tree_edges", "backend"), [(True, "auto"), (False, "auto"), (True, "scipy")]
)
def test_two_slave_with_and_without_tree_edges_is_sound(tree_edges: bool, backend: str) -> None:
    """Pair terms of consecutive tokens in the chain slave (the seed's placement) or in the cut, on
    the native cut or scipy's: each bounds the optimum and never certifies a wrong labelling, with
    and without a warm start."""
    for seed in range(INSTANCES // 2):
        em, tr, st, en, mask, patterns = _instance(9000 + seed)
        group = prepare(em, tr, st, en, mask, patterns)
        if not group.patterns:
            continue
        two = TwoSlave(group, backend=backend, tree_edges=tree_edges)
        for scale, warm in ((1.0, False), (2.0, True), (0.5, True)):
            best, _ = _optimum(em, tr, st, en, mask, _scaled(patterns, scale))
            tol = TOL * max(1.0, abs(best))
            r = two.decode(scale, max_iterations=150, warm=warm)
            assert r.dual >= best - tol and r.primal <= best + tol, (seed, scale)
            if r.certified:
                assert r.primal == pytest.approx(best, abs=tol), (seed, scale)


def test_adjacent_pair_patterns_live_in_the_chain_slave_alone() -> None:
    """Size-2 patterns between consecutive positions of one sentence (a hole between them counts
    as consecutive) are transitions: nothing is coupled, the Viterbi of the augmented chains is
    exact and certified at iteration 1, whatever the signs."""
    rng = np.random.default_rng(3)
    for seed in range(40):
        B, T, K = 2, 4, 3
        em = torch.tensor(rng.normal(size=(B, T, K)))
        tr = torch.tensor(rng.normal(size=(K, K)))
        mask = torch.ones(B, T, dtype=torch.bool)
        mask[1, 2] = False
        steps = [(0, 0, 1), (0, 1, 2), (0, 2, 3), (1, 0, 1), (1, 1, 3)]
        patterns = [
            Pattern(((b, t, k), (b, u, j)), float(rng.normal() * 3))
            for b, t, u in steps
            for k in range(K)
            for j in range(K)
            if rng.random() < 0.6
        ]
        group = prepare(em, tr, None, None, mask, patterns)
        two = TwoSlave(group)
        assert two.rows.shape == (0,) and two.V == 0
        best, _ = _optimum(em, tr, torch.zeros(K), torch.zeros(K), mask, patterns)
        r = two.decode(1.0)
        assert r.certified and r.iterations == 1, seed
        assert r.primal == pytest.approx(best, abs=1e-9) and r.dual == pytest.approx(best, abs=1e-9)
        assert r.primal == pytest.approx(group.score(r.tags), abs=1e-9)
        # In the cut instead, the same group needs multipliers.
        assert TwoSlave(group, tree_edges=False).V > 0


def test_only_the_coupled_sentences_are_iterated_and_the_rest_is_their_viterbi() -> None:
    g = torch.Generator().manual_seed(1)
    em = torch.randn(4, 5, 3, generator=g, dtype=torch.float64)
    tr = torch.randn(3, 3, generator=g, dtype=torch.float64)
    patterns = [Pattern(((0, 1, 2), (2, 3, 2)), 4.0), Pattern(((0, 4, 1), (2, 0, 1)), 2.5)]
    group = prepare(em, tr, None, None, None, patterns)
    two = TwoSlave(group)
    assert two.rows.tolist() == [0, 2]
    r = two.decode(1.0)
    _, alone = viterbi(make_potentials(em, tr))
    assert torch.equal(r.tags[[1, 3]], alone[[1, 3]])
    # The optimum: rows 0 and 2 enumerated (the patterns re-indexed), plus rows 1 and 3 alone.
    sub = [Pattern(tuple((b // 2, t, k) for b, t, k in p.cells), p.score) for p in patterns]
    zeros, on = torch.zeros(3, dtype=torch.float64), torch.ones(2, 5, dtype=torch.bool)
    best, _ = _optimum(em[[0, 2]], tr, zeros, zeros, on, sub)
    rest, _ = viterbi(make_potentials(em[[1, 3]], tr))
    best += float(rest.sum())
    assert r.dual >= best - 1e-9 and r.certified
    assert r.primal == pytest.approx(best, abs=1e-9)
    assert r.primal == pytest.approx(group.score(r.tags), abs=1e-9)


def test_a_prepared_group_refuses_bad_scales_and_methods() -> None:
    prepared = PreparedGroup(torch.zeros(1, 2, 2), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="scale must be >= 0"):
        prepared.decode(-1.0)
    with pytest.raises(ValueError, match="method must be one of"):
        prepared.decode(1.0, method="bp")
    with pytest.raises(ValueError, match="maxflow must be one of"):
        PreparedGroup(torch.zeros(1, 2, 2), torch.zeros(2, 2), maxflow="networkx")
    group = prepare(torch.zeros(1, 2, 2), torch.zeros(2, 2), None, None, None, [])
    with pytest.raises(ValueError, match="scale must be > 0"):
        TwoSlave(group).decode(0.0)


def test_the_two_slave_bound_is_never_above_the_chains_bound_nor_its_primal_below_viterbi() -> None:
    """The chains' optimum plus every positive pattern caps the 2-slave dual (the cut is loose on
    negative patterns), and the chains' labelling is a primal candidate, with or without a warm
    start."""
    for seed in range(INSTANCES // 2):
        em, tr, st, en, mask, patterns = _instance(7000 + seed)
        chains = decode(em, tr, st, en, mask, patterns, method="viterbi")
        prepared = PreparedGroup(em, tr, st, en, mask, patterns)
        for _ in range(2):
            r = prepared.decode(1.0, max_iterations=30)
            tol = 1e-9 * max(1.0, abs(chains.dual))
            assert r.dual <= chains.dual + tol, seed
            assert r.primal >= chains.primal - tol, seed
