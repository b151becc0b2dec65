"""``TextTagger.groups_for``: the groups ``annotate`` decodes raw texts in, as index lists to pass back.

A tiny finance CRF with a group decoder attached (consistency factors at a fixed scale) and a tweet
grouping, so that joint decoding and the grouping both act without training a higher-order model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import train_tiny_finance

import crfhead
from crfhead.data.grouping import TweetGroups
from crfhead.higher_order import FactorDecoder
from crfhead.inference import TextTagger

TEXTS = [
    "Solenne Power guided to 4 percent growth in the first quarter, said CEO Mara Voss.",
    "Mara Voss said Solenne Power grew.",
    "nothing here",
    "   ",
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny_finance(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def chain(checkpoint: Path) -> TextTagger:
    return crfhead.load(checkpoint)


@pytest.fixture(scope="module")
def joint(checkpoint: Path) -> TextTagger:
    tagger = crfhead.load(checkpoint)
    assert tagger.scheme is not None
    tagger.model.decoder = FactorDecoder(tagger.labels, tagger.scheme, grid=[3.0], scale=3.0)
    tagger.grouping = TweetGroups(threshold=1)  # texts sharing two words
    return tagger


def test_each_alone_is_none_and_a_chain_refuses_a_group(chain: TextTagger) -> None:
    assert chain.groups_for(TEXTS, "none") is None
    assert chain.groups_for(TEXTS, False) is None
    with pytest.raises(ValueError, match="this model has no group decoder"):
        chain.groups_for(TEXTS, "all")


@pytest.mark.parametrize("group", ["all", "auto", True, [[0, 2], [1], [3]]])
def test_the_groups_passed_back_decode_as_the_mode_does(joint: TextTagger, group: object) -> None:
    groups = joint.groups_for(TEXTS, group)  # type: ignore[arg-type]
    assert groups is not None
    assert sorted(i for g in groups for i in g) == list(range(len(TEXTS)))
    again = joint.annotate(TEXTS, group=groups)
    assert [t.to_dict() for t in again] == [
        t.to_dict()
        for t in joint.annotate(TEXTS, group=group)  # type: ignore[arg-type]
    ]
    assert again[3].certified is None  # no tokens: in its list, not decoded


def test_the_saved_grouping_sees_the_tokens(joint: TextTagger) -> None:
    assert joint.groups_for(TEXTS, "auto") == [[0, 1], [2], [3]]
    assert joint.groups_for(TEXTS, "all") == [[0, 1, 2, 3]]
    with pytest.raises(ValueError, match="exactly once"):
        joint.groups_for(TEXTS, [[0, 1]])


def test_the_saved_grouping_and_a_grouping_given_cut_to_their_max_size(joint: TextTagger) -> None:
    texts = ["Mara Voss said Solenne Power grew."] * 5
    uncut = joint.groups_for(texts, "auto")
    assert uncut == [[0, 1, 2, 3, 4]]
    saved = joint.grouping
    try:
        joint.grouping = TweetGroups(threshold=1, max_size=2)  # as a model trained with max_size
        assert joint.groups_for(texts, "auto") == [[0, 1], [2, 3], [4]]
    finally:
        joint.grouping = saved
    assert joint.groups_for(texts, TweetGroups(threshold=1, max_size=3)) == [[0, 1, 2], [3, 4]]
