"""The fused backends' edge marginals, max-marginals, entropy, k-best and samples against enumeration
and the portable scans: holes, empty rows, length 0 and 1, per-edge transitions, constraints, ties,
float32, half-precision inputs, and the autograd rules (which result carries a graph)."""

from __future__ import annotations

import math
import os

import pytest
import torch
from brute import enumerate_rows
from helpers import Chain, chains, check_topk, constrained_chain, random_chain
from hypothesis import given, settings
from hypothesis import strategies as st

from crfhead import CRF, IMPOSSIBLE, make_potentials
from crfhead.engine import edge_marginals, entropy, marginals, max_marginals, sample, topk
from crfhead.engine.backends import available

FUSED = [name for name in ("cpu",) if available(name)[0]]
if os.environ.get("TRITON_INTERPRET") == "1" and available("triton")[0]:
    FUSED.append("triton")

pytestmark = pytest.mark.skipif(not FUSED, reason="no fused backend available here")


CPU_FUSED = [
    b for b in FUSED if b == "cpu"
]  # Triton's interpreter is too slow for the property tests


@pytest.mark.parametrize("backend", CPU_FUSED)
@settings(max_examples=25, deadline=None)
@given(c=chains(max_T=6, max_K=4), k=st.integers(1, 5))
def test_fused_ops_match_enumeration(backend: str, c: Chain, k: int) -> None:
    _check_against_enumeration(backend, c, k)


@pytest.mark.parametrize("backend", FUSED)
def test_fused_ops_match_enumeration_on_fixed_chains(backend: str) -> None:
    for seed, (B, T, K, per_position) in enumerate(
        [(3, 5, 3, False), (2, 6, 4, True), (3, 1, 2, False), (2, 0, 3, True)]
    ):
        _check_against_enumeration(backend, random_chain(seed, B, T, K, per_position), 3)


def _check_against_enumeration(backend: str, c: Chain, k: int) -> None:
    pot = make_potentials(*c.args())
    rows = enumerate_rows(*c.args())
    torch.testing.assert_close(
        edge_marginals(pot, backend=backend),
        torch.stack([r.edge_marginals() for r in rows]),
        rtol=1e-9,
        atol=1e-10,
    )
    torch.testing.assert_close(
        max_marginals(pot, backend=backend),
        torch.stack([r.max_marginals() for r in rows]),
        rtol=1e-9,
        atol=1e-10,
    )
    torch.testing.assert_close(
        entropy(pot, backend=backend),
        torch.tensor([r.entropy() for r in rows], dtype=torch.float64),
        rtol=1e-9,
        atol=1e-9,
    )
    scores, paths = topk(pot, k, backend=backend)
    B, T = c.mask.shape
    assert scores.shape == (B, k) and paths.shape == (B, k, T)
    check_topk(rows, scores, paths, k, T)


@pytest.mark.parametrize("backend", CPU_FUSED)
@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fused_ops_match_portable_over_blocks_holes_constraints_and_dtypes(
    backend: str, per_position: bool, dtype: torch.dtype
) -> None:
    # 13 rows: a full block of 8 float lanes (4 double) and a part-filled one; row 2 empty.
    c = constrained_chain(21, 13, 30, 9, per_position)
    c.mask[2] = False
    c.mask[5, 1:] = False  # length 1
    args = [x.to(dtype) if x.is_floating_point() else x for x in c.args()]
    pot = make_potentials(*args)
    tol = 1e-10 if dtype == torch.float64 else 3e-5
    for op in (edge_marginals, max_marginals, entropy):
        got, want = op(pot, backend=backend), op(pot, backend="portable")
        assert got.dtype == dtype
        torch.testing.assert_close(got, want, rtol=tol, atol=tol, msg=op.__name__)
    got_s, got_p = topk(pot, 4, backend=backend)
    want_s, want_p = topk(pot, 4, backend="portable")
    torch.testing.assert_close(got_s, want_s, rtol=tol, atol=tol)
    finite = want_s > -math.inf
    assert torch.equal(finite, got_s > -math.inf)
    # The fused paths score what they claim (random scores: no ties, so the same paths too).
    assert torch.equal(got_p, want_p)
    assert float(entropy(pot, backend=backend)[2]) == 0.0
    assert bool((edge_marginals(pot, backend=backend)[5] == 0).all())  # length 1: no edge


