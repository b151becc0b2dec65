"""Tagging with what the user knows: pinned spans (``spans=``) and forbidden labels (``forbid=``).

Every decoding, span probability, node marginal and k-best list under a constraint is checked
against enumeration of every labelling of the chain *under the constraint*: the oracle keeps the
labellings whose lenient reading (:func:`crfhead.schemes.tags_to_spans`) holds each pinned span
and that use no forbidden label, which is independent of how :mod:`crfhead.inference.pins` writes
the pins. Taggers are untrained indicator CRFs with random weights over two entity types in each
scheme (seconds; as ``test_documents``).
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Sequence

import pytest
import torch

from crfhead.data.corpora import FinanceCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.data.sentence import Sentence
from crfhead.evaluation import spans as spans_module
from crfhead.evaluation.spans import span_probabilities
from crfhead.inference import TextTagger
from crfhead.inference.documents import windows
from crfhead.inference.pins import text_constraint
from crfhead.model.tagger import Tagger
from crfhead.schemes import Span, is_valid, labels_for, tags_to_spans

TYPES = ("ORG", "PERSON")
TEXT = "Aiko Voss said Mara"  # four tokens, one sentence
SCHEMES = ("BIO", "IOB1", "BIOES", "BIOUL", "IO")


@pytest.fixture(scope="module")
def vocabs() -> dict[str, object]:
    return TaggingDataModule(corpus=FinanceCorpus(train_docs=4, dev_docs=1, test_docs=1)).vocabs


def make_tagger(vocabs: dict[str, object], scheme: str, seed: int = 0) -> TextTagger:
    """An indicator CRF with random weights over ORG and PERSON in ``scheme`` (constrained)."""
    v = copy.deepcopy(vocabs)
    v["labels"] = {"labels": labels_for(TYPES, scheme), "scheme": scheme}
    torch.manual_seed(seed)
    model = Tagger.build(v)  # type: ignore[arg-type]
    with torch.no_grad():
        model.encoder.weight.normal_(0.0, 1.5)
        model.head.transitions.normal_(0.0, 1.0)
    return TextTagger(model, v, {})


@pytest.fixture(scope="module")
def bio(vocabs: dict[str, object]) -> TextTagger:
    return make_tagger(vocabs, "BIO")


class Brute:
    """Every labelling of one chain, normalised over those the constraint keeps."""

    def __init__(
        self,
        tagger: TextTagger,
        words: Sequence[str],
        pins: Sequence[Span] = (),
        allowed: torch.Tensor | None = None,
    ) -> None:
        batch = tagger.collate([Sentence(list(words))])
        with torch.inference_mode():
            pot = tagger.model.head.potentials(tagger.model(batch), batch.mask)
        em = pot.emissions[0].double()
        trans, start, end = (x.double() for x in (pot.transitions, pot.start, pot.end))
        n, K = len(words), em.shape[-1]
        self.labels = tagger.labels
        self.scheme = tagger.scheme or "BIO"
        self.paths = torch.tensor(list(itertools.product(range(K), repeat=n)))  # (N, n)
        z = self.paths
        score = start[z[:, 0]] + end[z[:, -1]] + em[torch.arange(n), z].sum(1)
        if n > 1:
            score = score + trans[z[:, :-1], z[:, 1:]].sum(1)
        keep = torch.isfinite(score)
        if allowed is not None:
            keep &= allowed[torch.arange(n), z].all(1)
        self.tags = [[self.labels[k] for k in row] for row in z.tolist()]
        self.spans = [set(tags_to_spans(t, self.scheme)) for t in self.tags]
        for i in keep.nonzero()[:, 0].tolist():
            keep[i] = all(p in self.spans[i] for p in pins)
        self.log_z = float(torch.logsumexp(score[keep], 0))
        self.logp = torch.where(keep, score - self.log_z, float("-inf"))
        self.p = self.logp.exp()

    def best(self) -> list[str]:
        return self.tags[int(self.logp.argmax())]

    def span_probability(self, span: Span) -> float:
        return float(sum(self.p[i] for i, s in enumerate(self.spans) if span in s))

    def marginals(self) -> torch.Tensor:
        n, K = self.paths.shape[1], len(self.labels)
        out = torch.zeros(n, K, dtype=torch.float64)
        for t in range(n):
            out[t].index_add_(0, self.paths[:, t], self.p)
        return out


def tokens_of(tagger: TextTagger, text: str) -> list[str]:
    assert tagger.tokenizer is not None
    return [t.text for t in tagger.tokenizer.tokenize(text)]


def check_against(tagger: TextTagger, text: str, brute: Brute, pins: Sequence[Span], **kw: object):
    """``annotate`` and ``trellis`` of ``text`` under ``kw`` equal the enumeration ``brute``."""
    (t,) = tagger.annotate([text], marginals=True, k=4, **kw)  # type: ignore[arg-type]
    assert t.tags == brute.best()
    got = {Span(e.label, e.token_start, e.token_end - 1): e.probability for e in t.entities}
    for span, p in got.items():
        want = 1.0 if span in pins else brute.span_probability(span)
        assert p == pytest.approx(want, abs=2e-6), span
    for pin in pins:
        assert got[pin] == 1.0  # exactly
    assert t.marginals is not None
    torch.testing.assert_close(
        torch.tensor(t.marginals, dtype=torch.float64), brute.marginals(), atol=1e-5, rtol=0
    )
    order = [i for i in torch.argsort(brute.logp, descending=True)[:4].tolist()]
    order = [i for i in order if brute.logp[i] > float("-inf")]  # fewer where fewer are left
    assert t.best is not None
    assert [p for p, _ in t.best] == pytest.approx(
        [math.exp(float(brute.logp[i])) for i in order], rel=1e-4
    )
    one = {"spans": kw["spans"][0]} if kw.get("spans") else {}  # type: ignore[index]
    if kw.get("forbid"):
        one["forbid"] = kw["forbid"][0]  # type: ignore[index]
    trellis = tagger.trellis(text, 3, **one)  # type: ignore[arg-type]
    assert trellis.log_partition == pytest.approx(brute.log_z, abs=1e-4)
    assert trellis.tagged.tags == t.tags


# ------------------------------------------------------------------------------ pinning
def test_a_bio_pin_changes_a_neighbours_tag_as_the_enumeration_says(
    vocabs: dict[str, object],
) -> None:
    """The issue's example: pinning a span moves the decoding of the tokens next to it."""
    words = ["aiko", "voss", "said", "mara"]
    offsets = [(0, 4), (5, 9), (10, 14), (15, 19)]
    changed = []
    for seed in range(6):
        tagger = make_tagger(vocabs, "BIO", seed)
        free = tagger.annotate([TEXT])[0].tags
        assert free == Brute(tagger, words).best()
        for (s, e), typ in itertools.product([(0, 1), (1, 1), (1, 2), (2, 3)], TYPES):
            pin = Span(typ, s, e)
            tags = tagger.annotate([TEXT], spans=[[(offsets[s][0], offsets[e][1], typ)]])[0].tags
            assert tags == Brute(tagger, words, [pin]).best(), (seed, pin)
            assert pin in tags_to_spans(tags, "BIO")
            outside = [t for t in range(4) if not s <= t <= e]
            if any(tags[t] != free[t] for t in outside):
                changed.append((seed, pin))
    assert changed  # some pin moved a neighbour, each time exactly as enumeration says


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_scheme_decodes_and_scores_as_the_enumeration_under_the_pins(
    vocabs: dict[str, object], scheme: str
) -> None:
    tagger = make_tagger(vocabs, scheme, seed=3)
    words = tokens_of(tagger, TEXT)
    for pins, chars in [
        ([Span("PERSON", 0, 1)], [(0, 9, "PERSON")]),
        ([Span("ORG", 2, 2)], [(10, 14, "ORG")]),
        ([Span("ORG", 0, 0), Span("PERSON", 2, 3)], [(0, 4, "ORG"), (10, 19, "PERSON")]),
    ]:
        brute = Brute(tagger, words, pins)
        check_against(tagger, TEXT, brute, pins, spans=[chars])


