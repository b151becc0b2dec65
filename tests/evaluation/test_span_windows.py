"""Span probabilities from one forward-backward (issue 28) against three oracles.

The span tests run on both exact routes of :mod:`crfhead.evaluation.spans`: the windows over one
forward-backward (long rows) and whole clamped chains (batches of short rows, ``CLAMPED_UP_TO``),
the route forced by the ``route`` fixture; the long-document tests take the windows, as any row
over ``CLAMPED_UP_TO`` words does.

* Enumeration of every labelling of tiny chains (K <= 5, T <= 6): the probability of a span is the
  sum of p(path) over the paths whose entities (:func:`crfhead.schemes.tags_to_spans`) include it.
* The clamped-chain implementation it replaced (``span_oracle.py``, verbatim), on random batches up
  to T = 60 and random spans, and on a few spans of a 20,000-word chain.
* The engine's node marginals, for the blocked forward-backward messages themselves.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from span_oracle import old_span_probabilities_from

from crfhead import CRF
from crfhead.engine import marginals, viterbi
from crfhead.engine import messages as msg
from crfhead.engine.backends.select import use_backend
from crfhead.engine.potentials import ChainPotentials, make_potentials
from crfhead.evaluation import spans as spans_module
from crfhead.evaluation.spans import span_probabilities, span_probabilities_from
from crfhead.schemes import Span, allowed_transitions, tags_to_spans

LABEL_SETS = {
    "BIO": ["O", "B-X", "I-X", "B-Y", "I-Y"],
    "IOB1": ["O", "I-X", "B-X", "I-Y", "B-Y"],
    "BIOES": ["O", "B-X", "I-X", "E-X", "S-X"],
    "BIOUL": ["O", "U-X", "B-Y", "I-Y", "L-Y"],
    "IO": ["O", "I-X", "I-Y", "I-Z"],
}


@pytest.fixture(params=["windows", "chains"])
def route(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Force one route for every row length: windows always, or clamped chains always."""
    monkeypatch.setattr(spans_module, "CLAMPED_UP_TO", -1 if request.param == "windows" else 10**9)
    return str(request.param)


BIO9 = ["O"] + [f"{role}-{typ}" for typ in ("PER", "ORG", "LOC", "MISC") for role in "BI"]


def types_of(labels: list[str]) -> list[str]:
    return sorted({label.split("-")[1] for label in labels if label != "O"})


def random_potentials(
    seed: int,
    B: int,
    T: int,
    labels: list[str],
    scheme: str,
    *,
    per_position: bool = False,
    constrained: bool = False,
    scale: float = 1.5,
    ties: bool = False,
    dead_row: bool = False,
    empty_row: bool = False,
    dtype: torch.dtype = torch.float64,
) -> ChainPotentials:
    """Random chain potentials with holes; ``constrained`` puts the scheme's ``-inf`` in."""
    K = len(labels)
    g = torch.Generator().manual_seed(seed)

    def draw(*shape: int) -> torch.Tensor:
        if ties:  # few distinct values: many paths of equal score
            return torch.randint(-1, 2, shape, generator=g).double() * scale
        return torch.randn(*shape, generator=g, dtype=torch.float64) * scale

    E = draw(B, T, K)
    Tr = draw(B, max(T - 1, 0), K, K) if per_position else draw(K, K)
    start, end = draw(K), draw(K)
    mask = torch.rand(B, T, generator=g) < 0.75
    mask[0] = True
    if B > 1 and T > 2:
        mask[1, 1] = False  # a hole
    if constrained:
        ok_t, ok_s, ok_e = allowed_transitions(labels, scheme)
        Tr = torch.where(ok_t, Tr, -math.inf)
        start = torch.where(ok_s, start, -math.inf)
        end = torch.where(ok_e, end, -math.inf)
    if dead_row:  # row 0 has no valid path: every tag of its last position is forbidden
        E[0, -1] = -math.inf
    if empty_row:
        mask[-1] = False
    return make_potentials(*(x.to(dtype) for x in (E, Tr, start, end)), mask=mask)


@functools.cache
def path_spans(labels: tuple[str, ...], scheme: str, n: int) -> tuple[torch.Tensor, dict]:
    """Every labelling of ``n`` words ``(P, n)``, and for each span the labellings that contain it."""
    K = len(labels)
    paths = torch.tensor(list(itertools.product(range(K), repeat=n)), dtype=torch.long)
    index: dict[Span, list[int]] = {}
    for p, path in enumerate(paths.reshape(-1, n).tolist()):
        for span in tags_to_spans([labels[k] for k in path], scheme):
            index.setdefault(span, []).append(p)
    return paths.reshape(-1, n), {s: torch.tensor(v) for s, v in index.items()}


