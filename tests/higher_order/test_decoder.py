"""FactorDecoder: per-group joint decoding (never across groups), tuned scale, learned weights, factor kinds."""

from __future__ import annotations

import pytest
import torch

from crfhead.data.batching import Batch
from crfhead.data.sentence import LabelVocab, Sentence
from crfhead.encoders import IndicatorEncoder
from crfhead.heads import CRF, StructuredPerceptron
from crfhead.higher_order import (
    Consistency,
    FactorDecoder,
    Pattern,
    SkipChain,
    consistency_patterns,
    decode,
    skip_patterns,
)
from crfhead.higher_order.group import prepare
from crfhead.higher_order.patterns import pattern_score
from crfhead.model.tagger import Tagger
from crfhead.schemes import entity_types

LABELS = LabelVocab.from_types(["LOC", "PER"], "BIOES")
TEXTS = ["Paris is nice", "I love Paris", "Paris again , Paris", "nothing here"]
T_MAX = max(len(t.split()) for t in TEXTS)


def _batch(groups: list[list[int]] | None, tags: torch.Tensor | None = None) -> Batch:
    sentences = [Sentence(tokens=t.split()) for t in TEXTS]
    T = max(len(s) for s in sentences)
    mask = torch.zeros(len(sentences), T, dtype=torch.bool)
    for b, s in enumerate(sentences):
        mask[b, : len(s)] = True
    return Batch(mask, None, None, None, tags, sentences, groups)


def _head(seed: int = 0) -> CRF:
    torch.manual_seed(seed)
    head = CRF(len(LABELS), labels=LABELS.labels, scheme=LABELS.scheme)
    with torch.no_grad():
        head.transitions.normal_(0, 0.5)
    return head