@pytest.mark.parametrize("scheme", ("BIO", "IOB1", "BIOES"))
def test_adjacent_pins_of_one_type_stay_two_entities(
    vocabs: dict[str, object], scheme: str
) -> None:
    tagger = make_tagger(vocabs, scheme, seed=1)
    pins = [Span("ORG", 0, 1), Span("ORG", 2, 2)]
    brute = Brute(tagger, tokens_of(tagger, TEXT), pins)
    check_against(tagger, TEXT, brute, pins, spans=[[(0, 9, "ORG"), (10, 14, "ORG")]])
    tags = tagger.tag(TEXT, spans=[(0, 9, "ORG"), (10, 14, "ORG")])
    assert [(e.text, e.label) for e in tags[:2]] == [("Aiko Voss", "ORG"), ("said", "ORG")]
    if scheme == "IOB1":  # IOB1 separates them with B- (the edge ban), as it writes them
        assert tagger.annotate([TEXT], spans=[[(0, 9, "ORG"), (10, 14, "ORG")]])[0].tags[2] == (
            "B-ORG"
        )


def test_iob1_pin_after_an_unpinned_entity_of_its_type_is_exact(
    vocabs: dict[str, object],
) -> None:
    """IOB1's pinned start is I-X or B-X by what precedes: the enumeration keeps both."""
    for seed in range(4):
        tagger = make_tagger(vocabs, "IOB1", seed)
        brute = Brute(tagger, tokens_of(tagger, TEXT), [Span("ORG", 1, 2)])
        starts = {brute.tags[i][1] for i in brute.p.nonzero()[:, 0].tolist()}
        assert starts == {"I-ORG", "B-ORG"}
        check_against(tagger, TEXT, brute, [Span("ORG", 1, 2)], spans=[[(5, 14, "ORG")]])


