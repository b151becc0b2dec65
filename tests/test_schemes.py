"""Tagging schemes: allowed transitions, span reading, conversion and repair."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crfhead.schemes import (
    Span,
    allowed_transitions,
    canonical_scheme,
    convert_tags,
    entity_types,
    is_valid,
    labels_for,
    repair_tags,
    spans_to_tags,
    split_label,
    tags_to_spans,
)

BIO = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG"]
BIOES = labels_for(["PER", "ORG"], "BIOES")


def test_aliases_are_canonicalised() -> None:
    assert canonical_scheme("iob2") == "BIO"
    assert canonical_scheme("IOBES") == "BIOES"
    assert canonical_scheme("BIOUL") == "BIOUL"


def test_unknown_scheme_is_named() -> None:
    with pytest.raises(ValueError, match="unknown tagging scheme 'BILOU-X'"):
        canonical_scheme("BILOU-X")


def test_label_outside_the_scheme_is_named() -> None:
    with pytest.raises(ValueError, match="label 'E-PER' is not valid in the BIO scheme"):
        split_label("E-PER", "BIO")
    with pytest.raises(ValueError, match="label 'PER' is not valid"):
        allowed_transitions(["O", "PER"], "BIO")
    # Every label is read, also after a transition that already makes the sequence invalid.
    with pytest.raises(ValueError, match="label 'S-PER' is not valid in the BIO scheme"):
        is_valid(["I-ORG", "O", "S-PER"], "BIO")


def test_labels_for_each_scheme() -> None:
    assert labels_for(["PER"], "BIO") == ["O", "B-PER", "I-PER"]
    assert labels_for(["PER"], "BIOUL") == ["O", "B-PER", "I-PER", "L-PER", "U-PER"]
    assert labels_for(["PER"], "IO") == ["O", "I-PER"]
    assert entity_types(BIOES, "BIOES") == ["PER", "ORG"]


def test_bio_allowed_transitions() -> None:
    trans, start, end = allowed_transitions(BIO, "BIO")
    ix = {label: i for i, label in enumerate(BIO)}
    assert not trans[ix["O"], ix["I-PER"]]
    assert not trans[ix["B-ORG"], ix["I-PER"]]
    assert trans[ix["B-PER"], ix["I-PER"]] and trans[ix["I-PER"], ix["I-PER"]]
    assert trans[ix["I-PER"], ix["B-PER"]] and trans[ix["I-ORG"], ix["O"]]
    assert start.tolist() == [True, True, False, True, False]
    assert end.all()


def test_bioes_allowed_transitions() -> None:
    trans, start, end = allowed_transitions(BIOES, "BIOES")
    ix = {label: i for i, label in enumerate(BIOES)}
    assert trans[ix["B-PER"], ix["E-PER"]] and trans[ix["B-PER"], ix["I-PER"]]
    assert not trans[ix["B-PER"], ix["O"]] and not trans[ix["B-PER"], ix["E-ORG"]]
    assert trans[ix["E-PER"], ix["S-ORG"]] and not trans[ix["E-PER"], ix["I-PER"]]
    assert [BIOES[i] for i in range(len(BIOES)) if start[i]] == [
        "O",
        "B-PER",
        "S-PER",
        "B-ORG",
        "S-ORG",
    ]
    assert [BIOES[i] for i in range(len(BIOES)) if end[i]] == [
        "O",
        "E-PER",
        "S-PER",
        "E-ORG",
        "S-ORG",
    ]


def test_iob1_allowed_transitions() -> None:
    labels = ["O", "I-PER", "B-PER", "I-LOC"]
    trans, start, _ = allowed_transitions(labels, "IOB1")
    assert trans[1, 2] and trans[2, 2] and not trans[0, 2] and not trans[3, 2]
    assert start.tolist() == [True, True, False, True]


def _all_sequences(labels: list[str], n: int) -> list[list[str]]:
    return [list(p) for p in itertools.product(labels, repeat=n)]


@pytest.mark.parametrize("scheme", ["IO", "BIO", "IOB1", "BIOES", "BIOUL"])
def test_matrix_agrees_with_is_valid_on_every_short_sequence(scheme: str) -> None:
    labels = labels_for(["A", "B"], scheme)
    if scheme == "IOB1":
        labels = ["O", "I-A", "B-A", "I-B", "B-B"]
    trans, start, end = allowed_transitions(labels, scheme)
    ix = {label: i for i, label in enumerate(labels)}
    for n in (1, 2, 3):
        for seq in _all_sequences(labels, n):
            ids = [ix[x] for x in seq]
            by_matrix = bool(start[ids[0]]) and bool(end[ids[-1]])
            by_matrix = by_matrix and all(bool(trans[a, b]) for a, b in itertools.pairwise(ids))
            assert by_matrix == is_valid(seq, scheme), seq


def test_spans_are_read_leniently() -> None:
    assert tags_to_spans(["O", "I-PER", "I-PER", "O"], "BIO") == [Span("PER", 1, 2)]
    assert tags_to_spans(["B-PER", "B-PER", "I-ORG"], "BIO") == [
        Span("PER", 0, 0),
        Span("PER", 1, 1),
        Span("ORG", 2, 2),
    ]
    assert tags_to_spans(["I-PER", "B-PER", "O"], "IOB1") == [Span("PER", 0, 0), Span("PER", 1, 1)]
    assert tags_to_spans(["B-PER", "E-PER", "I-PER", "S-ORG"], "BIOES") == [
        Span("PER", 0, 1),
        Span("PER", 2, 2),
        Span("ORG", 3, 3),
    ]
    assert tags_to_spans(["U-PER", "B-ORG", "L-ORG"], "BIOUL") == [
        Span("PER", 0, 0),
        Span("ORG", 1, 2),
    ]


def test_conversion_between_schemes() -> None:
    bio = ["B-PER", "I-PER", "O", "B-ORG", "B-ORG", "I-ORG"]
    assert convert_tags(bio, "BIO", "BIOES") == ["B-PER", "E-PER", "O", "S-ORG", "B-ORG", "E-ORG"]
    assert convert_tags(bio, "BIO", "BIOUL") == ["B-PER", "L-PER", "O", "U-ORG", "B-ORG", "L-ORG"]
    assert convert_tags(bio, "BIO", "IOB1") == ["I-PER", "I-PER", "O", "I-ORG", "B-ORG", "I-ORG"]
    assert convert_tags(bio, "BIO", "IO") == ["I-PER", "I-PER", "O", "I-ORG", "I-ORG", "I-ORG"]


@given(
    st.lists(st.sampled_from(BIOES), max_size=8), st.sampled_from(["BIO", "IOB1", "BIOES", "BIOUL"])
)
def test_repair_gives_valid_sequences_and_round_trips(tags: list[str], target: str) -> None:
    fixed, changed = repair_tags(tags, "BIOES")
    assert is_valid(fixed, "BIOES")
    assert changed == sum(a != b for a, b in zip(tags, fixed, strict=True))
    assert (changed == 0) == is_valid(tags, "BIOES")
    # Valid sequences survive a round trip through any scheme that keeps entity boundaries.
    back = convert_tags(convert_tags(fixed, "BIOES", target), target, "BIOES")
    assert back == fixed


def test_repair_counts_changes() -> None:
    assert repair_tags(["O", "I-PER", "I-PER"], "BIO") == (["O", "B-PER", "I-PER"], 1)
    assert repair_tags(["B-ORG", "I-ORG"], "BIOES") == (["B-ORG", "E-ORG"], 1)
    assert repair_tags(["B-ORG", "E-ORG"], "BIOES") == (["B-ORG", "E-ORG"], 0)


def test_spans_to_tags_rejects_overlap_and_out_of_range() -> None:
    with pytest.raises(ValueError, match="overlaps"):
        spans_to_tags([Span("A", 0, 1), Span("B", 1, 2)], 3, "BIO")
    with pytest.raises(ValueError, match="does not fit in 2 tokens"):
        spans_to_tags([Span("A", 1, 2)], 2, "BIO")