@pytest.mark.parametrize("backend", FUSED)
def test_edge_marginals_sum_to_the_node_marginals_and_are_zero_off_the_chain(backend: str) -> None:
    c = random_chain(4, 6, 9, 5)
    c.mask[1] = torch.tensor([True, False, False, True, True, False, True, False, False])
    pot = make_potentials(*c.args())
    edge = edge_marginals(pot, backend=backend)  # (B, T-1, K, K)
    node = marginals(pot, backend="portable")
    into = (c.mask & (c.mask.long().cumsum(1) > 1))[:, 1:]  # unmasked, with an unmasked predecessor
    torch.testing.assert_close(edge.sum(2), torch.where(into[..., None], node[:, 1:], 0.0))
    assert bool((edge[~into] == 0).all())


@pytest.mark.parametrize("backend", FUSED)
def test_topk_ties_are_distinct_paths_in_a_deterministic_order(backend: str) -> None:
    pot = make_potentials(torch.zeros(2, 4, 3), torch.zeros(3, 3), None, None, None)
    scores, paths = topk(pot, 10, backend=backend)
    assert bool((scores == 0).all())  # 81 paths tie; any 10 of them are a right answer
    for b in range(2):
        assert len({tuple(p) for p in paths[b].tolist()}) == 10
    assert torch.equal(paths, topk(pot, 10, backend=backend)[1])
    assert paths[0, 0].tolist() == [0, 0, 0, 0]  # the lowest tags first, as Viterbi
    # Then each rank's lowest previous tag, then its lower rank: the same order on every kernel.
    assert paths[0, 1].tolist() == [1, 0, 0, 0]
    assert paths[0, 9].tolist() == [0, 0, 1, 0]
    g = torch.Generator().manual_seed(2)
    em = torch.randint(0, 2, (3, 5, 3), generator=g).double()
    tr = torch.randint(0, 2, (3, 3), generator=g).double()
    mask = torch.rand(3, 5, generator=g) < 0.8
    rows = enumerate_rows(em, tr, None, None, mask)
    scores, paths = topk(make_potentials(em, tr, None, None, mask), 7, backend=backend)
    for b, row in enumerate(rows):
        want = row.sorted_scores()[:7]
        assert scores[b, : len(want)].tolist() == pytest.approx(want)
        got = [tuple(p) for p in paths[b, : len(want)].tolist()]
        assert len(set(got)) == len(want)
        for p, s in zip(got, want, strict=True):
            assert row.scores[row.paths.index(list(p))] == pytest.approx(s)


@pytest.mark.parametrize("backend", FUSED)
@pytest.mark.parametrize(
    ("seed", "B", "T", "K", "per_position", "k"),
    [
        (31, 3, 7, 64, False, 8),  # triton: the next tags in chunks, the state from its scratch
        (32, 3, 6, 20, True, 5),  # per-edge transitions above the CPU lanes' per-edge bound
        (33, 2, 4, 40, False, 120),  # triton: past its register bound, the portable scan
    ],
)
def test_topk_matches_portable_on_wide_states(
    backend: str, seed: int, B: int, T: int, K: int, per_position: bool, k: int
) -> None:
    c = constrained_chain(seed, B, T, K, per_position)
    c.mask[0, 2] = False  # a hole
    c.mask[-1, 1:] = False  # length 1
    pot = make_potentials(*c.args())
    scores, paths = topk(pot, k, backend=backend)
    want_s, want_p = topk(pot, k, backend="portable")
    torch.testing.assert_close(scores, want_s, rtol=1e-12, atol=1e-12)
    assert torch.equal(paths, want_p)  # random scores: no ties, so the same paths
    assert bool((scores[:, :-1] >= scores[:, 1:]).all())


