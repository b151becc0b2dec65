"""Partial and constrained labels (``allowed`` ``(B, T, K)``) in every head, against enumeration.

The oracle enumerates every labelling of tiny chains (:mod:`brute`) and keeps those whose tag at
every unmasked position lies in the set, independently of how the engine conditions (``-inf``
emissions): ``log Z - log Z_allowed``, the constrained Viterbi path, marginals, edge marginals,
max-marginals, entropy, k-best and samples; on every backend here (portable, the fused CPU kernel,
Triton under ``TRITON_INTERPRET=1``), with holes, fully masked rows, scheme constraints, ties, extreme
scores and fp32/bf16; gradcheck in float64; the MEMM's and the perceptron's partial losses; the
errors.
"""

from __future__ import annotations

import math
import os

import pytest
import torch
from brute import RowPaths, enumerate_rows
from helpers import random_chain

from crfhead import CRF
from crfhead.engine import (
    edge_marginals,
    entropy,
    log_partition,
    marginals,
    max_marginals,
    sample,
    topk,
    viterbi,
)
from crfhead.engine.backends import available
from crfhead.engine.potentials import make_potentials, restrict
from crfhead.heads import HMM, MEMM, StructuredPerceptron

BACKENDS = ["portable"] + [b for b in ("cpu",) if available(b)[0]]
if os.environ.get("TRITON_INTERPRET") == "1" and available("triton")[0]:
    BACKENDS.append("triton")

BIO = ["O", "B-PER", "I-PER", "B-LOC"]


def random_allowed(seed: int, B: int, T: int, K: int, p: float = 0.5) -> torch.Tensor:
    """Random sets, each position keeping at least one label (a random one)."""
    g = torch.Generator().manual_seed(seed)
    allowed = torch.rand(B, T, K, generator=g) < p
    forced = torch.randint(K, (B, T), generator=g)
    allowed |= torch.nn.functional.one_hot(forced, K).bool()
    return allowed


def inside(rows: list[RowPaths], allowed: torch.Tensor) -> list[RowPaths]:
    """The enumerated labellings whose every unmasked tag lies in ``allowed`` (the oracle)."""
    out = []
    for b, row in enumerate(rows):
        keep = [
            i
            for i, path in enumerate(row.paths)
            if all(bool(allowed[b, t, path[t]]) for t in row.positions)
        ]
        out.append(
            RowPaths(
                row.T,
                row.K,
                row.positions,
                [row.paths[i] for i in keep],
                [row.scores[i] for i in keep],
            )
        )
    return out


def crf_with(K: int, seed: int, labels: list[str] | None = None, scale: float = 1.0) -> CRF:
    torch.manual_seed(seed)
    crf = CRF(K, labels=labels, scheme="BIO" if labels else None).double()
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_(0, scale)
    return crf


def rows_of(crf: CRF, em: torch.Tensor, mask: torch.Tensor) -> list[RowPaths]:
    pot = crf.potentials(em, mask)
    return enumerate_rows(pot.emissions, pot.transitions, pot.start, pot.end, pot.mask)


CASES = [  # (seed, B, T, K, constrained)
    (0, 3, 5, 3, False),
    (1, 2, 4, 4, True),
    (2, 3, 1, 4, False),
    (3, 3, 6, 2, False),
    (4, 3, 5, 4, True),
    (5, 1, 0, 3, False),
]


def case(seed: int, B: int, T: int, K: int, constrained: bool) -> tuple[CRF, ...]:
    c = random_chain(seed, B, T, K)
    mask = c.mask.clone()
    if B == 3:
        mask[2] = False  # a fully masked row
    crf = crf_with(K, seed, BIO[:K] if constrained and K == 4 else None)
    return crf, c.emissions, mask, random_allowed(seed, B, T, K)


