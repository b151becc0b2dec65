"""FeatureTemplates.ids (the Collator's feature ids) against looking up every string of the templates."""

from __future__ import annotations

import pickle

import pytest
import torch

from crfhead.data import features as features_module
from crfhead.data.features import FeatureTemplates, word_shape
from crfhead.data.sentence import Sentence
from crfhead.data.vocab import Vocab

TOKENS = [
    [],
    ["a"],
    ["Kestrel", "Q3", "$12.5", "Kestrel", "ünï", "日本"],
    ["the", "the", "the"],
    ["x"] * 40,
]


def _check(templates: FeatureTemplates, lists: list[list[str]]) -> None:
    train = [Sentence(t) for t in lists[2:4]]
    vocab = templates.build_vocab(train)
    T = max((len(t) for t in lists), default=0)
    per = [[[vocab.stoi.get(f, 0) for f in fs] for fs in templates(t)] for t in lists]
    F = max([len(fs) for sent in per for fs in sent] + [1])
    want = torch.zeros(len(lists), T, F, dtype=torch.long)
    for i, sent in enumerate(per):
        for j, fs in enumerate(sent):
            want[i, j, : len(fs)] = torch.tensor(fs, dtype=torch.long)
    got = templates.ids(lists, vocab.stoi)
    if templates.templates and any(lists):  # the oracle sees features the vocab has
        assert (want != 0).any()
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    assert torch.equal(got, want)


def test_ids_equal_string_lookup_default_templates() -> None:
    _check(FeatureTemplates(), TOKENS)


def test_ids_equal_string_lookup_every_template() -> None:
    _check(
        FeatureTemplates(
            ["bias", "word", "lower", "prefix3", "suffix3", "shape", "left2", "right1", "window1"]
        ),
        TOKENS,
    )


def test_ids_equal_string_lookup_no_templates_and_no_tokens() -> None:
    _check(FeatureTemplates([]), TOKENS)
    _check(FeatureTemplates(), [[], []])
    _check(FeatureTemplates(["bias"]), [[]])


def test_ids_unseen_features_are_zero() -> None:
    t = FeatureTemplates(["word"])
    ids = t.ids([["never"]], Vocab(["w=seen"]).stoi)
    assert ids.tolist() == [[[0]]]


def test_word_shape_cached_same() -> None:
    assert word_shape("Kestrel") == "Xx"
    assert word_shape("$12.5") == "$d.d"
    assert word_shape("Kestrel") == "Xx"


def _oracle(
    templates: FeatureTemplates, lists: list[list[str]], stoi: dict[str, int]
) -> torch.Tensor:
    """The ids by looking up every string, padded as :meth:`FeatureTemplates.ids` pads."""
    T = max((len(t) for t in lists), default=0)
    per = [[[stoi.get(f, 0) for f in fs] for fs in templates(t)] for t in lists]
    F = max([len(fs) for sent in per for fs in sent] + [1])
    want = torch.zeros(len(lists), T, F, dtype=torch.long)
    for i, sent in enumerate(per):
        for j, fs in enumerate(sent):
            want[i, j, : len(fs)] = torch.tensor(fs, dtype=torch.long)
    return want


def test_the_kept_word_table_follows_a_growing_vocab_another_vocab_and_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One instance across calls: each call equals string lookup in the mapping it is given."""
    templates = FeatureTemplates()
    lists = TOKENS[2:4]
    vocab = templates.build_vocab([Sentence(lists[1])])  # knows "the" only
    first = templates.ids(lists, vocab.stoi)
    assert torch.equal(first, _oracle(templates, lists, vocab.stoi))
    for feats in templates(lists[0]):  # the vocabulary grows: every word's ids are read again
        for f in feats:
            vocab.add(f)
    grown = templates.ids(lists, vocab.stoi)
    assert torch.equal(grown, _oracle(templates, lists, vocab.stoi))
    assert not torch.equal(grown, first)
    other = {f: i + 7 for i, f in enumerate(vocab.stoi)}  # the same size, other ids
    assert torch.equal(templates.ids(lists, other), _oracle(templates, lists, other))
    monkeypatch.setattr(features_module, "_CACHED_WORDS", 2)  # the table is cleared as it fills
    assert torch.equal(templates.ids(lists, other), _oracle(templates, lists, other))
    assert torch.equal(templates.ids(TOKENS, other), _oracle(templates, TOKENS, other))


def test_a_pickled_instance_leaves_its_table_behind() -> None:
    templates = FeatureTemplates()
    vocab = templates.build_vocab([Sentence(TOKENS[2])])
    want = templates.ids(TOKENS, vocab.stoi)
    copy = pickle.loads(pickle.dumps(templates))
    assert copy._cache is None and templates._cache is not None
    assert torch.equal(copy.ids(TOKENS, vocab.stoi), want)