@pytest.mark.parametrize("backend", FUSED)
@pytest.mark.parametrize("per_position", [False, True])
def test_fused_samples_follow_the_enumerated_distribution(backend: str, per_position: bool) -> None:
    c = random_chain(seed=3, B=3, T=4, K=3, per_position=per_position)
    c.mask[1] = torch.tensor([True, False, True, True])
    c.mask[2] = False
    S = 20000
    draws = sample(make_potentials(*c.args()), S, torch.Generator().manual_seed(0), backend=backend)
    assert draws.shape == (S, 3, 4) and draws.dtype == torch.long
    for b, row in enumerate(enumerate_rows(*c.args())):
        counts: dict[tuple[int, ...], int] = {}
        for path in draws[:, b].tolist():
            counts[tuple(path)] = counts.get(tuple(path), 0) + 1
        assert set(counts) <= {tuple(p) for p in row.paths}
        for p, prob in zip(row.paths, row.probs(), strict=True):
            freq = counts.get(tuple(p), 0) / S
            assert abs(freq - prob) < 4 * math.sqrt(prob * (1 - prob) / S) + 1e-3


@pytest.mark.parametrize("backend", FUSED)
def test_fused_samples_are_reproducible_and_respect_forbidden_moves(backend: str) -> None:
    c = constrained_chain(9, 3, 6, 4, per_position=False)
    c.emissions[1] = IMPOSSIBLE  # row 1: no valid path
    pot = make_potentials(*c.args())
    a = sample(pot, 50, torch.Generator().manual_seed(1), backend=backend)
    b = sample(pot, 50, torch.Generator().manual_seed(1), backend=backend)
    assert torch.equal(a, b)
    assert bool((a[:, 1] == -1).all())
    rows = enumerate_rows(*c.args())
    for r in (0, 2):
        allowed = {tuple(p) for p in rows[r].paths}
        assert {tuple(p) for p in a[:, r].tolist()} <= allowed


@pytest.mark.parametrize("backend", FUSED)
@pytest.mark.parametrize("T", [0, 1])
def test_length_zero_and_one(backend: str, T: int) -> None:
    c = random_chain(6, 3, T, 4)
    pot = make_potentials(*c.args())
    assert edge_marginals(pot, backend=backend).shape == (3, 0, 4, 4)
    torch.testing.assert_close(
        entropy(pot, backend=backend), entropy(pot, backend="portable"), rtol=1e-10, atol=1e-12
    )
    torch.testing.assert_close(
        max_marginals(pot, backend=backend), max_marginals(pot, backend="portable")
    )
    scores, paths = topk(pot, 3, backend=backend)
    ref_s, ref_p = topk(pot, 3, backend="portable")
    torch.testing.assert_close(scores, ref_s)
    assert torch.equal(paths, ref_p)
    assert sample(pot, 4, backend=backend).shape == (4, 3, T)


@pytest.mark.parametrize("backend", FUSED)
def test_graph_rules_topk_scores_differentiate_and_marginals_keep_their_graph(backend: str) -> None:
    c = random_chain(8, 4, 6, 3)
    leaves = [x.detach().clone().requires_grad_(True) for x in c.args()[:4]]
    pot = make_potentials(*leaves, c.mask)
    scores, _ = topk(pot, 3, backend=backend)
    (grads,) = torch.autograd.grad(scores[torch.isfinite(scores)].sum(), [leaves[0]])
    ref = [x.detach().clone().requires_grad_(True) for x in c.args()[:4]]
    ref_scores, _ = topk(make_potentials(*ref, c.mask), 3, backend="portable")
    (want,) = torch.autograd.grad(ref_scores[torch.isfinite(ref_scores)].sum(), [ref[0]])
    torch.testing.assert_close(grads, want)
    for op in (edge_marginals, max_marginals, entropy):
        assert op(pot, backend=backend).requires_grad, op.__name__
    with torch.no_grad():
        assert not entropy(pot, backend=backend).requires_grad