def _emissions(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(len(TEXTS), T_MAX, len(LABELS), generator=g, dtype=torch.float64)


def _decoder(**kw: object) -> FactorDecoder:
    return FactorDecoder(LABELS.labels, LABELS.scheme, **{"method": "ilp", **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(4))
def test_each_group_is_decoded_alone_with_its_own_patterns(seed: int) -> None:
    head, emissions = _head(seed), _emissions(seed)
    groups = [[0, 2], [1], [3]]
    batch = _batch(groups)
    pot = head.potentials(emissions, batch.mask)
    dec = _decoder(scale=3.0)
    got = dec.decode(pot, batch)
    for rows in groups:
        tokens = [TEXTS[r].split() for r in rows]
        patterns = consistency_patterns(tokens, LABELS.labels, LABELS.scheme, weight=3.0)
        want = decode(
            pot.emissions[rows],
            pot.transitions,
            pot.start,
            pot.end,
            pot.mask[rows],
            patterns,
            method="ilp",
        )
        assert torch.equal(got[rows], want.tags)
    assert dec.stats["groups"] == 3 and dec.stats["certified"] == 3


def _paris_emissions() -> torch.Tensor:
    """'Paris' clearly S-LOC in sentence 0, mildly O in sentence 1; everything else O."""
    em = torch.zeros(len(TEXTS), T_MAX, len(LABELS), dtype=torch.float64)
    OUT, S = LABELS.labels.index("O"), LABELS.labels.index("S-LOC")
    em[..., OUT] = 2.0
    em[0, 0, S] = 6.0
    em[1, 2, S] = 1.5
    return em


def test_consistency_pulls_a_phrase_only_inside_its_group() -> None:
    head = CRF(len(LABELS), labels=LABELS.labels, scheme=LABELS.scheme)
    S = LABELS.labels.index("S-LOC")
    em = _paris_emissions()
    dec = _decoder(scale=2.0)
    together = dec.decode(head.potentials(em, _batch(None).mask), _batch([[0, 1], [2], [3]]))
    apart = dec.decode(head.potentials(em, _batch(None).mask), _batch([[0], [1], [2], [3]]))
    assert together[1, 2] == S and together[0, 0] == S
    assert apart[1, 2] != S and apart[0, 0] == S
    # Ungrouped batches decode every sentence alone.
    alone = dec.decode(head.potentials(em, _batch(None).mask), _batch(None))
    assert torch.equal(alone, apart)


def test_scale_zero_is_the_heads_viterbi() -> None:
    head, emissions = _head(1), _emissions(1)
    batch = _batch([[0, 1, 2, 3]])
    dec = _decoder(method="dd2slave")
    dec.use(0.0)
    got = dec.decode(head.potentials(emissions, batch.mask), batch)
    want = head.decode(emissions, batch.mask)
    assert torch.equal(got, torch.where(batch.mask, want, -1))


def test_bad_batch_groups_are_refused() -> None:
    head, emissions = _head(), _emissions()
    batch = _batch([[0, 1], [1, 2, 3]])
    with pytest.raises(ValueError, match="exactly once"):
        _decoder().decode(head.potentials(emissions, batch.mask), batch)


@pytest.mark.parametrize("seed", range(3))
def test_learned_loss_is_full_decoded_minus_full_gold_and_its_weight_gradient_counts_patterns(
    seed: int,
) -> None:
    head = StructuredPerceptron(len(LABELS), labels=LABELS.labels, scheme=LABELS.scheme)
    torch.manual_seed(seed)
    with torch.no_grad():
        head.transitions.normal_(0, 0.3)
    emissions = _emissions(seed).float().requires_grad_()
    gold_batch = _batch([[0, 1, 2], [3]])
    OUT = LABELS.labels.index("O")
    gold = torch.where(gold_batch.mask, OUT, -100)
    gold[0, 0] = gold[1, 2] = gold[2, 0] = LABELS.labels.index("S-LOC")
    batch = _batch([[0, 1, 2], [3]], gold)
    dec = _decoder(grid=None)
    assert dec.learns and dec.weights.requires_grad
    with torch.no_grad():
        dec.weights.copy_(torch.linspace(-1.0, 2.0, len(dec.kinds)))
    pot = head.potentials(emissions, batch.mask)
    losses = dec.loss(pot, pot, batch)
    assert losses.shape == (2,) and bool((losses >= -1e-4).all())  # ILP: the decoded is optimal
    losses.sum().backward()
    # The weights' gradient: pattern counts of the decoded labelling minus the gold's, per kind.
    best = dec.decode(pot, batch)
    y = torch.where(batch.mask, gold, -1)
    want = torch.zeros(len(dec.kinds))
    for rows in ([0, 1, 2], [3]):
        by_kind = dec.factors.patterns([TEXTS[r].split() for r in rows], LABELS.labels, "BIOES")
        for k, ps in enumerate(by_kind):
            want[k] += float(pattern_score(ps, best[rows]) - pattern_score(ps, y[rows]))
    assert dec.weights.grad is not None
    assert torch.allclose(dec.weights.grad, want)
    assert emissions.grad is not None and emissions.grad.abs().sum() > 0


def test_learned_loss_is_zero_when_gold_wins() -> None:
    head = StructuredPerceptron(len(LABELS), labels=LABELS.labels, scheme=LABELS.scheme)
    em = _paris_emissions().float()
    batch0 = _batch([[0, 1], [2], [3]])
    dec = _decoder(grid=None)
    pot = head.potentials(em, batch0.mask)
    gold = torch.where(batch0.mask, dec.decode(pot, batch0), -100)
    losses = dec.loss(pot, pot, _batch([[0, 1], [2], [3]], gold))
    assert torch.equal(losses, torch.zeros(3))


def test_tagger_refuses_learned_weights_without_the_perceptron_head() -> None:
    encoder = IndicatorEncoder(len(LABELS), 10)
    with pytest.raises(TypeError, match="StructuredPerceptron"):
        Tagger(encoder, LABELS, CRF(len(LABELS)), _decoder(grid=None))
    Tagger(encoder, LABELS, CRF(len(LABELS)), _decoder())  # tuned: any head


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"method": "magic"}, "method"),
        ({"grid": []}, "grid"),
        ({"grid": [1.0, -1.0]}, "grid"),
        ({"max_iterations": 0}, "max_iterations"),
        ({"maxflow": "networkx"}, "maxflow"),
    ],
)
def test_bad_decoder_arguments_are_named(kw: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _decoder(**kw)


def test_consistency_kinds_partition_the_builders_patterns() -> None:
    tokens = [t.split() for t in TEXTS]
    factors = Consistency(max_length=2)
    kinds = factors.kinds(LABELS.labels, "BIOES")
    assert kinds == [*entity_types(LABELS.labels, "BIOES"), "O"]
    by_kind = factors.patterns(tokens, LABELS.labels, "BIOES")
    for kind, ps in zip(kinds, by_kind, strict=True):
        assert ps
        for p in ps:
            names = {LABELS.labels[k] for _, _, k in p.cells}
            assert names == {"O"} if kind == "O" else all(n.endswith(kind) for n in names)
    flat = sorted((p.cells, p.score) for ps in by_kind for p in ps)
    want = consistency_patterns(tokens, LABELS.labels, "BIOES", 1.0, max_length=2)
    assert flat == sorted((p.cells, p.score) for p in want)


def test_skip_chain_kinds_partition_the_builders_patterns() -> None:
    tokens = [t.split() for t in TEXTS]
    by_kind = SkipChain().patterns(tokens, LABELS.labels, "BIOES")
    assert SkipChain().kinds(LABELS.labels, "BIOES") == ["LOC", "PER"]
    flat = sorted((p.cells, p.score) for ps in by_kind for p in ps)
    assert flat == sorted((p.cells, p.score) for p in skip_patterns(tokens, LABELS.labels))
    assert all(LABELS.labels[p.cells[0][2]].endswith("LOC") for p in by_kind[0])
    assert len(flat) > 0
    assert isinstance(by_kind[0][0], Pattern)


def test_the_grid_reuses_each_groups_prepared_decomposition_and_decodes_as_fresh() -> None:
    """Tuned scales: the group is prepared once and rescaled (the grid step decodes one batch at
    every scale in turn); each scale's labelling scores as a fresh decoder's, and changed
    potentials are never served from the kept structure."""
    import copy

    head, emissions = _head(2), _emissions(2)
    batch = _batch([[0, 1, 2], [3]])
    pot = head.potentials(emissions, batch.mask)
    dec = _decoder(method="dd2slave")
    kept = None
    for scale in (0.0, 0.5, 2.0, 8.0):
        dec.use(scale)
        got = dec.decode(pot, batch)
        fresh = _decoder(method="dd2slave")
        fresh.use(scale)
        want = fresh.decode(pot, batch)
        patterns = dec._weighted(dec._group_patterns(batch, [0, 1, 2]))
        rows = [0, 1, 2]
        one = (dec._cache.get(((0, 1, 2), tuple(pot.emissions[rows].shape))) or (None,) * 3)[2]
        if kept is not None:
            assert one is kept
        kept = one
        group = prepare(
            pot.emissions[rows].detach(),
            pot.transitions.detach(),
            pot.start.detach(),
            pot.end.detach(),
            pot.mask[rows],
            patterns,
        )
        assert group.score(got[rows]) == pytest.approx(group.score(want[rows]), abs=1e-9)
    assert kept is not None
    other = head.potentials(emissions + 1.0, batch.mask)
    dec.decode(other, batch)
    assert dec._cache[((0, 1, 2), tuple(pot.emissions[[0, 1, 2]].shape))][2] is not kept
    assert copy.deepcopy(dec)._cache == {}
    dec.forget()
    assert dec._cache == {}