def brute(pot: ChainPotentials, labels: list[str], scheme: str) -> list[dict[Span, float]]:
    """For each row, every span of non-zero probability, by enumeration (float64)."""
    E, Tr, start, end = (x.double() for x in pot.chain[:4])
    out: list[dict[Span, float]] = []
    for b in range(E.shape[0]):
        times = pot.mask[b].nonzero()[:, 0].tolist()
        n = len(times)
        if n == 0:
            out.append({})
            continue
        paths, index = path_spans(tuple(labels), scheme, n)
        score = start[paths[:, 0]] + end[paths[:, -1]]
        for i, t in enumerate(times):
            score = score + E[b, t, paths[:, i]]
            if i > 0:
                tr = Tr if Tr.dim() == 2 else Tr[b, t - 1]
                score = score + tr[paths[:, i - 1], paths[:, i]]
        if bool((score == -math.inf).all()):
            out.append({})  # no valid path: no span has any probability
            continue
        probs = (score - torch.logsumexp(score, 0)).exp()
        out.append({span: float(probs[ix].sum()) for span, ix in index.items()})
    return out


def all_spans(n: int, types: list[str]) -> list[Span]:
    return [Span(x, s, e) for x in types for s in range(n) for e in range(s, n)]


VARIANTS = {
    "plain": {},
    "per_position": {"per_position": True},
    "constrained": {"constrained": True},
    "constrained_per_position": {"constrained": True, "per_position": True},
    "ties": {"ties": True, "scale": 1.0},
    "all_equal": {"ties": True, "scale": 0.0},
    "extreme": {"scale": 1e4},
    "extreme_constrained": {"scale": 1e4, "constrained": True},
    "dead_and_empty_rows": {"dead_row": True, "empty_row": True},
    "float32": {"dtype": torch.float32},
    "float32_extreme": {"dtype": torch.float32, "scale": 1e4, "constrained": True},
}


@pytest.mark.usefixtures("route")
@pytest.mark.parametrize("scheme", list(LABEL_SETS))
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_span_matches_enumeration(scheme: str, variant: str) -> None:
    labels = LABEL_SETS[scheme]
    seed = sorted(VARIANTS).index(variant) * 10 + sorted(LABEL_SETS).index(scheme)
    pot = random_potentials(seed, 3, 6, labels, scheme, **VARIANTS[variant])
    spans = [all_spans(n, types_of(labels)) for n in pot.mask.sum(1).tolist()]
    got = span_probabilities_from(pot, spans, labels, scheme)
    want = brute(pot, labels, scheme)
    # The windows run in float64 whatever the input dtype: exact for the float32 values too.
    for row_spans, row_got, row_want in zip(spans, got, want, strict=True):
        assert set(row_want) <= set(row_spans)  # every span of positive probability was asked for
        for span, p in zip(row_spans, row_got, strict=True):
            assert 0.0 <= p <= 1.0 and not math.isnan(p)
            assert p == pytest.approx(row_want.get(span, 0.0), abs=1e-9), (span, variant)


@pytest.mark.usefixtures("route")
def test_a_sentence_with_no_valid_path_gives_zero() -> None:
    labels = LABEL_SETS["BIO"]
    pot = random_potentials(1, 2, 5, labels, "BIO", dead_row=True)
    spans = [all_spans(int(n), ["X", "Y"]) for n in pot.mask.sum(1)]
    got = span_probabilities_from(pot, spans, labels, "BIO")
    assert got[0] == [0.0] * len(spans[0])
    assert sum(got[1]) > 0.0


def random_spans(
    g: torch.Generator, n: int, types: list[str], count: int, longest: int | None = None
) -> list[Span]:
    """``count`` random valid spans of ``n`` words: 80% of 1..4 words, the others up to ``longest``."""
    out = []
    for _ in range(count if n else 0):
        short = bool(torch.rand(1, generator=g) < 0.8)
        length = int(torch.randint(0, 4 if short else (longest or n), (1,), generator=g))
        s = int(torch.randint(0, n, (1,), generator=g))
        typ = types[int(torch.randint(0, len(types), (1,), generator=g))]
        out.append(Span(typ, s, min(n - 1, s + length)))
    return out