# ------------------------------------------------------------------------------ forbid
@pytest.mark.parametrize(
    ("forbid", "banned"),
    [
        (["PERSON"], {"B-PERSON", "I-PERSON"}),
        (["B-ORG"], {"B-ORG"}),
        (["O"], {"O"}),
    ],
)
def test_forbid_everywhere_is_the_enumeration_without_those_labels(
    bio: TextTagger, forbid: list[str], banned: set[str]
) -> None:
    words = tokens_of(bio, TEXT)
    allowed = torch.tensor([[lab not in banned for lab in bio.labels]] * len(words))
    brute = Brute(bio, words, allowed=allowed)
    check_against(bio, TEXT, brute, [], forbid=[forbid])
    assert not any(tag in banned for tag in bio.annotate([TEXT], forbid=forbid)[0].tags)


def test_forbid_on_a_character_range_and_with_a_pin(bio: TextTagger) -> None:
    words = tokens_of(bio, TEXT)
    allowed = torch.ones(len(words), len(bio.labels), dtype=torch.bool)
    allowed[1:3, [bio.labels.index("B-ORG"), bio.labels.index("I-ORG")]] = False  # "oss said"
    pins = [Span("PERSON", 3, 3)]
    brute = Brute(bio, words, pins, allowed)
    check_against(bio, TEXT, brute, pins, spans=[[(15, 19, "PERSON")]], forbid=[[(6, 12, "ORG")]])


# ------------------------------------------------------------------------------ chains
TWO = "Aiko said. Mara left."


def test_a_pin_conditions_only_its_own_sentence(bio: TextTagger) -> None:
    (both,) = bio.annotate([TWO], spans=[[(11, 15, "ORG")]], marginals=True)
    first = bio.annotate(["Aiko said."], marginals=True)[0]
    second = bio.annotate(["Mara left."], spans=[[(0, 4, "ORG")]], marginals=True)[0]
    assert both.tags == first.tags + second.tags
    assert both.marginals and first.marginals and second.marginals
    torch.testing.assert_close(
        torch.tensor(both.marginals), torch.tensor(first.marginals + second.marginals)
    )
    brute = Brute(bio, ["mara", "left"], [Span("ORG", 0, 0)])
    assert second.tags == brute.best()


def test_a_pin_across_a_sentence_boundary_keeps_the_sentences_together(bio: TextTagger) -> None:
    spans = [[(5, 15, "PERSON")]]  # "said. Mara"
    (joined,) = bio.annotate([TWO], spans=spans, marginals=True)
    (whole,) = bio.annotate([TWO], spans=spans, split="none", marginals=True)
    assert joined.tags == whole.tags and joined.marginals == whole.marginals
    pin = Span("PERSON", 1, 2)
    brute = Brute(bio, ["aiko", "said", "mara", "left"], [pin])
    assert joined.tags == brute.best()
    assert [(e.text, e.probability) for e in joined.entities if e.token_start == 1] == [
        ("said. Mara", 1.0)
    ]