@pytest.mark.parametrize("backend", FUSED)
@pytest.mark.parametrize("per_position", [False, True])
def test_kernel_path_scores_are_its_own_and_gradcheck_as_the_paths_scores(
    backend: str, per_position: bool
) -> None:
    """The k best's and Viterbi's scores under gradients: the kernel's values as it returns them (no
    rescoring pass), differentiated as the paths' scores; a missing path (k above the paths a short
    row has) keeps -inf and takes no gradient."""
    from crfhead.engine import score, viterbi

    c = random_chain(5, 3, 4, 3, per_position)
    c.mask[2, 1:] = False  # one word: 3 paths, so 2 of the 5 best are missing
    leaves = [x.detach().clone().requires_grad_(True) for x in c.args()[:4]]
    pot = make_potentials(*leaves, c.mask)
    with torch.no_grad():
        plain = topk(pot, 5, backend=backend)[0], viterbi(pot, backend=backend)[0]
    scores, paths = topk(pot, 5, backend=backend)
    best, path = viterbi(pot, backend=backend)
    assert torch.equal(scores, plain[0]) and torch.equal(best, plain[1])
    found = scores > float("-inf")
    assert found.sum() == 2 * 5 + 3
    # The gradient is that of the found paths' scores: a missing one adds nothing, whatever the
    # gradient that reaches it.
    torch.autograd.backward([scores, best], [torch.ones_like(scores), torch.ones_like(best)])
    ref = [x.detach().clone().requires_grad_(True) for x in c.args()[:4]]
    ref_pot = make_potentials(*ref, c.mask)
    rows = torch.arange(3).repeat_interleave(5)[found.reshape(-1)]
    # The oracle: each found path scored alone, on a copy of its row's potentials.
    spread = make_potentials(
        ref[0][rows], ref[1][rows] if per_position else ref[1], ref[2], ref[3], c.mask[rows]
    )
    found_paths = paths.reshape(15, -1)[found.reshape(-1)]
    (score(spread, found_paths).sum() + score(ref_pot, path).sum()).backward()
    for got, want in zip(leaves, ref, strict=True):
        torch.testing.assert_close(got.grad, want.grad, rtol=0, atol=1e-12)


@pytest.mark.parametrize("backend", CPU_FUSED)  # the Rescored function is the same for triton
@pytest.mark.parametrize("per_position", [False, True])
def test_kernel_path_scores_gradcheck_to_second_order(backend: str, per_position: bool) -> None:
    from crfhead.engine import viterbi

    c = random_chain(5, 3, 4, 3, per_position)
    c.mask[2, 1:] = False  # missing paths among the 5 best: left out of the checked outputs

    def f(*xs: torch.Tensor) -> torch.Tensor:
        p = make_potentials(*xs, c.mask)
        s, _ = topk(p, 5, backend=backend)
        return torch.cat([s[s > float("-inf")], viterbi(p, backend=backend)[0]])

    inputs = [x.detach().clone().requires_grad_(True) for x in c.args()[:4]]
    assert torch.autograd.gradcheck(f, inputs)
    assert torch.autograd.gradgradcheck(f, inputs)