@pytest.mark.parametrize("spec", CASES)
def test_crf_nll_decode_marginals_match_enumeration(spec: tuple) -> None:
    crf, em, mask, allowed = case(*spec)
    rows = rows_of(crf, em, mask)
    sub = inside(rows, allowed)
    live = [r.log_partition > -math.inf for r in sub]
    B = em.shape[0]
    if not all(live):  # a scheme can leave a random set no path: the error, then drop the sets
        with pytest.raises(ValueError, match="no valid tag path"):
            crf.nll(em, mask=mask, allowed=allowed, reduction="none")
        for b in range(B):
            if not live[b]:
                allowed[b] = True
        sub = inside(rows, allowed)
    loss = crf.nll(em, mask=mask, allowed=allowed, reduction="none")
    want = torch.tensor(
        [r.log_partition - s.log_partition for r, s in zip(rows, sub, strict=True)],
        dtype=torch.float64,
    )
    torch.testing.assert_close(loss, want.double(), atol=1e-10, rtol=0)
    torch.testing.assert_close(
        crf.log_partition(em, mask, allowed=allowed),
        torch.tensor([s.log_partition for s in sub], dtype=torch.float64),
    )
    gamma = crf.marginals(em, mask, allowed=allowed)
    for b, s in enumerate(sub):
        torch.testing.assert_close(gamma[b], s.node_marginals(), atol=1e-10, rtol=0)
        assert not bool((gamma[b] > 0)[mask[b] & ~allowed[b].any(-1)].any())
    assert bool((gamma[~allowed & mask[..., None]] == 0).all())  # exactly 0 outside the sets
    edges = crf.edge_marginals(em, mask, allowed=allowed)
    mm = crf.max_marginals(em, mask, allowed=allowed)
    ent = crf.entropy(em, mask, allowed=allowed)
    scores, paths = crf.viterbi(em, mask, allowed=allowed)
    for b, s in enumerate(sub):
        torch.testing.assert_close(edges[b], s.edge_marginals(), atol=1e-10, rtol=0)
        torch.testing.assert_close(mm[b], s.max_marginals(), atol=1e-10, rtol=0)
        assert float(ent[b].detach()) == pytest.approx(s.entropy(), abs=1e-10)
        best, _ = s.best()
        assert float(scores[b]) == pytest.approx(best, abs=1e-10)
        if s.positions:
            assert s.scores[s.paths.index(paths[b].tolist())] == pytest.approx(best, abs=1e-10)
    k = 4
    kscores, kpaths = crf.topk(em, k, mask, allowed=allowed)
    for b, s in enumerate(sub):
        wanted = s.sorted_scores()[:k]
        wanted += [-math.inf] * (k - len(wanted))
        assert kscores[b].tolist() == pytest.approx(wanted, abs=1e-10)
        for r in range(k):
            if wanted[r] > -math.inf and s.positions:
                assert kpaths[b, r].tolist() in s.paths
    draws = crf.sample(em, 50, mask, torch.Generator().manual_seed(0), allowed=allowed)
    for b, s in enumerate(sub):
        for d in draws[:, b].tolist():
            assert d in s.paths or not s.positions


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_every_backend_conditions_exactly(
    backend: str, per_position: bool, dtype: torch.dtype
) -> None:
    for seed in range(4):
        c = random_chain(seed, 3, 5, 3, per_position=per_position, dtype=dtype)
        mask = c.mask.clone()
        mask[2, 1:4] = False  # holes
        allowed = random_allowed(seed, 3, 5, 3)
        pot = restrict(make_potentials(c.emissions, c.transitions, c.start, c.end, mask), allowed)
        sub = inside(enumerate_rows(c.emissions, c.transitions, c.start, c.end, mask), allowed)
        tol = 1e-10 if dtype == torch.float64 else 2e-5
        logz = log_partition(pot, backend=backend)
        want = torch.tensor([s.log_partition for s in sub], dtype=torch.float64)
        torch.testing.assert_close(logz.double(), want, atol=tol, rtol=tol)
        gamma = marginals(pot, backend=backend)
        edges = edge_marginals(pot, backend=backend)
        mm = max_marginals(pot, backend=backend)
        ent = entropy(pot, backend=backend)
        scores, paths = viterbi(pot, backend=backend)
        ks, kp = topk(pot, 3, backend=backend)
        draws = sample(pot, 20, torch.Generator().manual_seed(1), backend=backend)
        for b, s in enumerate(sub):
            torch.testing.assert_close(gamma[b].double(), s.node_marginals(), atol=tol, rtol=0)
            torch.testing.assert_close(edges[b].double(), s.edge_marginals(), atol=tol, rtol=0)
            torch.testing.assert_close(mm[b].double(), s.max_marginals(), atol=tol, rtol=tol)
            assert float(ent[b]) == pytest.approx(s.entropy(), abs=tol * 10)
            assert float(scores[b]) == pytest.approx(s.best()[0], abs=tol * 10)
            assert paths[b].tolist() in s.paths
            wanted = (s.sorted_scores()[:3] + [-math.inf] * 3)[:3]
            assert ks[b].double().tolist() == pytest.approx(wanted, abs=tol * 10)
            for r in range(3):
                if wanted[r] > -math.inf and s.positions:
                    assert kp[b, r].tolist() in s.paths
            for d in draws[:, b].tolist():
                assert d in s.paths


