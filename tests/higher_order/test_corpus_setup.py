"""The corpora's higher-order setups: groups, factors, token comparison and the corpus of a config class."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from crfhead.data.sentence import LabelVocab, Sentence
from crfhead.higher_order import Consistency, SkipChain
from crfhead.higher_order.corpus_setup import (
    CORPORA,
    GRIDS,
    check_corpus,
    corpus_of_class,
    factors_for,
    group_sentences,
    lowercases,
)

LABELS = LabelVocab.from_types(["LOC", "PER"], "BIOES")


def test_groups_of_conll_are_documents() -> None:
    s = [
        Sentence(["a"], doc_id="d0"),
        Sentence(["b"], doc_id="d0"),
        Sentence(["c"], doc_id="d1"),
        Sentence(["d"]),
        Sentence(["e"], doc_id="d1"),
    ]
    assert group_sentences(s, "conll2003") == [[0, 1], [2, 4], [3]]


def test_groups_of_tweets_link_more_than_threshold_shared_words() -> None:
    s = [
        Sentence("a b c d e".split()),
        Sentence("x y".split()),
        Sentence("A B C D E f".split()),
    ]
    assert group_sentences(s, "msm2013", threshold=4) == [[0, 2], [1]]
    assert group_sentences(s, "msm2013", threshold=5) == [[0], [1], [2]]


@pytest.mark.parametrize(
    "call", [lambda c: group_sentences([], c), factors_for, lowercases, check_corpus]
)
def test_an_unknown_corpus_is_refused(call: Callable[[str], object]) -> None:
    with pytest.raises(ValueError, match="corpus must be one of"):
        call("wnut")


def test_the_factors_and_token_comparison_of_each_corpus() -> None:
    assert isinstance(factors_for("conll2003"), SkipChain) and not lowercases("conll2003")
    tweets = factors_for("msm2013")
    assert isinstance(tweets, Consistency) and lowercases("msm2013")
    # Tweets are linked across tweets only: a tweet alone repeating a phrase gets no factor.
    alone = [["Paris", "and", "Paris"]]
    assert tweets.build(alone, LABELS.labels, LABELS.scheme) == []
    assert Consistency().build(alone, LABELS.labels, LABELS.scheme)
    pair = [["Paris"], ["paris"]]
    assert tweets.build(pair, LABELS.labels, LABELS.scheme) == Consistency().build(
        pair, LABELS.labels, LABELS.scheme
    )


def test_consistency_refuses_min_sentences_below_one() -> None:
    with pytest.raises(ValueError, match="min_sentences"):
        Consistency(min_sentences=0)


def test_every_corpus_has_a_grid_starting_at_the_chain_alone() -> None:
    assert set(GRIDS) == set(CORPORA)
    for grid in GRIDS.values():
        assert grid[0] == 0.0 and list(grid) == sorted(set(grid))


def test_the_corpus_of_a_config_class() -> None:
    assert corpus_of_class("crfhead.data.corpora.CoNLLCorpus") == "conll2003"
    assert corpus_of_class("crfhead.data.corpora.MSM2013Corpus") == "msm2013"
    with pytest.raises(ValueError, match="no higher-order evaluation for corpus class Finance"):
        corpus_of_class("crfhead.data.corpora.FinanceCorpus")