@pytest.mark.usefixtures("route")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("seed", range(6))
def test_random_batches_match_the_clamped_chains(seed: int, dtype: torch.dtype) -> None:
    scheme = sorted(LABEL_SETS)[seed % len(LABEL_SETS)]
    labels = LABEL_SETS[scheme]
    g = torch.Generator().manual_seed(100 + seed)
    T = int(torch.randint(1, 61, (1,), generator=g))
    pot = random_potentials(
        seed,
        4,
        T,
        labels,
        scheme,
        per_position=seed % 2 == 1,
        constrained=seed % 3 != 0,
        empty_row=seed == 4,
        dtype=dtype,
    )
    spans = [random_spans(g, int(n), types_of(labels), 40) for n in pot.mask.sum(1)]
    got = span_probabilities_from(pot, spans, labels, scheme)
    want = old_span_probabilities_from(pot, spans, labels, scheme)
    tol = 1e-6 if dtype == torch.float64 else 1e-5
    for row_got, row_want in zip(got, want, strict=True):
        assert row_got == pytest.approx(row_want, rel=tol, abs=tol)


@pytest.mark.parametrize("block", [None, 1, 2, 3, 7, 1000])
@pytest.mark.parametrize("per_position", [False, True])
def test_messages_give_the_engine_marginals(block: int | None, per_position: bool) -> None:
    labels = LABEL_SETS["BIOES"]
    pot = random_potentials(
        7, 3, 23, labels, "BIOES", per_position=per_position, constrained=True, empty_row=True
    )
    chain = msg.words(pot)
    alpha, beta = msg.messages(chain, block)
    want = marginals(pot)  # (B, T, K)
    for b in range(3):
        n = int(chain.lengths[b])
        probs = torch.softmax(alpha[b, :n] + beta[b, :n], dim=-1)
        torch.testing.assert_close(probs, want[b, chain.times[b, :n]], rtol=0, atol=1e-12)
        assert bool((alpha[b, :n].amax(-1) == 0).all())  # shifted so that the largest entry is 0


def test_step_slabs_and_many_tags_change_no_message(monkeypatch: pytest.MonkeyPatch) -> None:
    labels = LABEL_SETS["BIO"]
    pot = random_potentials(12, 3, 40, labels, "BIO", per_position=True, constrained=True)
    chain = msg.words(pot)
    want = msg.messages(chain, block=7)  # 6 blocks, one slab of steps
    monkeypatch.setattr(msg, "_BLOCK_BUDGET", 3 * 6 * 5 * 5 * 2)  # slabs of 2 steps
    for got, ref in zip(msg.messages(chain, block=7), want, strict=True):
        torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    # With many tags one block runs: the plain scan.
    many = [f"I-T{i}" for i in range(29)] + ["O"]
    pot = random_potentials(13, 2, 15, many, "IO")
    assert msg._blocks(2, 15, 30) == (1, 15)
    alpha, beta = msg.messages(msg.words(pot))
    for b in range(2):
        n = int(pot.mask[b].sum())
        probs = torch.softmax(alpha[b, :n] + beta[b, :n], dim=-1)
        torch.testing.assert_close(probs, marginals(pot)[b, pot.mask[b]], rtol=0, atol=1e-12)


def test_the_memory_budget_shrinks_the_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    assert msg._blocks(1, 20_000, 9) == (141, 142)
    monkeypatch.setattr(msg, "_BLOCK_BUDGET", 4 * 3 * 9**3)
    assert msg._blocks(3, 20_000, 9) == (4, 5000)
    assert msg._blocks(100, 50, 49) == (1, 50)
    assert msg._blocks(1, 63, 9) == (1, 63)  # too short for blocks
    assert msg._blocks(64, 20_000, 9) == (1, 20_000)  # too wide: 64 * 9**3 > 2**14
    labels = LABEL_SETS["IO"]
    pot = random_potentials(8, 3, 30, labels, "IO")
    spans = [
        random_spans(torch.Generator().manual_seed(8), int(n), types_of(labels), 20)
        for n in pot.mask.sum(1)
    ]
    got = span_probabilities_from(pot, spans, labels, "IO")
    want = old_span_probabilities_from(pot, spans, labels, "IO")
    for row_got, row_want in zip(got, want, strict=True):
        assert row_got == pytest.approx(row_want, rel=1e-9, abs=1e-9)