LONG = " ".join(f"Solenne Power guided {w} growth said Mara Voss" for w in "abcdefgh")


def test_windows_keep_every_pin_whole_and_each_window_its_slice(bio: TextTagger) -> None:
    assert bio.tokenizer is not None
    toks = bio.tokenizer.tokenize(LONG)
    wins = windows(len(toks), 12, 4)
    assert len(wins) > 3
    # A pin across each window start (the first token of window i+1 inside it).
    pins = []
    for w in wins[1:]:
        a, b = toks[w.start - 1], toks[w.start + 1]
        pins.append((a.start, b.end, "ORG"))
    (cut,) = bio.annotate([LONG], split="none", max_length=12, overlap=4, spans=[pins])
    assert is_valid(cut.tags, "BIO")
    by_start = {e.start: e for e in cut.entities}
    for start, end, label in pins:
        e = by_start[start]
        assert (e.end, e.label, e.probability) == (end, label, 1.0)
    # Each window's constraint is the text's, sliced; at a cut pin the window may open it.
    tc = text_constraint(LONG, toks, bio.labels, "BIO", pins)
    assert tc is not None
    for w in wins:
        c = tc.chain(w)
        inner = slice(1, len(w) - 1)
        assert torch.equal(c.allowed[inner], tc.allowed[w.start + 1 : w.stop - 1])
    c = tc.chain(wins[1])  # its first token is a pin's second
    assert [bio.labels[k] for k in c.allowed[0].nonzero()[:, 0]] == ["B-ORG", "I-ORG"]
    assert [bio.labels[k] for k in tc.allowed[wins[1].start].nonzero()[:, 0]] == ["I-ORG"]


def test_a_pin_covering_a_whole_overlap_is_refused(bio: TextTagger) -> None:
    assert bio.tokenizer is not None
    toks = bio.tokenizer.tokenize(LONG)
    wins = windows(len(toks), 8, 2)
    a, b = toks[wins[1].start - 1], toks[wins[0].stop]
    with pytest.raises(
        ValueError, match=r"texts\[0\]: the pinned span\(s\) tokens .* cover the whole overlap"
    ):
        bio.annotate(
            [LONG], split="none", max_length=8, overlap=2, spans=[[(a.start, b.end, "ORG")]]
        )


# ------------------------------------------------------------------------------ unchanged
def test_no_spans_or_forbid_is_the_unconstrained_tagger(bio: TextTagger) -> None:
    words = tokens_of(bio, TEXT)
    plain = bio.annotate([TEXT, TWO], marginals=True, k=3)
    for kw in ({"spans": [[], None]}, {"forbid": []}, {"spans": [None, []], "forbid": [[], None]}):
        again = bio.annotate([TEXT, TWO], marginals=True, k=3, **kw)  # type: ignore[arg-type]
        assert [t.to_dict() for t in again] == [t.to_dict() for t in plain]
    check_against(bio, TEXT, Brute(bio, words), [])
    assert bio.tag(TEXT, spans=[], forbid=[]) == bio.tag(TEXT)


def test_several_texts_and_streams_take_one_list_per_text(bio: TextTagger) -> None:
    texts = [TEXT, TWO, "Mara"]
    spans = [[(0, 4, "ORG")], None, [(0, 4, "PERSON")]]
    one_by_one = [
        bio.tag(t, spans=s or [], forbid=["O"]) for t, s in zip(texts, spans, strict=True)
    ]
    assert bio.tag(texts, spans=spans, forbid=["O"]) == one_by_one
    assert list(bio.iter_tag(iter(texts), spans=iter(spans), forbid=["O"], batch_size=1)) == (
        one_by_one
    )
    per_text = [["O"], ["O"], ["O"]]
    assert bio.tag(texts, spans=spans, forbid=per_text) == one_by_one
    assert [e.label for e in one_by_one[2]] == ["PERSON"]


