"""The one head contract: every head is a ChainHead, capabilities are declared, never probed."""

from __future__ import annotations

import pytest
import torch

import crfhead.heads as heads
from crfhead.data.sentence import LabelVocab
from crfhead.heads.base import ChainHead, CountingHead
from crfhead.heads.fit import CostAugmentedFit, CountingFit, GradientFit
from crfhead.model.build import build_head
from crfhead.model.tagger import Tagger

LABELS = LabelVocab.from_types(["PER"], "BIO")


def test_every_exported_head_is_a_chain_head_and_only_the_hmm_counts() -> None:
    exported = [getattr(heads, n) for n in heads.__all__]
    classes = [c for c in exported if isinstance(c, type) and c not in (ChainHead, CountingHead)]
    assert {c.__name__ for c in classes} >= {"CRF", "MEMM", "StructuredPerceptron", "HMM"}
    assert all(issubclass(c, ChainHead) for c in classes)
    assert [c.__name__ for c in classes if issubclass(c, CountingHead)] == ["HMM"]
    assert [c.__name__ for c in classes if c.scores_words] == ["HMM"]


@pytest.mark.parametrize(
    ("name", "scores"),
    [
        ("CRF", ("transitions", "start_transitions", "end_transitions")),
        ("MEMM", ("transitions", "start_transitions")),
        ("StructuredPerceptron", ("transitions", "start_transitions", "end_transitions")),
    ],
)
def test_a_head_creates_exactly_the_scores_it_declares(name: str, scores: tuple[str, ...]) -> None:
    head = build_head({"class_path": f"crfhead.heads.{name}"}, LABELS)
    assert tuple(n for n, _ in head.named_parameters()) == scores
    assert head.transitions.shape == (3, 3) and head.start_transitions.shape == (3,)


def test_a_head_that_reads_emissions_refuses_to_score_a_batch() -> None:
    with pytest.raises(TypeError, match="CRF scores an encoder's emissions"):
        heads.CRF(3).emissions_from_batch(object())


def test_counting_head_buffers_are_what_reset_clears() -> None:
    hmm = heads.HMM(3, 6, labels=LABELS.labels, scheme="BIO")
    words = torch.tensor([[2, 3, 4]])
    tags = torch.tensor([[1, 2, 0]])
    hmm.accumulate(words, tags)
    assert all(float(b.sum()) > 0 for b in hmm.count_buffers())
    hmm.reset_counts()
    assert all(float(b.sum()) == 0 for b in hmm.count_buffers())
    assert hmm.tunes and not heads.HMM(3, 6, alphas=(1.0,)).tunes


def test_build_head_refuses_a_class_that_is_not_a_chain_head() -> None:
    with pytest.raises(ValueError, match=r"'torch.nn.Linear' is not a ChainHead class"):
        build_head({"class_path": "torch.nn.Linear"}, LABELS)


def test_the_tagger_reads_capabilities_from_the_contract() -> None:
    class Encoder(torch.nn.Module):
        needs = frozenset({"features"})

    crf = Tagger(Encoder(), LABELS)
    assert type(crf.fit) is GradientFit and crf.fit.optimised
    assert crf.needs == frozenset({"features"})
    hmm = Tagger(Encoder(), LABELS, heads.HMM(3, 6))
    assert type(hmm.fit) is CountingFit and not hmm.fit.optimised and hmm.fit.head is hmm.head
    assert hmm.needs == frozenset({"words"})
    perceptron = Tagger(Encoder(), LABELS, heads.StructuredPerceptron(3))
    assert type(perceptron.fit) is CostAugmentedFit
    no_words = type("B", (), {"words": None, "tags": torch.zeros(1, 1), "mask": None})()
    with pytest.raises(ValueError, match="counting needs the batch's words and tags"):
        hmm.fit.step(no_words, lambda: torch.zeros(1, 1, 3), "mean")


def test_only_a_cost_augmented_fit_gives_augmented_potentials() -> None:
    em = torch.randn(2, 4, 3, dtype=torch.float64)
    tags = torch.randint(0, 3, (2, 4))
    crf, perceptron = heads.CRF(3), heads.StructuredPerceptron(3, cost=1.0)
    with pytest.raises(
        TypeError, match=r"needs the crfhead\.heads\.StructuredPerceptron head, got CRF"
    ):
        crf.fitting(crf).cost_augmented(crf.potentials(em), tags)
    pot = perceptron.potentials(em)
    got = perceptron.fitting(perceptron).cost_augmented(pot, tags).emissions
    off_gold = 1.0 - torch.nn.functional.one_hot(tags, 3).double()
    assert torch.equal(got, pot.emissions + off_gold)


def test_each_head_declares_its_scores_shapes() -> None:
    for head in (heads.CRF(4), heads.MEMM(4), heads.StructuredPerceptron(4)):
        for name, dims in type(head).scores.items():
            assert getattr(head, name).shape == (4,) * len(dims), (type(head).__name__, name)
    assert [n for n, _ in heads.CRF(4).named_parameters()] == list(heads.CRF.scores)