def test_windows_are_chunked_without_changing_a_result(monkeypatch: pytest.MonkeyPatch) -> None:
    labels = LABEL_SETS["BIOES"]
    pot = random_potentials(9, 2, 40, labels, "BIOES", constrained=True)
    spans = [
        random_spans(torch.Generator().manual_seed(9), int(n), ["X"], 60) for n in pot.mask.sum(1)
    ]
    whole = span_probabilities_from(pot, spans, labels, "BIOES")
    monkeypatch.setattr(msg, "_CASE_BUDGET", 2 * 25 * 7)  # 7 cases at a time
    assert span_probabilities_from(pot, spans, labels, "BIOES") == whole
    for row_whole, row_old in zip(
        whole, old_span_probabilities_from(pot, spans, labels, "BIOES"), strict=True
    ):
        assert row_whole == pytest.approx(row_old, rel=1e-9, abs=1e-9)


@pytest.mark.usefixtures("route")
@pytest.mark.parametrize("backend", ["portable", "cpu"])
def test_inference_mode_and_backends(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    labels = LABEL_SETS["BIO"]
    torch.manual_seed(3)
    crf = CRF(len(labels), labels=labels, scheme="BIO").double()
    g = torch.Generator().manual_seed(3)
    emissions = torch.randn(3, 12, len(labels), generator=g, dtype=torch.float64)
    mask = torch.rand(3, 12, generator=g) < 0.8
    spans = [random_spans(g, int(n), ["X", "Y"], 15) for n in mask.sum(1)]
    monkeypatch.setenv("CRFHEAD_BACKEND", backend)
    with torch.inference_mode():
        got = span_probabilities(crf, emissions, mask, spans, labels, "BIO")
        pot = crf.potentials(emissions, mask)
        assert span_probabilities_from(pot, spans, labels, "BIO") == got
        want = old_span_probabilities_from(pot, spans, labels, "BIO")
    monkeypatch.delenv("CRFHEAD_BACKEND")
    with use_backend(backend):
        assert span_probabilities(crf, emissions, mask, spans, labels, "BIO") == got
    for row_got, row_want in zip(got, want, strict=True):
        assert row_got == pytest.approx(row_want, rel=1e-9, abs=1e-9)


def long_document(T: int, seed: int = 0) -> tuple[ChainPotentials, list[list[Span]]]:
    """One chain of ``T`` words, K = 9 (BIO, 4 types), constrained, and ``T // 10`` spans of <= 100 words."""
    g = torch.Generator().manual_seed(seed)
    K = len(BIO9)
    ok_t, ok_s, ok_e = allowed_transitions(BIO9, "BIO")
    E = torch.randn(1, T, K, generator=g, dtype=torch.float64) * 2.0
    Tr = torch.where(ok_t, torch.randn(K, K, generator=g, dtype=torch.float64), -math.inf)
    start = torch.where(ok_s, 0.0, -math.inf).double()
    pot = make_potentials(E, Tr, start, torch.where(ok_e, 0.0, -math.inf).double())
    spans = random_spans(g, T, types_of(BIO9), T // 10, longest=100)
    return pot, [spans]


def test_a_few_spans_of_a_long_document_match_the_clamped_chains() -> None:
    pot, (spans,) = long_document(20_000, seed=1)
    _, path = viterbi(pot)
    decoded = tags_to_spans([BIO9[k] for k in path[0].tolist()], "BIO")
    few = [
        [*decoded[:3], *decoded[-3:], *spans[:3], Span("PER", 0, 2), Span("LOC", 19_997, 19_999)]
    ]
    (got,) = span_probabilities_from(pot, few, BIO9, "BIO")
    (want,) = old_span_probabilities_from(pot, few, BIO9, "BIO")
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)
    assert min(got[:6]) > 0.05  # the decoded entities are likely


_SCALE = """
import json, resource, sys, time
sys.path.insert(0, {here!r})
import test_span_windows as t
from crfhead.evaluation.spans import span_probabilities_from
pot, spans = t.long_document({T})
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
probs = span_probabilities_from(pot, spans, t.BIO9, "BIO")
seconds = time.perf_counter() - start
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({{"seconds": seconds, "rss_kib": grown, "spans": len(probs[0]), "probs": probs[0][:5]}}))
"""


def test_a_20000_word_document_is_fast_and_small() -> None:
    # In a fresh process, so that the peak RSS is this call's.
    here = str(Path(__file__).resolve().parent)
    code = _SCALE.format(here=here, T=20_000)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["spans"] == 2_000
    assert result["seconds"] < 10.0, result
    assert result["rss_kib"] < 1024 * 1024, result
