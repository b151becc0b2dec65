"""The pattern builders (crfhead.higher_order.builders) on hand-made tweets and documents.

``group_tweets`` is the seed's (Qian & Liu 2014) single-linkage grouping ("greater than 4" shared
words); ``consistency_patterns`` its identical-phrase feature; ``skip_patterns`` the skip-chain
edges of Finkel et al. (2005) and Krishnan & Manning (2006). Expected patterns are written out.
"""

from __future__ import annotations

import random

import pytest

from crfhead.higher_order.builders import consistency_patterns, group_tweets, skip_patterns
from crfhead.higher_order.patterns import Pattern


def _tweet(text: str) -> list[str]:
    return text.split()


# ----------------------------------------------------------------------------- group_tweets


def test_linked_only_when_more_than_threshold_words_are_shared() -> None:
    four = [_tweet("a b c d x1 x2"), _tweet("a b c d y1 y2")]  # shares exactly 4
    five = [_tweet("a b c d e x1"), _tweet("a b c d e y1")]  # shares exactly 5
    assert group_tweets(four) == [[0], [1]]
    assert group_tweets(five) == [[0, 1]]
    assert group_tweets(four, threshold=3) == [[0, 1]]
    assert group_tweets(five, threshold=5) == [[0], [1]]


def test_similarity_counts_distinct_words_case_and_punctuation() -> None:
    repeated = [_tweet("a a a a a a b"), _tweet("a a a a a a b")]  # 2 distinct shared words
    assert group_tweets(repeated, threshold=1) == [[0, 1]]
    assert group_tweets(repeated, threshold=2) == [[0], [1]]
    cased = [_tweet("Obama Visits Paris Today Again"), _tweet("obama visits paris today again")]
    assert group_tweets(cased) == [[0, 1]]
    assert group_tweets(cased, lowercase=False) == [[0], [1]]
    # Punctuation-only tokens are not words: 4 shared words plus ":" "!" "..." do not link.
    punct = [_tweet("a b c d : ! ... x"), _tweet("a b c d : ! ... y")]
    assert group_tweets(punct) == [[0], [1]]
    assert group_tweets(punct, threshold=3) == [[0, 1]]


def test_single_linkage_is_transitive_and_keeps_singletons_in_order() -> None:
    tweets = [
        _tweet("lonely tweet here"),  # 0: singleton
        _tweet("a b c d e f"),  # 1
        _tweet("nothing in common with anyone"),  # 2: singleton
        _tweet("a b c d e g h i j k"),  # 3: shares 5 with 1
        _tweet("g h i j k z"),  # 4: shares 5 with 3, nothing with 1
    ]
    assert group_tweets(tweets) == [[0], [1, 3, 4], [2]]
    assert group_tweets([]) == []
    assert group_tweets([[]]) == [[0]]
    with pytest.raises(ValueError, match="threshold"):
        group_tweets(tweets, threshold=-1)