@pytest.mark.parametrize("backend", FUSED)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_emissions_through_the_layer(backend: str, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    crf = CRF(5)
    em = torch.randn(3, 7, 5).to(dtype)
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[1, 4:] = False
    with torch.no_grad():
        from crfhead.engine.backends import use_backend

        with use_backend(backend):
            got = (crf.entropy(em, mask), crf.edge_marginals(em, mask), crf.topk(em, 2, mask)[0])
        with use_backend("portable"):
            want = (crf.entropy(em, mask), crf.edge_marginals(em, mask), crf.topk(em, 2, mask)[0])
    for g, w in zip(got, want, strict=True):
        assert g.dtype == torch.float32  # recursions in float32 whatever the input
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", CPU_FUSED)  # the Recomputed function is the same for triton
@pytest.mark.parametrize("per_position", [False, True])
def test_fused_second_order_ops_gradcheck_float64(backend: str, per_position: bool) -> None:
    """The fused value's gradient is the portable op's (recomputed), to first and second order."""
    c = random_chain(12, 2, 4, 3, per_position=per_position)
    c.mask[1, 2] = False
    leaves = [x.detach().clone().requires_grad_(True) for x in c.args()[:4]]
    for op in (marginals, edge_marginals, max_marginals, entropy):

        def f(em, tr, s, e, op=op):
            return op(make_potentials(em, tr, s, e, c.mask), backend=backend)

        assert torch.autograd.gradcheck(f, leaves), op.__name__
        if op is marginals:  # one Recomputed function serves all four: second order checked once
            assert torch.autograd.gradgradcheck(f, leaves), op.__name__


@pytest.mark.parametrize("backend", FUSED)
def test_fused_value_is_the_fused_kernels_when_gradients_are_on(backend: str) -> None:
    from unittest import mock

    from crfhead.engine import scan

    c = random_chain(13, 3, 5, 4)
    leaves = [x.detach().clone().requires_grad_(True) for x in c.args()[:4]]
    pot = make_potentials(*leaves, c.mask)
    # Triton has no kernels for the per-edge marginals and the max-sums (portable there).
    fused = (marginals, entropy) + ((edge_marginals, max_marginals) if backend == "cpu" else ())
    with mock.patch.object(scan, "forward_scan", side_effect=AssertionError("portable ran")):
        for op in fused:
            out = op(pot, backend=backend)  # forward: the fused kernel only
            assert out.grad_fn is not None, op.__name__
    for op in (marginals, edge_marginals, max_marginals, entropy):
        (g,) = torch.autograd.grad(op(pot, backend=backend).sum(), [leaves[0]])
        (want,) = torch.autograd.grad(op(pot, backend="portable").sum(), [leaves[0]])
        torch.testing.assert_close(g, want, msg=op.__name__)


_BOTH_PER_EDGE_PATHS = """
import torch
from crfhead import make_potentials
from crfhead.engine import edge_marginals, log_partition, max_marginals, nll, viterbi
g = torch.Generator().manual_seed(0)
for K in (3, 9, 14):
    for dtype in (torch.float32, torch.float64):
        em = torch.randn(11, 9, K, generator=g, dtype=dtype)
        tr = torch.randn(11, 8, K, K, generator=g, dtype=dtype)
        tr[torch.rand(tr.shape, generator=g) < 0.2] = float("-inf")
        mask = torch.rand(11, 9, generator=g) < 0.8
        mask[3] = False
        tags = torch.randint(0, K, (11, 9), generator=g)
        tol = dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=3e-5, atol=3e-5)
        grads = {}
        for b in ("cpu", "portable"):
            leaves = [em.clone().requires_grad_(True), tr.clone().requires_grad_(True)]
            pot = make_potentials(*leaves, None, None, mask)
            loss, _ = nll(pot, tags, backend=b)
            loss = torch.where(torch.isfinite(loss), loss, 0.0)
            loss.sum().backward()
            grads[b] = [x.grad for x in leaves] + [log_partition(pot, backend=b).detach()]
            fixed = make_potentials(em, tr, None, None, mask)
            grads[b] += [edge_marginals(fixed, backend=b), max_marginals(fixed, backend=b)]
        for got, want in zip(grads["cpu"], grads["portable"]):
            torch.testing.assert_close(got, want, **tol)
        pot = make_potentials(em, tr, None, None, mask)
        assert torch.equal(viterbi(pot, backend="cpu")[1], viterbi(pot, backend="portable")[1])
print("OK")
"""


@pytest.mark.skipif("cpu" not in FUSED, reason="the cpu kernel is unavailable")
@pytest.mark.parametrize("bound", ["0", "100"])
def test_per_edge_transitions_in_lanes_and_one_sequence_at_a_time_agree(bound: str) -> None:
    """Per-edge transitions run in SIMD lanes (max-product one sequence at a time above K = 32);
    ``$CRFHEAD_LANES_PER_EDGE_MAX_K`` forces either path for every K and op here."""
    import subprocess
    import sys

    env = {**os.environ, "CRFHEAD_LANES_PER_EDGE_MAX_K": bound}
    done = subprocess.run(
        [sys.executable, "-c", _BOTH_PER_EDGE_PATHS],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "OK" in done.stdout
