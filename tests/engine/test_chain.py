"""The chain engine against enumeration (Theorem 1 (a)(b)(c) in both semirings, Theorem 4) and its
numerical contract: gradients, batching, padding, holes, empty rows, dtypes."""

from __future__ import annotations

import math

import pytest
import torch
from brute import enumerate_rows
from helpers import Chain, chains, check_topk, random_chain
from hypothesis import given
from hypothesis import strategies as st

from crfhead import IMPOSSIBLE, make_potentials
from crfhead.engine import (
    edge_marginals,
    entropy,
    log_partition,
    marginals,
    max_marginals,
    posterior_decode,
    sample,
    score,
    topk,
    viterbi,
)


def pot_of(c: Chain):
    return make_potentials(*c.args())


def rows_of(c: Chain):
    return enumerate_rows(*c.args())


@given(chains())
def test_theorem_1a_log_semiring_log_partition_matches_enumeration(c: Chain) -> None:
    got = log_partition(pot_of(c))
    want = torch.tensor([r.log_partition for r in rows_of(c)], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


@given(chains())
def test_theorem_1a_max_semiring_viterbi_matches_enumeration(c: Chain) -> None:
    scores, paths = viterbi(pot_of(c))
    for b, row in enumerate(rows_of(c)):
        best, _ = row.best()
        assert scores[b].item() == pytest.approx(best, abs=1e-10)
        if row.positions:
            # The returned path is a real path whose score is the returned (optimal) score.
            assert row.scores[row.paths.index(paths[b].tolist())] == pytest.approx(best, abs=1e-10)
        else:
            assert paths[b].tolist() == [-1] * c.mask.shape[1]


@given(chains())
def test_theorem_1b_node_marginals_match_enumeration(c: Chain) -> None:
    got = marginals(pot_of(c))
    want = torch.stack([r.node_marginals() for r in rows_of(c)])
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
    sums = got.sum(-1)
    torch.testing.assert_close(sums, c.mask.double())


@given(chains())
def test_theorem_1b_max_semiring_max_marginals_match_enumeration(c: Chain) -> None:
    got = max_marginals(pot_of(c))
    want = torch.stack([r.max_marginals() for r in rows_of(c)])
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)


@given(chains())
def test_theorem_1c_edge_marginals_match_enumeration(c: Chain) -> None:
    got = edge_marginals(pot_of(c))
    want = torch.stack([r.edge_marginals() for r in rows_of(c)])
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)


@given(chains(), st.integers(0, 2**31 - 1))
def test_score_matches_enumeration(c: Chain, seed: int) -> None:
    B, T, K = c.emissions.shape
    g = torch.Generator().manual_seed(seed)
    tags = torch.randint(0, K, (B, T), generator=g)
    tags = torch.where(c.mask, tags, torch.full_like(tags, -100))  # padding label at masked spots
    got = score(pot_of(c), tags)
    for b, row in enumerate(rows_of(c)):
        if not row.positions:
            assert got[b].item() == 0.0
            continue
        path = [t if m else -1 for t, m in zip(tags[b].tolist(), c.mask[b].tolist(), strict=True)]
        assert got[b].item() == pytest.approx(row.scores[row.paths.index(path)], abs=1e-10)


@given(chains(), st.integers(0, 2**31 - 1), st.integers(1, 3))
def test_scores_of_several_paths_per_chain_match_enumeration(c: Chain, seed: int, R: int) -> None:
    """``(B, R, T)`` tags: each of a chain's R paths scored as enumeration scores it (its own
    gradient, with the paths read through broadcast views, is tested with the k best's)."""
    B, T, K = c.emissions.shape
    g = torch.Generator().manual_seed(seed)
    tags = torch.randint(0, K, (B, R, T), generator=g)
    tags = torch.where(c.mask.unsqueeze(1), tags, torch.full_like(tags, -100))
    got = score(pot_of(c), tags)
    assert got.shape == (B, R)
    for b, row in enumerate(rows_of(c)):
        for r in range(R):
            if not row.positions:
                assert got[b, r].item() == 0.0
                continue
            path = [
                t if m else -1 for t, m in zip(tags[b, r].tolist(), c.mask[b].tolist(), strict=True)
            ]
            want = row.scores[row.paths.index(path)]
            assert got[b, r].item() == pytest.approx(want, abs=1e-10)