@pytest.mark.parametrize("fused", [b for b in BACKENDS if b != "portable"])
def test_fused_and_portable_agree_with_gradients(fused: str) -> None:
    c = random_chain(7, 3, 12, 5)
    allowed = random_allowed(7, 3, 12, 5, p=0.3)
    results = {}
    for backend in ("portable", fused):
        em = c.emissions.clone().requires_grad_(True)
        tr = c.transitions.clone().requires_grad_(True)
        pot = make_potentials(em, tr, c.start, c.end, c.mask)
        sub = restrict(pot, allowed)
        loss = (log_partition(pot, backend=backend) - log_partition(sub, backend=backend)).sum()
        loss.backward()
        results[backend] = (loss.detach(), em.grad, tr.grad)
    for a, b in zip(results["portable"], results[fused], strict=True):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


def test_gradcheck_partial_nll() -> None:
    crf = crf_with(3, 0)
    c = random_chain(3, 2, 4, 3)
    allowed = random_allowed(3, 2, 4, 3)
    em = c.emissions.clone().requires_grad_(True)

    def fn(e: torch.Tensor, trans: torch.Tensor) -> torch.Tensor:
        crf.transitions.data = trans  # the parameter itself, so its gradient is checked too
        return crf.nll(e, mask=c.mask, allowed=allowed, reduction="none")

    trans = crf.transitions.detach().clone().requires_grad_(True)

    def through(e: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        pot = make_potentials(e, t, crf.start_transitions, crf.end_transitions, c.mask)
        return log_partition(pot) - log_partition(restrict(pot, allowed))

    assert torch.autograd.gradcheck(through, (em, trans))
    assert torch.autograd.gradcheck(lambda e: fn(e, crf.transitions.detach()), (em,))
    # the gradient is marginals - marginals_allowed
    em2 = c.emissions.clone().requires_grad_(True)
    crf.nll(em2, mask=c.mask, allowed=allowed, reduction="sum").backward()
    with torch.no_grad():
        want = crf.marginals(c.emissions, c.mask) - crf.marginals(
            c.emissions, c.mask, allowed=allowed
        )
    torch.testing.assert_close(em2.grad, want, atol=1e-10, rtol=0)
    assert em2.grad is not None and not bool(em2.grad.isnan().any())


def test_one_label_per_position_is_the_usual_nll() -> None:
    for head in (crf_with(4, 1, BIO),):
        c = random_chain(1, 3, 5, 4)
        tags = torch.tensor([[0, 1, 2, 0, 3], [1, 2, 2, 0, 0], [3, 0, 1, 2, 0]])
        onehot = torch.nn.functional.one_hot(tags, 4).bool()
        full = head.nll(c.emissions, tags, c.mask, reduction="none")
        part = head.nll(c.emissions, mask=c.mask, allowed=onehot, reduction="none")
        both = head.nll(c.emissions, tags, c.mask, reduction="none", allowed=onehot)
        torch.testing.assert_close(part, full, atol=1e-10, rtol=0)
        torch.testing.assert_close(both, full, atol=1e-10, rtol=0)
        loss = head.loss(c.emissions, None, c.mask, "mean", allowed=onehot)
        torch.testing.assert_close(loss, full.mean())
        assert head(c.emissions, mask=c.mask, allowed=onehot).shape == ()
    # all True: nothing known, loss 0
    everything = torch.ones(3, 5, 4, dtype=torch.bool)
    zero = head.nll(c.emissions, mask=c.mask, allowed=everything, reduction="none")
    torch.testing.assert_close(zero, torch.zeros(3, dtype=torch.float64), atol=1e-12, rtol=0)


def test_pinned_span_changes_a_neighbour_exactly_as_enumeration_says() -> None:
    """BIO: pin ``B-PER`` at position 1; position 2 must then be ``I-PER`` or not, per the oracle."""
    labels = ["O", "B-PER", "I-PER"]
    crf = CRF(3, labels=labels, scheme="BIO").double()
    with torch.no_grad():
        crf.transitions.zero_()
        crf.start_transitions.zero_()
        crf.end_transitions.zero_()
        crf.transitions[1, 2] = 2.0  # B-PER -> I-PER likes to continue
    em = torch.tensor([[[1.0, 0.0, 0.0], [3.0, 1.5, 0.0], [1.0, 0.0, 0.4]]], dtype=torch.float64)
    free = crf.decode(em)
    allowed = torch.ones(1, 3, 3, dtype=torch.bool)
    allowed[0, 1] = torch.tensor([False, True, False])  # pin B-PER at position 1
    pinned = crf.decode(em, allowed=allowed)
    pot = crf.potentials(em)
    rows = inside(enumerate_rows(pot.emissions, pot.transitions, pot.start, pot.end), allowed)
    assert pinned[0].tolist() == rows[0].best()[1]
    assert free[0].tolist() == [0, 0, 0]
    assert pinned[0].tolist() == [0, 1, 2]  # the neighbour follows the pin into I-PER


@pytest.mark.parametrize("scale", [1e4, 1e-8])
def test_extreme_scores_and_ties(scale: float) -> None:
    crf = crf_with(3, 2, scale=scale)
    c = random_chain(2, 2, 5, 3, scale=scale)
    allowed = random_allowed(2, 2, 5, 3)
    rows = inside(rows_of(crf, c.emissions, c.mask), allowed)
    loss = crf.nll(c.emissions, mask=c.mask, allowed=allowed, reduction="none")
    assert bool(torch.isfinite(loss).all()) and bool((loss >= 0).all())
    scores, _ = crf.viterbi(c.emissions, c.mask, allowed=allowed)
    for b, s in enumerate(rows):
        assert float(scores[b]) == pytest.approx(s.best()[0], rel=1e-12, abs=1e-9)
    # exact ties: all-zero scores; the constrained path is the lowest allowed tag everywhere
    tie = CRF(3).double()
    with torch.no_grad():
        for p in tie.parameters():
            p.zero_()
    em = torch.zeros(1, 4, 3, dtype=torch.float64)
    allowed = torch.tensor([[[0, 1, 1], [1, 0, 1], [0, 0, 1], [1, 1, 1]]]).bool()
    assert tie.decode(em, allowed=allowed)[0].tolist() == [1, 0, 2, 0]
    torch.testing.assert_close(
        tie.nll(em, mask=None, allowed=allowed, reduction="none"),
        torch.tensor([math.log(81) - math.log(2 * 2 * 1 * 3)], dtype=torch.float64),
    )


def test_low_precision_emissions_are_conditioned_in_float32() -> None:
    crf = CRF(4)
    c = random_chain(5, 2, 6, 4, dtype=torch.float32)
    allowed = random_allowed(5, 2, 6, 4)
    ref = crf.nll(c.emissions, mask=c.mask, allowed=allowed, reduction="none")
    for dt in (torch.bfloat16, torch.float16):
        em = c.emissions.to(dt)
        got = crf.nll(em, mask=c.mask, allowed=allowed, reduction="none")
        assert got.dtype == torch.float32
        want = crf.nll(em.float(), mask=c.mask, allowed=allowed, reduction="none")
        torch.testing.assert_close(got, want)
        assert crf.decode(em, c.mask, allowed=allowed)[allowed.any(-1) & c.mask].ge(0).all()
    assert bool(torch.isfinite(ref).all())


def test_memm_partial_loss_is_minus_log_probability_of_the_sets() -> None:
    torch.manual_seed(0)
    memm = MEMM(3).double()
    c = random_chain(4, 2, 4, 3)
    allowed = random_allowed(4, 2, 4, 3)
    pot = memm._chain(c.emissions, c.mask, end_constraint=False)
    rows = inside(
        enumerate_rows(pot.emissions, pot.transitions, pot.start, pot.end, pot.mask), allowed
    )
    want = torch.tensor(
        [-math.log(sum(math.exp(x) for x in s.scores)) for s in rows], dtype=torch.float64
    )
    got = memm.loss(c.emissions, None, c.mask, "none", allowed=allowed)
    torch.testing.assert_close(got, want.double(), atol=1e-10, rtol=0)
    tags = torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]])
    onehot = torch.nn.functional.one_hot(tags, 3).bool()
    torch.testing.assert_close(
        memm.loss(c.emissions, None, c.mask, "none", allowed=onehot),
        memm.loss(c.emissions, tags, c.mask, "none"),
        atol=1e-10,
        rtol=0,
    )
    assert memm.decode(c.emissions, c.mask, allowed=allowed)[c.mask].tolist() == [
        p for b, s in enumerate(rows) for p in [s.best()[1][t] for t in s.positions]
    ]


