"""Exact span confidences against enumeration of every path of tiny chains (constrained heads,
random forbidden transitions, starts and ends, whose ruled-out cases never reach the kernel)."""

from __future__ import annotations

import copy
import itertools
import math

import pytest
import torch

from crfhead import CRF, make_potentials
from crfhead.engine.potentials import ChainPotentials
from crfhead.evaluation import spans as spans_module
from crfhead.evaluation.spans import span_probabilities, span_probabilities_from
from crfhead.numerics import IMPOSSIBLE
from crfhead.schemes import Span, allowed_transitions, tags_to_spans

LABEL_SETS = {
    "BIO": ["O", "B-X", "I-X", "B-Y", "I-Y"],
    "IOB1": ["O", "I-X", "B-X", "I-Y", "B-Y"],
    "BIOES": ["O", "B-X", "I-X", "E-X", "S-X"],
    "BIOUL": ["O", "U-X", "B-Y", "I-Y", "L-Y"],  # a type with the unit role only
    "IO": ["O", "I-X", "I-Y", "I-Z"],
}
CASES = [(scheme, constrained) for scheme in LABEL_SETS for constrained in (False, True)]


def make_crf(scheme: str, constrained: bool, seed: int, scale: float = 1.0) -> CRF:
    labels = LABEL_SETS[scheme]
    torch.manual_seed(seed)
    crf = CRF(len(labels), labels=labels, scheme=scheme if constrained else None).double()
    with torch.no_grad():
        for p in (crf.transitions, crf.start_transitions, crf.end_transitions):
            p.copy_(torch.randn_like(p) * scale)
    return crf