# ------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("spans", "forbid", "message"),
    [
        ([(0, 3, "ORG")], None, r"span \(0, 3, 'ORG'\) of texts\[0\] cuts token 0 'aiko'"),
        ([(6, 14, "ORG")], None, r"cuts token 1 'voss'"),
        ([(0, 90, "ORG")], None, r"offsets outside the text or empty; need 0 <= start < end <= 19"),
        ([(-1, 4, "ORG")], None, r"offsets outside the text"),
        ([(4, 4, "ORG")], None, r"offsets outside the text or empty"),
        ([(4, 5, "ORG")], None, r"span \(4, 5, 'ORG'\) of texts\[0\] \(' '\) holds no token"),
        ([(0, 9, "ORG"), (5, 14, "PERSON")], None, r"overlap \(they share a token\)"),
        (
            [(0, 4, "LOC")],
            None,
            r"'LOC' is not an entity type of the model \(\['ORG', 'PERSON'\]\)",
        ),
        ([(0, 4, "B-ORG")], None, r"give the type 'ORG', not a label"),
        ([(0, 4)], None, r"expected \(start, end, label\)"),
        (None, ["LOC"], r"forbid 'LOC' of texts\[0\]: 'LOC' is neither a label"),
        (None, [(0, 50, "ORG")], r"forbid \(0, 50, 'ORG'\) of texts\[0\]: offsets outside"),
        ([(0, 4, "ORG")], ["ORG"], r"leave token 0 'aiko' at \[0, 4\) no label"),
    ],
)
def test_invalid_spans_and_forbids_are_refused_naming_them(
    bio: TextTagger, spans: object, forbid: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        bio.tag(TEXT, spans=spans, forbid=forbid)  # type: ignore[arg-type]


def test_errors_name_the_text_among_several(bio: TextTagger) -> None:
    with pytest.raises(ValueError, match=r"of texts\[1\] cuts token"):
        bio.tag([TEXT, TEXT], spans=[[], [(1, 4, "ORG")]])


def test_constraints_with_no_valid_path_name_the_text(vocabs: dict[str, object]) -> None:
    tagger = make_tagger(vocabs, "BIOES")
    only_inside = ["O", "B-ORG", "E-ORG", "S-ORG", "PERSON"]  # I-ORG alone cannot end a path
    with pytest.raises(
        ValueError, match=r"of texts\[1\] \(tokens 0\.\.0\): the allowed labels leave no valid tag"
    ):
        tagger.tag(["Aiko said", "Mara"], forbid=[[], only_inside])


def test_io_cannot_pin_adjacent_spans_of_one_type(vocabs: dict[str, object]) -> None:
    tagger = make_tagger(vocabs, "IO")
    with pytest.raises(ValueError, match=r"adjacent and of one type 'ORG': the IO scheme cannot"):
        tagger.tag(TEXT, spans=[(0, 4, "ORG"), (5, 9, "ORG")])
    assert [e.text for e in tagger.tag(TEXT, spans=[(0, 4, "ORG"), (5, 9, "PERSON")])][:2] == [
        "Aiko",
        "Voss",
    ]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"spans": [[], []]}, r"spans= ran out at texts\[2\] \(it has 2 entries\)"),
        (
            {"spans": [(0, 4, "ORG"), [], []]},
            r"spans\[0\] is \(0, 4, 'ORG'\): give each text's spans as a list",
        ),
        ({"spans": "ORG"}, r"spans= is a str"),
        ({"forbid": [[], ["O"]]}, r"forbid= ran out at texts\[2\]"),
        ({"forbid": [(0, 4, "ORG")]}, r"forbid\[0\] is \(0, 4, 'ORG'\)"),
        ({"spans": [[]], "group": True}, r"spans=/forbid= with group=True"),
    ],
)
def test_per_text_arguments_are_checked(
    bio: TextTagger, kw: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        bio.tag([TEXT, TEXT, TEXT], **kw)  # type: ignore[arg-type]


def test_a_list_of_texts_with_another_number_of_lists_is_refused_at_once(bio: TextTagger) -> None:
    with pytest.raises(ValueError, match=r"spans= has 2 entries for 3 texts"):
        bio.annotate([TEXT, TEXT, TEXT], spans=[[], []])
    with pytest.raises(ValueError, match=r"forbid= has 4 entries for 3 texts"):
        bio.annotate([TEXT, TEXT, TEXT], forbid=[[], [], [], ["O"]])


def test_a_stream_with_too_few_or_too_many_span_lists_is_refused(bio: TextTagger) -> None:
    with pytest.raises(ValueError, match=r"spans= ran out at texts\[1\]"):
        list(bio.iter_tag(iter([TEXT, TEXT]), spans=iter([[]])))
    with pytest.raises(ValueError, match=r"spans= has more entries than the 1 texts"):
        list(bio.iter_tag(iter([TEXT]), spans=iter([[], []])))


# ------------------------------------------------------------------------------ other routes
def test_span_probabilities_take_allowed(bio: TextTagger) -> None:
    """``evaluation.spans.span_probabilities(..., allowed=)``: the enumeration under the sets."""
    assert bio.tokenizer is not None
    toks = bio.tokenizer.tokenize(TEXT)
    tc = text_constraint(TEXT, toks, bio.labels, "BIO", [(5, 9, "PERSON")], [(15, 19, "O")])
    assert tc is not None
    words = [t.text for t in toks]
    batch = bio.collate([Sentence(words)])
    with torch.inference_mode():
        emissions = bio.model(batch)
    brute = Brute(bio, words, [Span("PERSON", 1, 1)], tc.base)
    spans = [Span("PERSON", 1, 1), Span("ORG", 2, 3), Span("PERSON", 3, 3), Span("ORG", 0, 0)]
    (got,) = span_probabilities(
        bio.model.head, emissions, batch.mask, [spans], bio.labels, "BIO", allowed=tc.allowed[None]
    )
    assert got == pytest.approx([brute.span_probability(s) for s in spans], abs=1e-9)
    assert got[0] == pytest.approx(1.0, abs=1e-12)


def test_long_chains_give_the_short_routes_probabilities_under_pins(
    vocabs: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past :data:`CLAMPED_UP_TO` words the span probabilities come from one forward-backward of
    the restricted chain (IOB1: with per-position transitions): the same as whole clamped chains."""
    tagger = make_tagger(vocabs, "IOB1", seed=2)
    text = LONG + " " + LONG[:40]
    assert tagger.tokenizer is not None
    toks = tagger.tokenizer.tokenize(text)
    assert len(toks) > spans_module.CLAMPED_UP_TO
    pins = [(toks[i].start, toks[i + 1].end, "ORG") for i in (3, 30, 61)]
    kw = {"split": "none", "max_length": 200, "spans": [pins], "forbid": [["B-PERSON"]]}
    (long_route,) = tagger.annotate([text], **kw)  # type: ignore[arg-type]
    monkeypatch.setattr(spans_module, "CLAMPED_UP_TO", 10_000)
    (short_route,) = tagger.annotate([text], **kw)  # type: ignore[arg-type]
    assert long_route.tags == short_route.tags
    assert [e.probability for e in long_route.entities] == pytest.approx(
        [e.probability for e in short_route.entities], abs=2e-6
    )
    assert sum(e.probability == 1.0 for e in long_route.entities) >= 3


@pytest.mark.parametrize("head", ["MEMM", "StructuredPerceptron", "HMM"])
def test_other_heads_decode_with_pins(vocabs: dict[str, object], head: str) -> None:
    """The MEMM, the perceptron and the HMM decode under the constraint (their Viterbi over the
    restricted chain): the pinned span is there, whole, and the tags are valid."""
    v = copy.deepcopy(vocabs)
    v["labels"] = {"labels": labels_for(TYPES, "BIO"), "scheme": "BIO"}
    torch.manual_seed(0)
    model = Tagger.build(v, head={"class_path": f"crfhead.heads.{head}"})  # type: ignore[arg-type]
    tagger = TextTagger(model, v, {})
    words = tokens_of(tagger, TEXT)
    (t,) = tagger.annotate([TEXT], spans=[[(5, 14, "PERSON")]], forbid=[["ORG"]])
    assert Span("PERSON", 1, 2) in tags_to_spans(t.tags, "BIO")
    assert is_valid(t.tags, "BIO") and not any("ORG" in tag for tag in t.tags)
    calibrated = tagger.model.head.calibrated
    pinned = [e.probability for e in t.entities if e.token_start == 1]
    assert pinned == [1.0 if calibrated else None]
    assert len(t.tags) == len(words)