def _naive_groups(tweets: list[list[str]], threshold: int) -> list[list[int]]:
    words = [{w.lower() for w in t if any(c.isalnum() for c in w)} for t in tweets]
    label = list(range(len(tweets)))
    changed = True
    while changed:  # propagate the smallest index along every link until nothing changes
        changed = False
        for i in range(len(tweets)):
            for j in range(i + 1, len(tweets)):
                if len(words[i] & words[j]) > threshold and label[i] != label[j]:
                    label[i] = label[j] = min(label[i], label[j])
                    changed = True
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(label):
        groups.setdefault(g, []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


@pytest.mark.parametrize("threshold", [0, 2, 4])
def test_prefix_filter_equals_all_pairs(threshold: int) -> None:
    rng = random.Random(threshold)
    vocabulary = [f"w{i}" for i in range(60)]
    weights = [1.0 / (i + 1) for i in range(60)]  # Zipf-like: a few very frequent words
    tweets = [[*rng.choices(vocabulary, weights, k=rng.randint(0, 14)), "!"] for _ in range(150)]
    got = group_tweets(tweets, threshold=threshold)
    assert got == _naive_groups(tweets, threshold)
    assert sorted(i for g in got for i in g) == list(range(150))


# ----------------------------------------------------------------------- consistency_patterns

BIO_PER = ["O", "B-PER", "I-PER"]
BIOES_LOC = ["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]


def test_unigram_pairs_reward_the_same_entity_or_both_o() -> None:
    group = [_tweet("Obama visits Paris"), _tweet("Paris loves OBAMA")]
    got = consistency_patterns(group, BIO_PER, "BIO", weight=0.5)
    assert got == [
        Pattern(((0, 0, 1), (1, 2, 1)), 0.5),  # Obama ~ OBAMA: B-PER both
        Pattern(((0, 0, 0), (1, 2, 0)), 0.5),  # O both
        Pattern(((0, 2, 1), (1, 0, 1)), 0.5),  # Paris ~ Paris
        Pattern(((0, 2, 0), (1, 0, 0)), 0.5),
    ]
    cased = consistency_patterns(group, BIO_PER, "BIO", weight=0.5, lowercase=False)
    assert cased == got[2:]


def test_multiword_phrases_and_covered_pairs() -> None:
    group = [_tweet("New York is big"), _tweet("I love new york"), _tweet("York !")]
    got = consistency_patterns(group, BIOES_LOC, "BIOES", weight={"LOC": 2.0, "O": 0.5})
    assert got == [
        # "new" inside the "new york" pair: covered, so its entity candidate only.
        Pattern(((0, 0, 4), (1, 2, 4)), 2.0),
        # "new york" ~ "new york": B-LOC E-LOC both, or O O both.
        Pattern(((0, 0, 1), (0, 1, 3), (1, 2, 1), (1, 3, 3)), 2.0),
        Pattern(((0, 0, 0), (0, 1, 0), (1, 2, 0), (1, 3, 0)), 0.5),
        # "york" (0, 1) ~ (1, 3): covered by "new york".
        Pattern(((0, 1, 4), (1, 3, 4)), 2.0),
        # "york" (1, 3) ~ (2, 0): the chain's next link, not covered ("york !" is not a phrase).
        Pattern(((1, 3, 4), (2, 0, 4)), 2.0),
        Pattern(((1, 3, 0), (2, 0, 0)), 0.5),
    ]
    # Unigrams only: no pair is covered, every pair gets its O candidate.
    short = consistency_patterns(group, BIOES_LOC, "BIOES", max_length=1)
    assert [len(p.cells) for p in short] == [2] * 6
    assert Pattern(((0, 0, 0), (1, 2, 0)), 1.0) in short


def test_bio_phrase_candidates_and_three_tokens() -> None:
    group = [_tweet("Barack H Obama"), _tweet("Barack H Obama")]
    got = consistency_patterns(group, BIO_PER, "BIO", max_length=3)
    trigram = [p for p in got if len(p.cells) == 6]
    assert trigram == [
        Pattern(((0, 0, 1), (0, 1, 2), (0, 2, 2), (1, 0, 1), (1, 1, 2), (1, 2, 2)), 1.0),
        Pattern(((0, 0, 0), (0, 1, 0), (0, 2, 0), (1, 0, 0), (1, 1, 0), (1, 2, 0)), 1.0),
    ]
    # Three covered unigram pairs and two covered bigram pairs, entity candidates only.
    assert sorted(len(p.cells) for p in got) == [2, 2, 2, 4, 4, 6, 6]
    assert Pattern(((0, 1, 1), (0, 2, 2), (1, 1, 1), (1, 2, 2)), 1.0) in got


def test_overlapping_occurrences_are_not_paired() -> None:
    got = consistency_patterns([_tweet("ha ha ha ha")], ["O", "B-X", "I-X"], "BIO", max_length=2)
    bigrams = [p for p in got if len(p.cells) == 4]
    # "ha ha" at 0, 1, 2: 0 pairs with 2; 1 overlaps 2 and has no later occurrence.
    assert bigrams == [
        Pattern(((0, 0, 1), (0, 1, 2), (0, 2, 1), (0, 3, 2)), 1.0),
        Pattern(((0, 0, 0), (0, 1, 0), (0, 2, 0), (0, 3, 0)), 1.0),
    ]
    unigram_pairs = sorted({p.tokens for p in got if len(p.cells) == 2})
    assert unigram_pairs == [((0, 0), (0, 1)), ((0, 1), (0, 2)), ((0, 2), (0, 3))]


def test_punctuation_phrases_are_skipped_and_merge_drops_zero_weights() -> None:
    group = [_tweet("# Paris !"), _tweet("Paris ! #")]
    got = consistency_patterns(group, BIO_PER, "BIO")
    assert got == [
        Pattern(((0, 1, 1), (1, 0, 1)), 1.0),
        Pattern(((0, 1, 0), (1, 0, 0)), 1.0),
    ]
    only_entities = consistency_patterns(group, BIO_PER, "BIO", weight={"PER": 1.0, "O": 0.0})
    assert only_entities == got[:1]


@pytest.mark.parametrize(
    ("labels", "scheme", "weight", "max_length", "needle"),
    [
        (BIO_PER, "XYZ", 1.0, 3, "unknown tagging scheme"),
        (["O", "S-PER"], "BIO", 1.0, 3, "not valid in the BIO scheme"),
        (["O", "B-PER", "I-PER", "O"], "BIO", 1.0, 3, "appears twice"),
        (["O", "B-LOC", "E-LOC", "S-LOC"], "BIOES", 1.0, 3, "'I-LOC'"),
        (["B-PER", "I-PER"], "BIO", 1.0, 1, "'O'"),
        (BIO_PER, "BIO", {"PER": 1.0}, 3, "missing \\['O'\\]"),
        (BIO_PER, "BIO", {"PER": 1.0, "O": 1.0, "ORG": 1.0}, 3, "unknown \\['ORG'\\]"),
        (BIO_PER, "BIO", 1.0, 0, "max_length"),
    ],
)
def test_consistency_errors(
    labels: list[str], scheme: str, weight: float | dict[str, float], max_length: int, needle: str
) -> None:
    with pytest.raises(ValueError, match=needle):
        consistency_patterns([["a"]], labels, scheme, weight=weight, max_length=max_length)


def test_incomplete_labels_are_fine_when_no_phrase_needs_them() -> None:
    # BIOES without I-LOC cannot tag a 3-token entity; with max_length 2 none is needed.
    labels = ["O", "B-LOC", "E-LOC", "S-LOC"]
    got = consistency_patterns([["a", "b"], ["a", "b"]], labels, "BIOES", max_length=2)
    assert Pattern(((0, 0, 1), (0, 1, 2), (1, 0, 1), (1, 1, 2)), 1.0) in got


# ----------------------------------------------------------------------------- skip_patterns


def test_skip_edges_chain_identical_capitalised_tokens() -> None:
    document = [
        _tweet("John met Mary ."),
        _tweet("John and mary left ."),
        _tweet("Later , John smiled"),
    ]
    got = skip_patterns(document, BIO_PER, weight={"PER": 1.5})
    assert got == [
        Pattern(((0, 0, 1), (1, 0, 1)), 1.5),
        Pattern(((0, 0, 2), (1, 0, 2)), 1.5),
        Pattern(((1, 0, 1), (2, 2, 1)), 1.5),
        Pattern(((1, 0, 2), (2, 2, 2)), 1.5),
    ]


def test_skip_edges_of_every_token_and_per_type_weights() -> None:
    document = [_tweet("the cat ,"), _tweet("the dog , ,")]
    labels = ["O", "B-PER", "B-LOC", "I-LOC"]
    assert skip_patterns(document, labels) == []  # nothing capitalised
    got = skip_patterns(document, labels, weight={"PER": 1.0, "LOC": 2.0}, capitalised_only=False)
    assert got == [  # "the" only: punctuation is never linked
        Pattern(((0, 0, 1), (1, 0, 1)), 1.0),
        Pattern(((0, 0, 2), (1, 0, 2)), 2.0),
        Pattern(((0, 0, 3), (1, 0, 3)), 2.0),
    ]
    # Within one sentence, and an exact match only ("Paris" is not "PARIS").
    same = skip_patterns([_tweet("Paris or PARIS or Paris")], ["O", "S-LOC"])
    assert same == [Pattern(((0, 0, 1), (0, 4, 1)), 1.0)]


@pytest.mark.parametrize(
    ("labels", "weight", "needle"),
    [
        (["O", "PER"], 1.0, "neither"),
        (["O", "B-"], 1.0, "neither"),
        (["O", "B-PER", "B-PER"], 1.0, "appears twice"),
        (["O", "B-PER", "B-LOC"], {"PER": 1.0}, "missing \\['LOC'\\]"),
        (["O", "B-PER"], {"PER": 1.0, "O": 1.0}, "unknown \\['O'\\]"),
    ],
)
def test_skip_errors(labels: list[str], weight: float | dict[str, float], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        skip_patterns([["A"], ["A"]], labels, weight=weight)