def random_batch(seed: int, B: int, T: int, K: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    emissions = torch.randn(B, T, K, generator=g, dtype=torch.float64) * 1.5
    mask = torch.rand(B, T, generator=g) < 0.75
    mask[0] = True  # one full row
    if B > 1:
        mask[1, 1] = False  # a hole
        mask[1, 2:] = True
    return emissions, mask


def span_marginals(weighted: list[tuple[float, list[Span]]]) -> dict[Span, float]:
    """Each span's probability from every path's ``(score, spans)``: the sum of ``p(path)``."""
    top = max(s for s, _ in weighted)
    log_z = top + math.log(sum(math.exp(s - top) for s, _ in weighted))
    probs: dict[Span, float] = {}
    for s, spans in weighted:
        for span in spans:
            probs[span] = probs.get(span, 0.0) + math.exp(s - log_z)
    return probs


def brute_span_probs(
    crf: CRF, emissions: torch.Tensor, mask: torch.Tensor, scheme: str, constrained: bool
) -> list[dict[Span, float]]:
    """For each row, every span with non-zero probability: the sum of p(path) over all paths."""
    labels = crf.labels
    assert labels is not None
    K = len(labels)
    trans = crf.transitions.detach().tolist()
    start = crf.start_transitions.detach().tolist()
    end = crf.end_transitions.detach().tolist()
    ok_t, ok_s, ok_e = allowed_transitions(labels, scheme)
    out = []
    for b in range(emissions.shape[0]):
        times = [t for t in range(emissions.shape[1]) if bool(mask[b, t])]
        weighted: list[tuple[float, list[Span]]] = []
        for path in itertools.product(range(K), repeat=len(times)):
            if constrained and path:
                if not (ok_s[path[0]] and ok_e[path[-1]]):
                    continue
                if not all(ok_t[i, j] for i, j in itertools.pairwise(path)):
                    continue
            score = sum(float(emissions[b, t, k]) for t, k in zip(times, path, strict=True))
            if path:
                score += start[path[0]] + end[path[-1]]
                score += sum(trans[i][j] for i, j in itertools.pairwise(path))
            weighted.append((score, tags_to_spans([labels[k] for k in path], scheme)))
        out.append(span_marginals(weighted))
    return out


def all_spans(n: int, types: list[str]) -> list[Span]:
    return [Span(x, s, e) for x in types for s in range(n) for e in range(s, n)]


def entity_types(scheme: str) -> list[str]:
    return sorted({label.split("-")[1] for label in LABEL_SETS[scheme] if label != "O"})


@pytest.mark.parametrize(("scheme", "constrained"), CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_every_span_matches_enumeration(scheme: str, constrained: bool, seed: int) -> None:
    labels = LABEL_SETS[scheme]
    crf = make_crf(scheme, constrained, seed)
    emissions, mask = random_batch(seed, B=3, T=5, K=len(labels))
    n_words = mask.sum(1).tolist()
    spans = [all_spans(n, entity_types(scheme)) for n in n_words]
    got = span_probabilities(crf, emissions, mask, spans, labels, scheme)
    want = brute_span_probs(crf, emissions, mask, scheme, constrained)
    for row_spans, row_got, row_want in zip(spans, got, want, strict=True):
        assert len(row_got) == len(row_spans)
        for span, p in zip(row_spans, row_got, strict=True):
            assert 0.0 <= p <= 1.0
            assert p == pytest.approx(row_want.get(span, 0.0), abs=1e-9), span
        # Every span the enumeration saw was asked for (so the comparison covers them all).
        assert set(row_want) <= set(row_spans)


@pytest.mark.parametrize("scheme", ["BIO", "BIOES"])
def test_invalid_paths_are_read_leniently(scheme: str) -> None:
    # An unconstrained CRF that strongly prefers invalid transitions (I-X after O, B-X B-X, ...):
    # the answer must still follow tags_to_spans on those invalid paths.
    labels = LABEL_SETS[scheme]
    crf = make_crf(scheme, constrained=False, seed=3, scale=3.0)
    emissions, mask = random_batch(4, B=3, T=5, K=len(labels))
    emissions = emissions * 2.0
    spans = [all_spans(n, entity_types(scheme)) for n in mask.sum(1).tolist()]
    got = span_probabilities(crf, emissions, mask, spans, labels, scheme)
    want = brute_span_probs(crf, emissions, mask, scheme, constrained=False)
    for row_spans, row_got, row_want in zip(spans, got, want, strict=True):
        for span, p in zip(row_spans, row_got, strict=True):
            assert p == pytest.approx(row_want.get(span, 0.0), abs=1e-9), span


def test_works_under_inference_mode_and_in_float32() -> None:
    labels = LABEL_SETS["BIO"]
    crf = make_crf("BIO", constrained=True, seed=5)
    emissions, mask = random_batch(5, B=3, T=5, K=len(labels))
    spans = [all_spans(n, ["X", "Y"]) for n in mask.sum(1).tolist()]
    expected = span_probabilities(crf, emissions, mask, spans, labels, "BIO")
    single = copy.deepcopy(crf).float()
    with torch.inference_mode():
        again = span_probabilities(crf, emissions, mask, spans, labels, "bio")
        low = span_probabilities(single, emissions.float(), mask, spans, labels, "BIO")
    assert again == expected
    for row_low, row_expected in zip(low, expected, strict=True):
        assert row_low == pytest.approx(row_expected, abs=1e-5)


def decode_with_confidence(
    crf: CRF, emissions: torch.Tensor, mask: torch.Tensor, labels: list[str], scheme: str
) -> list[list[tuple[Span, float]]]:
    """The entities of each Viterbi path with their probabilities, as TextTagger reads them."""
    spans = [tags_to_spans(tags, scheme) for tags in crf.decode_labels(emissions, mask)]
    probs = span_probabilities(crf, emissions, mask, spans, labels, scheme)
    return [list(zip(s, p, strict=True)) for s, p in zip(spans, probs, strict=True)]


@pytest.mark.parametrize(("scheme", "constrained"), CASES)
def test_from_potentials_equals_from_emissions(scheme: str, constrained: bool) -> None:
    labels = LABEL_SETS[scheme]
    crf = make_crf(scheme, constrained, seed=11)
    emissions, mask = random_batch(11, B=3, T=5, K=len(labels))
    spans = [tags_to_spans(tags, scheme) for tags in crf.decode_labels(emissions, mask)]
    want = span_probabilities(crf, emissions, mask, spans, labels, scheme)
    with torch.inference_mode():
        got = span_probabilities_from(crf.potentials(emissions, mask), spans, labels, scheme)
    assert got == want
    bad = f"got {len(labels) - 1} labels for potentials of K={len(labels)} tags"
    with pytest.raises(ValueError, match=bad):
        span_probabilities_from(crf.potentials(emissions, mask), spans, labels[:-1], scheme)


def test_decode_with_confidence() -> None:
    labels = LABEL_SETS["BIOES"]
    crf = make_crf("BIOES", constrained=True, seed=6)
    emissions, mask = random_batch(6, B=3, T=5, K=len(labels))
    with torch.inference_mode():
        out = decode_with_confidence(crf, emissions, mask, labels, "BIOES")
    decoded = crf.decode_labels(emissions, mask)
    want = brute_span_probs(crf, emissions, mask, "BIOES", constrained=True)
    assert len(out) == 3
    for row, tags, row_want in zip(out, decoded, want, strict=True):
        assert [span for span, _ in row] == tags_to_spans(tags, "BIOES")
        for span, p in row:
            assert 0.0 < p <= 1.0
            assert p == pytest.approx(row_want[span], abs=1e-9)


@pytest.mark.parametrize(("scheme", "constrained"), CASES)
def test_near_deterministic_model_is_confident(scheme: str, constrained: bool) -> None:
    labels = LABEL_SETS[scheme]
    crf = make_crf(scheme, constrained, seed=7, scale=0.0)
    emissions, mask = random_batch(7, B=3, T=5, K=len(labels))
    # A sharp model around one of its own (valid) paths: every other path loses >= 40 nats.
    gold = crf.decode(emissions, mask).clamp(min=0)
    emissions = torch.nn.functional.one_hot(gold, len(labels)).double() * 40.0
    out = decode_with_confidence(crf, emissions, mask, labels, scheme)
    assert any(row for row in out)
    for row in out:
        for _, p in row:
            assert p == pytest.approx(1.0, abs=1e-9)


def test_empty_rows_and_no_spans() -> None:
    labels = LABEL_SETS["BIO"]
    crf = make_crf("BIO", constrained=False, seed=8)
    emissions, mask = random_batch(8, B=3, T=5, K=len(labels))
    mask[2] = False
    assert span_probabilities(crf, emissions, mask, [[], [], []], labels, "BIO") == [[], [], []]
    got = span_probabilities(crf, emissions, mask, [[Span("X", 0, 0)], [], []], labels, "BIO")
    assert len(got[0]) == 1 and got[1:] == [[], []]
    out = decode_with_confidence(crf, emissions, mask, labels, "BIO")
    assert out[2] == []


def test_word_indices_skip_holes() -> None:
    # Position 1 is a hole: word 1 is time 2, and a span over words 0..1 covers times 0 and 2.
    labels = LABEL_SETS["IO"]
    crf = make_crf("IO", constrained=False, seed=9, scale=0.0)
    emissions = torch.full((1, 3, 4), -50.0, dtype=torch.float64)
    emissions[0, 0, 1] = emissions[0, 2, 1] = 0.0  # I-X at times 0 and 2
    emissions[0, 1, 2] = 0.0  # I-Y at the hole: ignored
    mask = torch.tensor([[True, False, True]])
    (probs,) = span_probabilities(
        crf, emissions, mask, [[Span("X", 0, 1), Span("X", 0, 0)]], labels, "IO"
    )
    assert probs[0] == pytest.approx(1.0, abs=1e-12)
    assert probs[1] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    ("span", "match"),
    [
        (Span("X", 0, 5), r"Span\(label='X', start=0, end=5\).*out of range"),
        (Span("X", -1, 0), r"start=-1.*out of range"),
        (Span("X", 2, 1), r"start=2, end=1.*out of range"),
        (Span("Z", 0, 0), r"label='Z'.*not an entity type"),
    ],
)
def test_errors_name_the_span(span: Span, match: str) -> None:
    labels = LABEL_SETS["BIO"]
    crf = make_crf("BIO", constrained=True, seed=10)
    emissions, mask = random_batch(10, B=1, T=5, K=len(labels))
    with pytest.raises(ValueError, match=match):
        span_probabilities(crf, emissions, mask, [[span]], labels, "BIO")


def test_errors_on_labels_and_batch() -> None:
    labels = LABEL_SETS["BIO"]
    crf = make_crf("BIO", constrained=True, seed=11)
    emissions, mask = random_batch(11, B=2, T=5, K=len(labels))
    with pytest.raises(ValueError, match="sequences"):
        span_probabilities(crf, emissions, mask, [[]], labels, "BIO")
    with pytest.raises(ValueError, match="labels"):
        span_probabilities(crf, emissions, mask, [[], []], labels[:4], "BIO")
    with pytest.raises(ValueError, match="differ"):
        span_probabilities(crf, emissions, mask, [[], []], labels[::-1], "BIO")
    with pytest.raises(ValueError, match="not valid in the IO scheme"):
        free = CRF(len(labels), labels=None).double()
        span_probabilities(free, emissions, mask, [[], []], labels, "IO")


def _enumerated(pot: ChainPotentials, labels: list[str], scheme: str) -> list[dict[Span, float]]:
    """Every span's probability by enumerating the paths of shared-transition potentials."""
    K = len(labels)
    em, tr, st, en = (x.tolist() for x in pot.chain[:4])
    out = []
    for b in range(pot.shape[0]):
        times = [t for t in range(pot.shape[1]) if bool(pot.mask[b, t])]
        weighted: list[tuple[float, list[Span]]] = []
        for path in itertools.product(range(K), repeat=len(times)):
            score = sum(em[b][t][k] for t, k in zip(times, path, strict=True))
            if path:
                score += st[path[0]] + en[path[-1]]
                score += sum(tr[i][j] for i, j in itertools.pairwise(path))
            if score > -math.inf:
                weighted.append((score, tags_to_spans([labels[k] for k in path], scheme)))
        out.append(span_marginals(weighted))
    return out


@pytest.mark.parametrize("scheme", ["BIO", "BIOES", "IOB1"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forbidden_transitions_starts_and_ends_anywhere(scheme: str, seed: int) -> None:
    # Random -inf transitions, starts and ends (not a scheme's pattern): the cases they rule out
    # are dropped before any chain is built, and every probability is still the enumeration's.
    labels = LABEL_SETS[scheme]
    K = len(labels)
    g = torch.Generator().manual_seed(seed)
    emissions, mask = random_batch(seed, B=4, T=5, K=K)
    tr, st, en = (
        torch.randn(*shape, generator=g, dtype=torch.float64) for shape in ((K, K), (K,), (K,))
    )
    tr[torch.rand(K, K, generator=g) < 0.4] = IMPOSSIBLE
    st[torch.rand(K, generator=g) < 0.3] = IMPOSSIBLE
    en[torch.rand(K, generator=g) < 0.3] = IMPOSSIBLE
    st[0] = en[0] = tr[0, 0] = 0.0  # the all-O path exists
    pot = make_potentials(emissions, tr, st, en, mask)
    spans = [all_spans(n, entity_types(scheme)) for n in mask.sum(1).tolist()]
    got = span_probabilities_from(pot, spans, labels, scheme)
    want = _enumerated(pot, labels, scheme)
    for row_spans, row_got, row_want in zip(spans, got, want, strict=True):
        for span, p in zip(row_spans, row_got, strict=True):
            assert p == pytest.approx(row_want.get(span, 0.0), abs=1e-9), span


def test_a_constrained_head_sums_one_chain_per_bio_span(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under BIO constraints a span's second case (I-X opening after a tag other than B-X/I-X) has
    # no allowed path, so only the first reaches the kernel: B sentence chains + one per span.
    labels = LABEL_SETS["BIO"]
    crf = make_crf("BIO", constrained=True, seed=12)
    emissions, mask = random_batch(12, B=3, T=5, K=len(labels))
    spans = [all_spans(n, ["X", "Y"]) for n in mask.sum(1).tolist()]
    sizes: list[int] = []
    log_partition = spans_module.engine.log_partition

    def counting(pot: ChainPotentials) -> torch.Tensor:
        sizes.append(pot.shape[0])
        return log_partition(pot)

    monkeypatch.setattr(spans_module.engine, "log_partition", counting)
    got = span_probabilities(crf, emissions, mask, spans, labels, "BIO")
    assert sizes == [3 + sum(len(s) for s in spans)]
    want = brute_span_probs(crf, emissions, mask, "BIO", constrained=True)
    for row_spans, row_got, row_want in zip(spans, got, want, strict=True):
        for span, p in zip(row_spans, row_got, strict=True):
            assert p == pytest.approx(row_want.get(span, 0.0), abs=1e-9), span
