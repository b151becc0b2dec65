"""Long texts as chains (``crfhead.inference.documents``): sentence boundaries, token ranges, windows
and their seam-safe merge, exact on the hard cases and by property; then the tagger's plumbing
checked against tagging each sentence alone and against merging separately decoded windows.

The tagger here is an untrained indicator CRF with random weights (no training: seconds), biased
towards multi-token entities so that seams meet entities often.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from crfhead.data.corpora import FinanceCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.inference import TextTagger
from crfhead.inference.documents import (
    merge_windows,
    seam_cuts,
    sentence_ranges,
    token_ranges,
    windows,
)
from crfhead.model.tagger import Tagger
from crfhead.schemes import Span, repair_tags, split_label, tags_to_spans


def random_tagger(seed: int = 0) -> TextTagger:
    """An indicator CRF on the finance vocabularies with random weights, fond of I after B/I."""
    torch.manual_seed(seed)
    dm = TaggingDataModule(corpus=FinanceCorpus(train_docs=4, dev_docs=1, test_docs=1))
    model = Tagger.build(dm.vocabs)
    labels = model.labels.labels
    with torch.no_grad():
        model.encoder.weight.normal_(0.0, 1.5)
        for i, a in enumerate(labels):
            for j, b in enumerate(labels):
                _, ta = split_label(a, "BIO")
                rb, tb = split_label(b, "BIO")
                if rb == "I" and ta == tb:
                    model.head.transitions[i, j] += 2.5
    return TextTagger(model, dm.vocabs, {})


@pytest.fixture(scope="module")
def tagger() -> TextTagger:
    return random_tagger()


# ------------------------------------------------------------------------------ sentences
SPLITS = [
    (
        "Mr. Smith went to Washington. He arrived at 3.5 p.m. on Jan. 5. Then he left!",
        ["Mr. Smith went to Washington.", "He arrived at 3.5 p.m. on Jan. 5.", "Then he left!"],
    ),
    (
        'J. R. R. Tolkien wrote it. "Really?" she asked. (Yes.) The U.S. economy grew e.g. '
        "in 2025. 3 firms failed...  Wow",
        [
            "J. R. R. Tolkien wrote it.",
            '"Really?" she asked.',
            "(Yes.)",
            "The U.S. economy grew e.g. in 2025.",
            "3 firms failed...",
            "Wow",
        ],
    ),
    (
        "para one\n\npara two\nsame para. Next one?",
        ["para one", "para two\nsame para.", "Next one?"],
    ),
    ("Is it 5? yes it is.", ["Is it 5? yes it is."]),
    (
        "He said \u201cGo.\u201d Then he left\u2026 Fine.",
        ["He said \u201cGo.\u201d", "Then he left\u2026", "Fine."],
    ),
    ("Dr. No met Mr. Big vs. St. Clair. Done", ["Dr. No met Mr. Big vs. St. Clair.", "Done"]),
    (
        "Revenue was $3.5 million. Costs rose 4.2%.",
        ["Revenue was $3.5 million.", "Costs rose 4.2%."],
    ),
    ("It bought Acme Inc. The deal closed.", ["It bought Acme Inc.", "The deal closed."]),
    ("Wait!! Really?! Yes.", ["Wait!!", "Really?!", "Yes."]),
    ("see Fig. 3 and No. 7 of Vol. 2. Next", ["see Fig. 3 and No. 7 of Vol. 2.", "Next"]),
    ("", []),
    ("  \n\n \t", []),
    ("no end in sight", ["no end in sight"]),
]


@pytest.mark.parametrize(("text", "want"), SPLITS)
def test_sentence_boundaries_on_the_hard_cases(text: str, want: list[str]) -> None:
    assert [text[a:b] for a, b in sentence_ranges(text)] == want


def test_lines_makes_every_line_break_a_boundary() -> None:
    text = "A title\nfirst line. second\n\n third"
    assert [text[a:b] for a, b in sentence_ranges(text, lines=True)] == [
        "A title",
        "first line. second",
        "third",
    ]
    assert [text[a:b] for a, b in sentence_ranges(text)] == [
        "A title\nfirst line. second",
        "third",
    ]


@given(st.text(alphabet='aZ3 .!?\n"()\u2026', max_size=60))
def test_sentences_partition_the_non_space_characters(text: str) -> None:
    ranges = sentence_ranges(text)
    covered: list[int] = []
    prev_end = 0
    for a, b in ranges:
        assert prev_end <= a < b <= len(text)
        assert not text[a].isspace() and not text[b - 1].isspace()
        covered.extend(range(a, b))
        prev_end = b
    inside = set(covered)
    assert {i for i, c in enumerate(text) if not c.isspace()} <= inside


def test_tokens_go_to_the_sentence_they_start_in(tagger: TextTagger) -> None:
    text = "Mr. Smith left. He said no. 2025. Then"
    assert tagger.tokenizer is not None
    toks = tagger.tokenizer.tokenize(text)
    assert [t.text for t in toks] == ["mr", "smith", "left", "he", "said", "no", "then"]
    # "2025." is a sentence with no letter token: dropped.
    assert token_ranges(toks, sentence_ranges(text)) == [range(0, 3), range(3, 6), range(6, 7)]
    assert token_ranges([], sentence_ranges(text)) == []
    # One sentence, or none found: every token is the first's.
    assert token_ranges(toks, [(0, len(text))]) == [range(0, 7)]
    assert token_ranges(toks, [(4, 14)]) == [range(0, 7)]
    assert token_ranges(toks, []) == [range(0, 7)]


# ------------------------------------------------------------------------------ windows
def test_windows_exact() -> None:
    assert windows(10, 4, 1) == [range(0, 4), range(3, 7), range(6, 10)]
    assert windows(4, 4, 1) == [range(0, 4)]
    assert windows(5, 4, 2) == [range(0, 4), range(1, 5)]
    assert windows(1000, 512, 128) == [range(0, 512), range(244, 756), range(488, 1000)]
    with pytest.raises(
        ValueError, match=r"overlap must be in \[0, max_length // 2\] = \[0, 2\], got 3"
    ):
        windows(10, 4, 3)
    with pytest.raises(ValueError, match="max_length must be >= 1, got 0"):
        windows(10, 0, 0)


@given(st.integers(1, 80), st.integers(1, 12), st.data())
def test_windows_are_the_fewest_that_cover_with_the_overlap(
    n: int, length: int, data: st.DataObject
) -> None:
    overlap = data.draw(st.integers(0, length // 2))
    wins = windows(n, length, overlap)
    if n <= length:
        assert wins == [range(0, n)]
        return
    assert wins[0].start == 0 and wins[-1].stop == n
    assert all(len(w) == length for w in wins)
    assert all(
        b.start - a.start >= 1 and a.stop - b.start >= overlap for a, b in itertools.pairwise(wins)
    )
    fewest = next(m for m in range(2, n + 2) if m * length - (m - 1) * overlap >= n)
    assert len(wins) == fewest


# ------------------------------------------------------------------------------ merging
def _local(tags: list[str], w: range) -> list[str]:
    return tags[w.start : w.stop]


def test_a_seam_moves_off_an_entity_to_where_both_windows_agree() -> None:
    wins = [range(0, 8), range(4, 12)]
    truth = ["O"] * 5 + ["B-X", "I-X"] + ["O"] * 5  # entity 5..6 across the centre (6)
    tags = [_local(truth, w) for w in wins]
    spans = [tags_to_spans(t, "BIO") for t in tags]
    assert seam_cuts(wins, tags, spans) == ([5], True)
    merged = merge_windows(wins, tags, spans, [[0.7], [0.6]], "BIO")
    assert merged.tags == truth and merged.clean
    assert merged.spans == [Span("X", 5, 6)] and merged.probabilities == [0.6]  # window 1's


def test_a_seam_moves_to_where_the_windows_decoded_the_same_tags() -> None:
    wins = [range(0, 8), range(4, 12)]
    left = ["O"] * 6 + ["B-X", "I-X"]
    right = ["O"] * 8  # disagrees at 6 and 7
    spans = [tags_to_spans(left, "BIO"), []]
    assert seam_cuts(wins, [left, right], spans) == ([5], True)
    merged = merge_windows(wins, [left, right], spans, [[0.9], []], "BIO")
    assert merged.tags == ["O"] * 12 and merged.spans == []


def test_no_clean_place_cuts_at_the_centre_repairs_and_gives_no_probability() -> None:
    wins = [range(0, 8), range(4, 12)]
    left = ["O"] * 6 + ["B-X", "I-X"]  # entity 6..7
    right = ["B-X", "I-X", "I-X", "I-X", "I-X", "O", "O", "O"]  # entity 4..8: crosses 4..7
    spans = [tags_to_spans(left, "BIO"), tags_to_spans(right, "BIO")]
    assert seam_cuts(wins, [left, right], spans) == ([6], False)
    merged = merge_windows(wins, [left, right], spans, [[0.8], [0.7]], "BIO")
    assert merged.tags == ["O"] * 6 + ["B-X", "I-X", "I-X"] + ["O"] * 3  # O I-X repaired to B-X
    assert merged.spans == [Span("X", 6, 8)] and merged.probabilities == [None]
    assert not merged.clean
    unrepaired = merge_windows(wins, [left, right], spans, None, "BIO", repair=False)
    assert unrepaired.tags[6] == "I-X" and unrepaired.probabilities == [None]


_SEGMENT = st.lists(st.sampled_from(["O", "B-X", "I-X", "B-Y", "I-Y"]), min_size=1, max_size=40)


@given(_SEGMENT, st.integers(2, 10), st.data())
def test_merged_windows_are_valid_and_every_probability_is_a_windows_own(
    base: list[str], length: int, data: st.DataObject
) -> None:
    base = repair_tags(base, "BIO")[0]
    overlap = data.draw(st.integers(0, length // 2))
    wins = windows(len(base), length, overlap)
    perturb = data.draw(st.booleans())
    tags = []
    for w in wins:
        local = _local(base, w)
        if perturb:
            noise = data.draw(
                st.lists(
                    st.sampled_from(["O", "B-X", "I-X", "I-Y"]), min_size=len(w), max_size=len(w)
                )
            )
            keep = data.draw(st.lists(st.booleans(), min_size=len(w), max_size=len(w)))
            local = repair_tags(
                [a if k else b for a, b, k in zip(local, noise, keep, strict=True)], "BIO"
            )[0]
        tags.append(local)
    spans = [tags_to_spans(t, "BIO") for t in tags]
    probs = [[(i + 1) / 100] * len(s) for i, s in enumerate(spans)]
    merged = merge_windows(wins, tags, spans, probs, "BIO")
    assert len(merged.tags) == len(base)
    assert repair_tags(merged.tags, "BIO")[1] == 0
    assert merged.spans == tags_to_spans(merged.tags, "BIO")
    for span, p in zip(merged.spans, merged.probabilities, strict=True):
        if p is not None:
            i = round(p * 100) - 1
            w = wins[i]
            assert Span(span.label, span.start - w.start, span.end - w.start) in spans[i]
        else:
            assert not merged.clean
    if not perturb:  # a seam without two shared tokens is a hard cut, never called clean
        assert merged.tags == base
        # A seam is cut clean where two shared tokens are not inside one entity.
        inside = {p for sp in tags_to_spans(base, "BIO") for p in range(sp.start, sp.end)}
        free = [
            any(c - 1 not in inside for c in range(b.start + 1, a.stop))
            for a, b in itertools.pairwise(wins)
        ]
        if not all(free):
            assert not merged.clean
        elif len(wins) <= 2:
            assert merged.clean
        if merged.clean:
            assert None not in merged.probabilities


# ------------------------------------------------------------------------------ the tagger
LONG = " ".join(
    f"Solenne Power guided to {i} percent growth in the first quarter, said CEO Mara Voss. "
    "Analysts at Hollis Bank in Ostrava expected more!" + ("\n\n" if i % 3 == 2 else "")
    for i in range(12)
)


def test_splitting_equals_tagging_each_sentence_alone(tagger: TextTagger) -> None:
    (whole,) = tagger.annotate([LONG])
    tags, ents = [], []
    for a, b in sentence_ranges(LONG):
        (alone,) = tagger.annotate([LONG[a:b]], split="none")
        offset = len(tags)
        tags.extend(alone.tags)
        ents.extend(
            (e.label, e.start + a, e.end + a, e.text, e.probability, e.token_start + offset)
            for e in alone.entities
        )
    assert whole.tags == tags
    assert [
        (e.label, e.start, e.end, e.text, e.probability, e.token_start) for e in whole.entities
    ] == ents
    assert len(whole.entities) > 10


def test_one_window_when_max_length_reaches_the_length(tagger: TextTagger) -> None:
    (one,) = tagger.annotate([LONG], split="none", max_length=100_000)
    n = len(one.tokens)
    (exact,) = tagger.annotate([LONG], split="none", max_length=n)
    assert exact == one
    (cut,) = tagger.annotate([LONG], split="none", max_length=n - 1, overlap=(n - 1) // 2)
    assert cut.tokens == one.tokens and len(cut.tags) == n


def test_windows_are_the_merge_of_the_windows_decoded_alone(tagger: TextTagger) -> None:
    assert tagger.tokenizer is not None
    words = [t.text for t in tagger.tokenizer.tokenize(LONG)][:70]
    (got,) = tagger.annotate([words], max_length=16, overlap=6)
    wins = windows(len(words), 16, 6)
    alone = tagger.annotate([words[w.start : w.stop] for w in wins])
    spans = [[Span(e.label, e.token_start, e.token_end - 1) for e in a.entities] for a in alone]
    probs = [[e.probability or 0.0 for e in a.entities] for a in alone]
    merged = merge_windows(wins, [a.tags for a in alone], spans, probs, "BIO")
    assert got.tags == merged.tags
    assert [Span(e.label, e.token_start, e.token_end - 1) for e in got.entities] == merged.spans
    assert [e.probability for e in got.entities] == [
        None if p is None else round(p, 6) for p in merged.probabilities
    ]


@pytest.mark.parametrize(
    ("split", "max_length", "overlap"),
    [("sentences", 7, 3), ("none", 7, 3), ("none", 9, 0), ("sentences", 512, None)],
)
def test_long_text_offsets_validity_and_coverage(
    tagger: TextTagger, split: str, max_length: int, overlap: int | None
) -> None:
    (t,) = tagger.annotate([LONG], split=split, max_length=max_length, overlap=overlap)
    assert tagger.tokenizer is not None
    assert t.tokens == tagger.tokenizer.tokenize(LONG)
    assert len(t.tags) == len(t.tokens)
    assert repair_tags(t.tags, "BIO")[1] == 0
    assert [Span(e.label, e.token_start, e.token_end - 1) for e in t.entities] == tags_to_spans(
        t.tags, "BIO"
    )
    end = -1
    for e in t.entities:
        assert LONG[e.start : e.end] == e.text
        assert e.token_start > end  # sorted, never overlapping
        end = e.token_end - 1
