"""Forbidden is structural: every backend is exact at any score scale, against enumeration.

Forbidden starts, emissions, transitions and ends are ``-inf`` (:data:`crfhead.IMPOSSIBLE`) and are
excluded exactly, whatever the magnitude of the other scores (1e-3 to 1e6 here); "no such path" is
decided by structure, never by comparing a score with a threshold. Valid paths far below -1e4 are
ordinary paths. Rows with no valid path, empty rows and padding never give NaN. Each test runs on
every backend available here (the Triton one under ``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import itertools
import math
import os
from typing import Any

import pytest
import torch
from brute import enumerate_rows
from helpers import full, random_chain

from crfhead import CRF, make_potentials
from crfhead.engine import (
    constrain,
    entropy,
    log_partition,
    marginals,
    max_marginals,
    nll,
    posterior_decode,
    sample,
    score,
    topk,
    viterbi,
)
from crfhead.engine.backends import available, use_backend
from crfhead.schemes import allowed_transitions

F64 = torch.float64
INF = math.inf
BACKENDS = ["portable"] + [b for b in ("cpu",) if available(b)[0]]
if os.environ.get("TRITON_INTERPRET") == "1" and available("triton")[0]:
    BACKENDS.append("triton")
SCALES = [1e-3, 1.0, 1e2, 1e4, 1e6]


def sweep(scales: list[float] = SCALES) -> list[Any]:
    """``(backend, scale)`` for every backend and scale. Triton's interpreter takes a second a
    launch: there the default suite runs the scales 1 and the largest, the others only with --full."""
    keep = {1.0, max(scales)}
    return [
        pytest.param(b, s, marks=[pytest.mark.slow] if b == "triton" and s not in keep else [])
        for b in BACKENDS
        for s in scales
    ]


def forbidden_chain(
    seed: int, B: int, T: int, K: int, per_position: bool, scale: float, dtype: torch.dtype = F64
) -> tuple[torch.Tensor, ...]:
    """A random chain at ``scale`` with about a quarter of every kind of score forbidden (``-inf``).

    Some rows may have no valid path at all; the generator's mask has holes and a full first row.
    """
    c = random_chain(seed, B, T, K, per_position=per_position, dtype=F64, scale=scale)
    g = torch.Generator().manual_seed(77_000 + seed)
    E, Tr = c.emissions.clone(), c.transitions.clone()
    s, e = c.start.clone() * scale, c.end.clone() * scale
    for x, p in ((E, 0.2), (Tr, 0.3), (s, 0.25), (e, 0.25)):
        x[torch.rand(x.shape, generator=g) < p] = -INF
    return E.to(dtype), Tr.to(dtype), s.to(dtype), e.to(dtype), c.mask


def _tolerance(scale: float, T: int, dtype: torch.dtype) -> float:
    eps = 1e-12 if dtype == F64 else 2e-5
    return eps * max(1.0, scale * (2 * T + 2))


@pytest.mark.parametrize(("backend", "scale"), sweep())
@pytest.mark.parametrize("per_position", [False, True])
def test_log_z_marginals_and_viterbi_match_enumeration_at_every_scale(
    backend: str, scale: float, per_position: bool
) -> None:
    for seed in range(6):
        T, K = 1 + seed % 5, 2 + seed % 3
        args = forbidden_chain(seed, 3, T, K, per_position, scale)
        pot = make_potentials(*args)
        rows = enumerate_rows(*args)
        tol = _tolerance(scale, T, F64)
        with use_backend(backend):
            logz = log_partition(pot)
            node = marginals(pot)
            best, paths = viterbi(pot)
        want = torch.tensor([r.log_partition for r in rows], dtype=F64)
        assert torch.equal(torch.isneginf(logz), torch.isneginf(want)), (seed, logz, want)
        finite = torch.isfinite(want)
        torch.testing.assert_close(logz[finite], want[finite], rtol=0, atol=tol)
        torch.testing.assert_close(
            node, torch.stack([r.node_marginals() for r in rows]), rtol=0, atol=1e-9
        )
        assert bool((node[torch.isneginf(args[0])] == 0).all()), "a forbidden tag has mass"
        for b, row in enumerate(rows):
            want_best, _ = row.best()
            if want_best == -INF:
                assert float(best[b]) == -INF and bool((paths[b] == -1).all())
                continue
            assert float(best[b]) == pytest.approx(want_best, abs=tol)
            got = paths[b].tolist()
            assert got in row.paths, (seed, b, got)  # a valid path ...
            assert row.scores[row.paths.index(got)] == pytest.approx(want_best, abs=tol)  # ... best


@pytest.mark.parametrize(("backend", "scale"), sweep())
def test_float32_inputs_are_exact_to_float32_precision_at_every_scale(
    backend: str, scale: float
) -> None:
    for seed in range(4):
        T, K = 2 + seed, 3
        args64 = forbidden_chain(100 + seed, 3, T, K, False, scale)
        args = tuple(x.float() if x.is_floating_point() else x for x in args64)
        rows = enumerate_rows(*args)  # the float32 scores, enumerated in float64
        pot = make_potentials(*args)
        with use_backend(backend):
            logz = log_partition(pot).double()
            node = marginals(pot).double()
            paths = viterbi(pot)[1]
        tol = _tolerance(scale, T, torch.float32)
        for b, row in enumerate(rows):
            assert float(logz[b]) == pytest.approx(row.log_partition, abs=tol)
            if row.scores:
                got = paths[b].tolist()
                assert got in row.paths
                assert row.scores[row.paths.index(got)] == pytest.approx(row.best()[0], abs=tol)
        torch.testing.assert_close(
            node, torch.stack([r.node_marginals() for r in rows]), rtol=0, atol=2e-3
        )


@pytest.mark.parametrize(("backend", "scale"), sweep())
def test_topk_reports_exactly_the_valid_paths_whatever_their_scores(
    backend: str, scale: float
) -> None:
    for seed in range(6):
        T, K = 1 + seed % 4, 2 + seed % 2
        args = forbidden_chain(200 + seed, 3, T, K, bool(seed % 2), scale)
        k = 6
        scores, paths = topk(make_potentials(*args), k, backend=backend)
        for b, row in enumerate(enumerate_rows(*args)):
            want = row.sorted_scores()[:k]
            n = len(want)
            torch.testing.assert_close(
                scores[b, :n], torch.tensor(want, dtype=F64), rtol=0, atol=_tolerance(scale, T, F64)
            )
            assert bool((scores[b, n:] == -INF).all()) and bool((paths[b, n:] == -1).all())
            for j in range(n if row.positions else 0):
                assert paths[b, j].tolist() in row.paths


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_constrained_layer_never_decodes_a_forbidden_move_under_huge_emissions(
    backend: str,
) -> None:
    labels = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG"]
    crf = CRF(5, labels=labels, scheme="BIO")
    ok_t, ok_s, _ = allowed_transitions(labels, "BIO")
    g = torch.Generator().manual_seed(3)
    em = torch.randn(4, 7, 5, generator=g)
    em[:, :, 2] += 2e4  # I-PER everywhere, by far: O -> I-PER and a leading I-PER are forbidden
    em[1, :, 4] += 3e4  # row 1: I-ORG, larger still
    em[2, 3, 0] += 5e4  # row 2: an O in the middle, then I-PER must not follow it
    with use_backend(backend):
        paths = crf.viterbi(em)[1]
        post = crf.posterior_decode(em, valid_only=True)
        k_paths = crf.topk(em, 3)[1]
    for path in [*paths, *post, *k_paths.flatten(0, 1)]:
        assert bool(ok_s[path[0]])
        assert all(bool(ok_t[i, j]) for i, j in itertools.pairwise(path.tolist()))
    assert paths[0].tolist() == [1] + [2] * 6  # B-PER, then I-PER: the best valid path
    assert paths[2].tolist()[3:5] == [0, 1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_valid_gold_path_far_below_minus_1e4_is_accepted_and_topk_agrees_with_viterbi(
    backend: str,
) -> None:
    labels = ["O", "B-PER", "I-PER"]
    crf = CRF(3, labels=labels, scheme="BIO").double()
    # The interpreter is slow: 600 positions with --full, 60 at ten times the scale by default,
    # still far below -1e4.
    T, scale = (3000, 3.0) if backend != "triton" else ((600, 3.0) if full() else (60, 30.0))
    g = torch.Generator().manual_seed(4)
    em = torch.log_softmax(torch.randn(2, T, 3, generator=g, dtype=F64) * 8, dim=-1) * scale
    gold = torch.zeros(2, T, dtype=torch.long)  # all O: valid, and far below -1e4
    pot = crf.potentials(em)
    assert float(score(pot, gold).detach().max()) < -1e4
    with use_backend(backend):
        loss = crf.nll(em, gold, reduction="none")
        vit_scores, vit_paths = viterbi(pot)
    assert bool(torch.isfinite(loss).all()) and bool((loss > 0).all())
    k_scores, k_paths = topk(pot, 3)
    assert bool(torch.isfinite(k_scores).all())  # three valid paths exist: none is "missing"
    torch.testing.assert_close(k_scores[:, 0], vit_scores)
    assert torch.equal(k_paths[:, 0], vit_paths)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [F64, torch.float32])
def test_well_separated_large_scores_give_exact_marginals(backend: str, dtype: torch.dtype) -> None:
    em = torch.tensor([[[-2e4, -3e4, -1e5], [-2e4, -2e4 - math.log(3), -1e5]]], dtype=dtype)
    pot = make_potentials(em, torch.zeros(3, 3, dtype=dtype))
    with use_backend(backend):
        node = marginals(pot).double()
        logz = log_partition(pot).double()
        path = viterbi(pot)[1]
    want = torch.tensor([[[1.0, 0.0, 0.0], [0.75, 0.25, 0.0]]], dtype=F64)
    torch.testing.assert_close(node, want, rtol=0, atol=1e-12 if dtype == F64 else 1e-2)
    assert float(logz[0]) == pytest.approx(
        -4e4 + math.log(4 / 3), abs=1e-9 if dtype == F64 else 1e-2
    )
    assert path.tolist() == [[0, 0]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_viterbi_at_scores_times_1e5_is_the_brute_force_path(backend: str) -> None:
    for seed in range(5):
        c = random_chain(300 + seed, 3, 5, 4, per_position=bool(seed % 2), scale=1e5)
        args = (c.emissions, c.transitions, c.start * 1e5, c.end * 1e5, c.mask)
        with use_backend(backend):
            best, paths = viterbi(make_potentials(*args))
        for b, row in enumerate(enumerate_rows(*args)):
            want_best, want_path = row.best()
            assert paths[b].tolist() == want_path
            assert float(best[b]) == pytest.approx(want_best, rel=1e-12, abs=1e-12)


def _no_path_batch(dtype: torch.dtype = F64) -> tuple[torch.Tensor, ...]:
    """Rows: 0 valid; 1 an all-forbidden position; 2 empty; 3 start and end disjoint at length 1;
    4 every transition out of the only allowed start forbidden."""
    g = torch.Generator().manual_seed(9)
    B, T, K = 5, 4, 3
    em = torch.randn(B, T, K, generator=g, dtype=dtype)
    em[1, 2] = -INF
    em[4, :, 1:] = -INF  # row 4 can only use tag 0 ...
    tr = torch.randn(B, T - 1, K, K, generator=g, dtype=dtype)
    tr[4, :, 0, 0] = -INF  # ... and 0 -> 0 is forbidden
    start = torch.tensor([0.0, -INF, 0.0], dtype=dtype)
    end = torch.tensor([0.0, 0.0, 0.0], dtype=dtype)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[2] = False
    mask[3, 1:] = False
    em[3, 0, 0] = -INF  # row 3 (length 1): tag 0 forbidden, tag 1 cannot start, tag 2 ...
    em[3, 0, 2] = -INF  # ... forbidden too
    return em, tr, start, end, mask


@pytest.mark.parametrize("backend", BACKENDS)
def test_rows_with_no_valid_path_give_minus_inf_zero_marginals_and_no_path(backend: str) -> None:
    args = _no_path_batch()
    pot = make_potentials(*args)
    with use_backend(backend):
        logz = log_partition(pot)
        node = marginals(pot)
        best, paths = viterbi(pot)
    none = torch.tensor([False, True, False, True, True])
    assert torch.equal(torch.isneginf(logz), none)
    assert float(logz[2]) == 0.0 and bool(torch.isfinite(logz[0]))
    assert not bool(node.isnan().any()) and bool((node[none] == 0).all())
    torch.testing.assert_close(node[0].sum(-1), torch.ones(4, dtype=F64))
    assert torch.equal(torch.isneginf(best), none) and float(best[2]) == 0.0
    assert bool((paths[none] == -1).all()) and bool((paths[2] == -1).all())
    assert bool((paths[0] >= 0).all())


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_nan_in_gradients_with_forbidden_scores_and_rows_without_a_path(backend: str) -> None:
    em, tr, start, end, mask = _no_path_batch()
    leaves = [x.clone().requires_grad_(True) for x in (em, tr, start, end)]
    pot = make_potentials(*leaves, mask)
    tags = torch.zeros(5, 4, dtype=torch.long)
    tags[0] = torch.tensor([2, 1, 0, 2])
    with use_backend(backend):
        logz = log_partition(pot)
        losses, gold = nll(pot, tags)
    assert float(losses[1]) == INF and float(losses[3]) == INF  # forbidden gold: infinite, not NaN
    torch.testing.assert_close(losses[0], logz[0] - gold[0])
    total = torch.where(torch.isfinite(logz), logz, 0.0).sum() + losses[0]
    grads = torch.autograd.grad(total, leaves)
    for name, g in zip(("emissions", "transitions", "start", "end"), grads, strict=True):
        assert not bool(g.isnan().any()), name
    assert bool((grads[0][1] == 0).all()) and bool((grads[0][4] == 0).all())  # no path: no gradient
    assert bool((grads[1][4, :, 0, 0] == 0).all())


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradcheck_float64_through_forbidden_transitions_starts_and_ends(backend: str) -> None:
    c = random_chain(8, 3, 4, 3, holes=True)
    ok_t = torch.tensor([[True, False, True], [True, True, False], [False, True, True]])
    ok_s = torch.tensor([True, False, True])
    ok_e = torch.tensor([True, True, False])
    leaves = tuple(
        x.clone().requires_grad_(True) for x in (c.emissions, c.transitions, c.start, c.end)
    )

    def f(em: torch.Tensor, tr: torch.Tensor, s: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        pot = make_potentials(
            em, constrain(tr, ok_t), constrain(s, ok_s), constrain(e, ok_e), c.mask
        )
        with use_backend(backend):
            return log_partition(pot)

    # Triton's interpreter: one random direction in the default suite, every input with --full.
    assert torch.autograd.gradcheck(f, leaves, fast_mode=backend == "triton" and not full())
    if backend != "triton":
        assert torch.autograd.gradgradcheck(f, leaves)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_with_forbidden_scores(backend: str, dtype: torch.dtype) -> None:
    args = forbidden_chain(5, 3, 5, 4, False, 1.0, dtype=torch.float32)
    half = (args[0].to(dtype), *args[1:])
    with use_backend(backend):
        got = log_partition(make_potentials(*half))
        want = log_partition(make_potentials(args[0].to(dtype).float(), *args[1:]))
        paths = viterbi(make_potentials(*half))[1]
    torch.testing.assert_close(got, want)
    assert got.dtype == torch.float32
    assert torch.equal(paths, viterbi(make_potentials(args[0].to(dtype).float(), *args[1:]))[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_padding_may_hold_nan_and_inf_and_is_never_read(backend: str) -> None:
    c = random_chain(12, 3, 6, 4, holes=True)
    junk = c.emissions.clone()
    pad = ~c.mask
    junk[pad] = torch.tensor([math.nan, INF, -INF, 1e30], dtype=F64)
    leaves = junk.clone().requires_grad_(True)
    with use_backend(backend):
        got = log_partition(make_potentials(leaves, c.transitions, c.start, c.end, c.mask))
        want = log_partition(make_potentials(c.emissions, c.transitions, c.start, c.end, c.mask))
        (grad,) = torch.autograd.grad(got.sum(), leaves)
    torch.testing.assert_close(got, want)
    assert not bool(grad.isnan().any()) and bool((grad[pad] == 0).all())


@pytest.mark.parametrize(("backend", "scale"), sweep())
def test_entropy_max_marginals_and_samples_with_forbidden_scores(
    backend: str, scale: float
) -> None:
    for seed in range(4):
        args = forbidden_chain(400 + seed, 3, 4, 3, bool(seed % 2), scale)
        pot = make_potentials(*args)
        rows = enumerate_rows(*args)
        ent = entropy(pot, backend=backend)
        mu = max_marginals(pot, backend=backend)
        draws = sample(pot, 20, generator=torch.Generator().manual_seed(seed), backend=backend)
        assert not bool(ent.isnan().any()) and not bool(mu.isnan().any())
        torch.testing.assert_close(
            mu, torch.stack([r.max_marginals() for r in rows]), rtol=0, atol=1e-9
        )
        for b, row in enumerate(rows):
            assert float(ent[b]) == pytest.approx(row.entropy(), abs=1e-8 * max(1.0, scale))
            for s in range(20):
                drawn = draws[s, b].tolist()
                if row.positions and not row.scores:
                    assert drawn == [-1] * len(drawn)  # no valid path: nothing to draw
                else:
                    assert drawn in row.paths or not row.positions


@pytest.mark.parametrize("backend", BACKENDS)
def test_posterior_decode_valid_only_never_uses_a_forbidden_emission(backend: str) -> None:
    g = torch.Generator().manual_seed(13)
    em = torch.randn(3, 6, 3, generator=g, dtype=F64)
    em[:, :, 1] = -INF  # tag 1 never possible
    em[:, 2, 2] = -INF
    tr = torch.zeros(3, 3, dtype=F64)
    tr[0, 0] = -INF
    with use_backend(backend):
        paths = posterior_decode(make_potentials(em, tr), valid_only=True)
    args = (em, tr, None, None, None)
    for b, row in enumerate(enumerate_rows(*args)):
        assert paths[b].tolist() in row.paths


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [F64, torch.float32])
def test_a_term_below_the_exp_floor_that_later_carries_most_of_z_is_not_lost(
    backend: str, dtype: torch.dtype
) -> None:
    """Scaled arithmetic flushes tiny terms to 0; here the path through exp(-90) ends up carrying
    almost all of Z (the other path pays -60 at the end), so dropping it costs 4 nats."""
    inf = -INF
    start = torch.tensor([0.0, inf], dtype=dtype)
    tr = torch.tensor([[0.0, -90.0], [0.0, 0.0]], dtype=dtype)
    em = torch.tensor([[[0.0, 0.0], [-44.0, 0.0]]], dtype=dtype)
    end = torch.tensor([-60.0, 0.0], dtype=dtype)
    args = (em, tr, start, end, None)
    want = enumerate_rows(*args)[0].log_partition
    with use_backend(backend):
        pot = make_potentials(*args)
        got = float(log_partition(pot))
        node = marginals(pot).double()
    assert got == pytest.approx(want, abs=1e-9 if dtype == F64 else 1e-4)
    torch.testing.assert_close(
        node[0], enumerate_rows(*args)[0].node_marginals(), rtol=0, atol=1e-6
    )


def test_decode_labels_refuses_a_row_with_no_allowed_path() -> None:
    crf = CRF(3, labels=["O", "B-X", "I-X"], scheme="BIO")
    em = torch.randn(2, 3, 3)
    em[1, 1] = -INF  # no tag allowed at one position of row 1
    with pytest.raises(ValueError, match=r"sequence\(s\) \[1\] have no allowed tag path"):
        crf.decode_labels(em)
    assert len(crf.decode_labels(em[:1])[0]) == 3