def test_perceptron_partial_loss_uses_the_best_consistent_path() -> None:
    torch.manual_seed(0)
    for cost in (0.0, 1.0):
        head = StructuredPerceptron(3, cost=cost).double()
        with torch.no_grad():
            for p in head.parameters():
                p.normal_()
        c = random_chain(6, 2, 5, 3)
        allowed = random_allowed(6, 2, 5, 3)
        pot = head.potentials(c.emissions, c.mask)
        rows = inside(
            enumerate_rows(pot.emissions, pot.transitions, pot.start, pot.end, pot.mask), allowed
        )
        imputed = torch.tensor([s.best()[1] for s in rows])
        got = head.loss(c.emissions, None, c.mask, "none", allowed=allowed)
        want = head.loss(c.emissions, imputed, c.mask, "none")
        torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
        assert bool((got >= 0).all())
    # no constraint binding (all True, cost 0): the best path is consistent, the loss is 0
    free = head.loss(
        c.emissions, None, c.mask, "none", allowed=torch.ones(2, 5, 3, dtype=torch.bool)
    )
    if head.cost == 0.0:
        torch.testing.assert_close(free, torch.zeros(2, dtype=torch.float64))


def test_hmm_refuses_partial_training_but_decodes_with_allowed() -> None:
    hmm = HMM(3, vocab_size=5)
    words = torch.tensor([[1, 2, 3, 4]])
    em = hmm.emit(words)
    allowed = torch.ones(1, 4, 3, dtype=torch.bool)
    allowed[0, 0] = torch.tensor([False, False, True])
    with pytest.raises(ValueError, match="counting"):
        hmm.loss(em, None, None, "none", allowed=allowed)
    assert hmm.decode(em, allowed=allowed)[0, 0].item() == 2