@given(chains(), st.integers(1, 6))
def test_topk_matches_enumeration(c: Chain, k: int) -> None:
    scores, paths = topk(pot_of(c), k)
    check_topk(rows_of(c), scores, paths, k, c.mask.shape[1])


@given(chains())
def test_theorem_4b_posterior_decoding_minimises_expected_hamming_loss(c: Chain) -> None:
    got = posterior_decode(pot_of(c))
    for b, row in enumerate(rows_of(c)):
        guess = got[b].tolist()
        risk = row.expected_hamming(guess)
        assert all(risk <= row.expected_hamming(p) + 1e-9 for p in row.paths)
        if row.positions:
            gamma = row.node_marginals()
            for t in row.positions:
                assert gamma[t, guess[t]] == pytest.approx(gamma[t].max().item(), abs=1e-12)


@given(chains())
def test_theorem_4a_viterbi_minimises_expected_sequence_loss(c: Chain) -> None:
    _, paths = viterbi(pot_of(c))
    for b, row in enumerate(rows_of(c)):
        if not row.positions:
            continue
        risk = row.expected_sequence_loss(paths[b].tolist())
        assert all(risk <= row.expected_sequence_loss(p) + 1e-12 for p in row.paths)


@given(chains())
def test_entropy_matches_enumeration(c: Chain) -> None:
    got = entropy(pot_of(c))
    want = torch.tensor([r.entropy() for r in rows_of(c)], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


def test_sampling_matches_enumerated_distribution() -> None:
    c = random_chain(seed=3, B=2, T=4, K=3, per_position=True)
    c.mask[1] = torch.tensor([True, False, True, True])
    S = 20000
    draws = sample(pot_of(c), S, generator=torch.Generator().manual_seed(0))
    assert draws.shape == (S, 2, 4)
    for b, row in enumerate(rows_of(c)):
        counts: dict[tuple[int, ...], int] = {}
        for path in draws[:, b].tolist():
            counts[tuple(path)] = counts.get(tuple(path), 0) + 1
        assert set(counts) <= {tuple(p) for p in row.paths}
        for p, prob in zip(row.paths, row.probs(), strict=True):
            freq = counts.get(tuple(p), 0) / S
            assert abs(freq - prob) < 4 * math.sqrt(prob * (1 - prob) / S) + 1e-3


def test_sampling_is_reproducible_with_a_generator() -> None:
    c = random_chain(seed=5, B=3, T=5, K=4)
    a = sample(pot_of(c), 7, generator=torch.Generator().manual_seed(1))
    b = sample(pot_of(c), 7, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    assert ((a == -1) == ~c.mask[None]).all()


# ----------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("per_position", [False, True])
def test_gradcheck_log_partition_float64(per_position: bool) -> None:
    c = random_chain(seed=11, B=3, T=5, K=3, per_position=per_position)
    c.mask[2] = False  # an empty row too
    c.mask[1, 0] = False
    inputs = [x.clone().requires_grad_() for x in (c.emissions, c.transitions, c.start, c.end)]

    def f(*xs: torch.Tensor) -> torch.Tensor:
        return log_partition(make_potentials(*xs, c.mask))

    assert torch.autograd.gradcheck(f, inputs)
    assert torch.autograd.gradgradcheck(f, inputs)


def test_gradcheck_nll_float64() -> None:
    c = random_chain(seed=12, B=3, T=4, K=3)
    tags = torch.randint(0, 3, (3, 4), generator=torch.Generator().manual_seed(0))
    inputs = [x.clone().requires_grad_() for x in (c.emissions, c.transitions, c.start, c.end)]

    def nll(*xs: torch.Tensor) -> torch.Tensor:
        pot = make_potentials(*xs, c.mask)
        return log_partition(pot) - score(pot, tags)

    assert torch.autograd.gradcheck(nll, inputs)


@given(chains())
def test_marginals_equal_gradient_of_log_partition(c: Chain) -> None:
    E = c.emissions.clone().requires_grad_()
    Tr = c.transitions.clone().requires_grad_()
    pot = make_potentials(E, Tr, c.start, c.end, c.mask)
    gE, gTr = torch.autograd.grad(log_partition(pot).sum(), (E, Tr))
    torch.testing.assert_close(gE, marginals(pot))
    edges = edge_marginals(pot)
    torch.testing.assert_close(gTr, edges if Tr.dim() == 4 else edges.sum((0, 1)))


def test_marginals_are_differentiable() -> None:
    c = random_chain(seed=2, B=2, T=4, K=3)
    E = c.emissions.clone().requires_grad_()
    pot = make_potentials(E, c.transitions, c.start, c.end, c.mask)
    assert torch.autograd.gradcheck(lambda e: marginals(make_potentials(e, c.transitions)), (E,))
    assert torch.autograd.gradcheck(lambda e: entropy(make_potentials(e, c.transitions)), (E,))
    assert marginals(pot).requires_grad


def test_no_nan_gradient_from_empty_rows_and_forbidden_transitions() -> None:
    c = random_chain(seed=4, B=3, T=5, K=4, holes=False)
    c.mask[1] = False
    Tr = c.transitions.clone()
    Tr[0, :] = float("-inf")  # nothing may follow tag 0
    Tr[:, 2] = IMPOSSIBLE
    E = c.emissions.clone().requires_grad_()
    Trp = Tr.requires_grad_()
    pot = make_potentials(E, Trp, c.start, c.end, c.mask)
    tags = torch.tensor([[1, 1, 3, 1, 0], [0, 0, 0, 0, 0], [3, 3, 3, 3, 3]])
    loss = (log_partition(pot) - score(pot, tags)).sum()
    loss.backward()
    assert torch.isfinite(loss)
    assert E.grad is not None and torch.isfinite(E.grad).all()
    assert Trp.grad is not None and torch.isfinite(Trp.grad).all()
    assert (E.grad[1] == 0).all()
    assert log_partition(pot)[1].item() == 0.0


# ----------------------------------------------------------------------------- batching


@given(chains())
def test_batched_equals_one_by_one(c: Chain) -> None:
    pot = pot_of(c)
    lz, (vs, vp), m = log_partition(pot), viterbi(pot), marginals(pot)
    for b in range(c.emissions.shape[0]):
        Tr = c.transitions[b : b + 1] if c.transitions.dim() == 4 else c.transitions
        one = make_potentials(c.emissions[b : b + 1], Tr, c.start, c.end, c.mask[b : b + 1])
        torch.testing.assert_close(log_partition(one), lz[b : b + 1])
        s1, p1 = viterbi(one)
        torch.testing.assert_close(s1, vs[b : b + 1])
        assert torch.equal(p1, vp[b : b + 1])
        torch.testing.assert_close(marginals(one), m[b : b + 1])


@given(chains(), st.randoms(use_true_random=False))
def test_shuffling_the_batch_permutes_the_results(c: Chain, rnd) -> None:
    B = c.emissions.shape[0]
    perm = list(range(B))
    rnd.shuffle(perm)
    idx = torch.tensor(perm)
    Tr = c.transitions[idx] if c.transitions.dim() == 4 else c.transitions
    shuffled = make_potentials(c.emissions[idx], Tr, c.start, c.end, c.mask[idx])
    pot = pot_of(c)
    torch.testing.assert_close(log_partition(shuffled), log_partition(pot)[idx])
    assert torch.equal(viterbi(shuffled)[1], viterbi(pot)[1][idx])
    torch.testing.assert_close(marginals(shuffled), marginals(pot)[idx])


@given(chains(max_T=4), st.integers(1, 3), st.booleans())
def test_padding_changes_nothing(c: Chain, extra: int, left: bool) -> None:
    """Masked positions with garbage scores, added on either side, change no result."""
    B, T, K = c.emissions.shape
    junk = torch.full((B, extra, K), 123.0, dtype=torch.float64)
    pad_mask = torch.zeros(B, extra, dtype=torch.bool)
    if left:
        E, mask = torch.cat([junk, c.emissions], 1), torch.cat([pad_mask, c.mask], 1)
    else:
        E, mask = torch.cat([c.emissions, junk], 1), torch.cat([c.mask, pad_mask], 1)
    Tr = c.transitions
    if Tr.dim() == 4:
        # Edges into masked positions are never used; pick garbage there.
        junk_tr = torch.full((B, extra, K, K), -7.0, dtype=torch.float64)
        if T == 0:
            Tr = torch.full((B, extra - 1, K, K), -7.0, dtype=torch.float64)
        elif left:
            Tr = torch.cat([junk_tr, Tr], 1)  # the edge into old position 0 is junk: never used
        else:
            Tr = torch.cat([Tr, junk_tr], 1)
    padded = make_potentials(E, Tr, c.start, c.end, mask)
    pot = pot_of(c)
    torch.testing.assert_close(log_partition(padded), log_partition(pot))
    sl = slice(extra, None) if left else slice(0, T)
    torch.testing.assert_close(marginals(padded)[:, sl], marginals(pot))
    assert torch.equal(viterbi(padded)[1][:, sl], viterbi(pot)[1])


# ----------------------------------------------------------------------------- edge cases


def test_length_zero_chains() -> None:
    pot = make_potentials(torch.zeros(2, 0, 3), torch.zeros(3, 3))
    assert log_partition(pot).tolist() == [0.0, 0.0]
    s, p = viterbi(pot)
    assert s.tolist() == [0.0, 0.0] and p.shape == (2, 0)
    assert marginals(pot).shape == (2, 0, 3)
    assert edge_marginals(pot).shape == (2, 0, 3, 3)
    ks, kp = topk(pot, 2)
    assert ks.tolist() == [[0.0, -math.inf]] * 2 and kp.shape == (2, 2, 0)
    assert sample(pot, 3).shape == (3, 2, 0)
    assert entropy(pot).tolist() == [0.0, 0.0]


def test_empty_batch() -> None:
    pot = make_potentials(torch.zeros(0, 4, 3), torch.zeros(3, 3))
    assert log_partition(pot).shape == (0,)
    assert viterbi(pot)[1].shape == (0, 4)


def test_length_one_chain_is_a_softmax() -> None:
    E = torch.tensor([[[1.0, 2.0, 0.5]]], dtype=torch.float64)
    s = torch.tensor([0.1, -0.2, 0.3], dtype=torch.float64)
    e = torch.tensor([0.0, 0.4, -1.0], dtype=torch.float64)
    pot = make_potentials(E, torch.randn(3, 3, dtype=torch.float64), s, e)
    logits = E[0, 0] + s + e
    torch.testing.assert_close(log_partition(pot), torch.logsumexp(logits, 0)[None])
    torch.testing.assert_close(marginals(pot)[0, 0], torch.softmax(logits, 0))
    assert viterbi(pot)[1].tolist() == [[int(logits.argmax())]]


def test_fully_masked_row_has_zero_log_partition_score_and_empty_path() -> None:
    c = random_chain(seed=1, B=2, T=4, K=3)
    c.mask[1] = False
    pot = pot_of(c)
    assert log_partition(pot)[1].item() == 0.0
    assert score(pot, torch.zeros(2, 4, dtype=torch.long))[1].item() == 0.0
    s, p = viterbi(pot)
    assert s[1].item() == 0.0 and p[1].tolist() == [-1] * 4
    assert (marginals(pot)[1] == 0).all() and (max_marginals(pot)[1] == 0).all()
    assert posterior_decode(pot)[1].tolist() == [-1] * 4


def test_viterbi_ties_break_to_the_lowest_tag() -> None:
    K = 4
    pot = make_potentials(torch.zeros(2, 5, K), torch.zeros(K, K))
    assert viterbi(pot)[1].tolist() == [[0] * 5] * 2
    E = torch.tensor([[[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 0.0, 2.0]]])
    s, p = viterbi(make_potentials(E, torch.zeros(K, K)))
    assert s.item() == 5.0 and p.tolist() == [[1, 0]]


def test_long_float32_chain_keeps_marginals_accurate() -> None:
    """Per-step normalisation: float32 marginals at T=1000 match float64 to 1e-5."""
    c = random_chain(seed=9, B=2, T=1000, K=5, holes=False, scale=3.0)
    want = marginals(pot_of(c))
    got = marginals(make_potentials(*(x.float() for x in c.args()[:4]), c.mask))
    assert (got.double() - want).abs().max().item() < 1e-5
    lz32 = log_partition(make_potentials(*(x.float() for x in c.args()[:4]), c.mask))
    torch.testing.assert_close(lz32.double(), log_partition(pot_of(c)), rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_emissions_give_the_float32_answer(dtype: torch.dtype) -> None:
    c = random_chain(seed=6, B=3, T=6, K=4, dtype=torch.float32)
    half = c.emissions.to(dtype)
    pot_half = make_potentials(half, c.transitions, c.start, c.end, c.mask)
    assert pot_half.emissions.dtype == torch.float32
    pot_ref = make_potentials(half.float(), c.transitions, c.start, c.end, c.mask)
    # Exactly the float32 computation on the rounded inputs...
    assert torch.equal(log_partition(pot_half), log_partition(pot_ref))
    # ...and the full-precision answer to the input's precision.
    eps = torch.finfo(dtype).eps
    lz = log_partition(pot_of(c))
    assert ((log_partition(pot_half) - lz).abs() <= 6 * 4 * eps * (1 + lz.abs())).all()
    E = half.clone().requires_grad_()
    loss = log_partition(make_potentials(E, c.transitions, c.start, c.end, c.mask)).sum()
    loss.backward()
    assert E.grad is not None and E.grad.dtype == dtype


def test_recursions_run_in_float32_under_autocast() -> None:
    c = random_chain(seed=7, B=2, T=5, K=3, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        emissions = torch.nn.functional.linear(c.emissions, torch.eye(3))
        assert emissions.dtype == torch.bfloat16
        lz = log_partition(make_potentials(emissions, c.transitions, c.start, c.end, c.mask))
    assert lz.dtype == torch.float32
    ref = make_potentials(emissions.float(), c.transitions, c.start, c.end, c.mask)
    torch.testing.assert_close(lz, log_partition(ref))


def test_float64_stays_float64() -> None:
    c = random_chain(seed=8, B=1, T=3, K=2)
    assert log_partition(pot_of(c)).dtype == torch.float64
    assert marginals(pot_of(c)).dtype == torch.float64


def test_floored_exp_helpers_are_exact_to_machine_precision() -> None:
    from crfhead.numerics import EXP_FLOOR, logsumexp, softmax

    x = torch.tensor([[0.0, -50.0, -90.0, IMPOSSIBLE, -1e30]], dtype=torch.float64)
    torch.testing.assert_close(logsumexp(x, 1), torch.logsumexp(x, 1), rtol=0, atol=1e-15)
    torch.testing.assert_close(softmax(x, 1), torch.softmax(x, 1), rtol=0, atol=1e-15)
    assert (softmax(x, 1)[0, 2:] == 0).all()  # far below the max: exactly zero
    assert logsumexp(x, 1, keepdim=True).shape == (1, 1)
    assert EXP_FLOOR > -88  # exp(EXP_FLOOR) stays a normal float32
    assert torch.tensor(EXP_FLOOR).exp().item() >= torch.finfo(torch.float32).tiny