def test_errors_name_the_sequence_and_position() -> None:
    crf = CRF(4, labels=BIO, scheme="BIO")
    em = torch.randn(2, 3, 4)
    allowed = torch.ones(2, 3, 4, dtype=torch.bool)
    allowed[1, 2] = False
    with pytest.raises(ValueError, match=r"sequence 1 position 2"):
        crf.nll(em, mask=None, allowed=allowed)
    mask = torch.ones(2, 3, dtype=torch.bool)
    mask[1, 2] = False  # a masked position may have no label
    assert crf.nll(em, mask=mask, allowed=allowed, reduction="none").shape == (2,)
    dead = torch.ones(2, 3, 4, dtype=torch.bool)
    dead[0, 0] = torch.tensor([False, False, True, False])  # I-PER cannot start a BIO sentence
    for call in (
        lambda: crf.nll(em, mask=None, allowed=dead),
        lambda: crf.decode(em, allowed=dead),
        lambda: crf.marginals(em, allowed=dead),
        lambda: crf.topk(em, 2, allowed=dead),
        lambda: crf.sample(em, 2, allowed=dead),
        lambda: crf.decode_labels(em, allowed=dead),
        lambda: crf.predict(em, allowed=dead),
        lambda: crf.entropy(em, allowed=dead),
    ):
        with pytest.raises(
            ValueError, match=r"sequence\(s\) \[0\]: the allowed labels leave no valid"
        ):
            call()
    with pytest.raises(ValueError, match=r"allowed must be \(B, T, K\) = \(2, 3, 4\)"):
        crf.decode(em, allowed=torch.ones(2, 3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="float"):
        crf.decode(em, allowed=torch.ones(2, 3, 4))
    with pytest.raises(ValueError, match="allowed must hold only 0 and 1"):
        crf.decode(em, allowed=torch.full((2, 3, 4), 2))
    assert crf.decode(em, allowed=torch.ones(2, 3, 4, dtype=torch.uint8)).shape == (2, 3)
    tags = torch.tensor([[0, 1, 2], [0, 0, 0]])
    narrow = torch.ones(2, 3, 4, dtype=torch.bool)
    narrow[0, 1, 1] = False
    with pytest.raises(ValueError, match=r"gold tag 1 at \(sequence 0, position 1\) is not among"):
        crf.nll(em, tags, allowed=narrow)
    with pytest.raises(ValueError, match="needs the gold tags"):
        crf.nll(em)


def test_time_first_compat_layer_transposes_allowed() -> None:
    from crfhead.compat import torchcrf

    layer = torchcrf.CRF(3)
    em = torch.randn(4, 2, 3)  # (T, B, K)
    allowed = random_allowed(0, 4, 2, 3)  # (T, B, K)
    got = layer.decode(em, allowed=allowed)
    batch_first = CRF(3)
    batch_first.load_state_dict(layer.state_dict())
    want = batch_first.decode(em.transpose(0, 1), allowed=allowed.transpose(0, 1))
    assert got == want.tolist()
    loss = layer.nll(em, mask=None, allowed=allowed, reduction="none")
    ref = batch_first.nll(em.transpose(0, 1), allowed=allowed.transpose(0, 1), reduction="none")
    torch.testing.assert_close(loss, ref)
