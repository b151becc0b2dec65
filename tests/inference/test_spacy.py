"""spaCy and displaCy: the displaCy dict (no spaCy needed) exactly, and the ``Doc`` of a tagged text
checked against the text itself on hand-picked and seeded random texts (``doc.text == text``, every
entity's character span and label, every tagged token at its offsets, the probabilities and tags in
``user_data``, kept by ``to_bytes``), plus its errors."""

from __future__ import annotations

import random
from typing import Any

import pytest

from crfhead.data.tokenize import LetterTokenizer, RegexTokenizer, Token, Tokenizer
from crfhead.inference.entities import Tagged, entities_of
from crfhead.inference.spacy_doc import USER_DATA_KEY, to_displacy, to_spacy
from crfhead.schemes import Span

__all__: list[str] = []


def _tagged(
    text: str, tokenizer: Tokenizer, spans: list[Span], probs: list[float] | None = None
) -> Tagged:
    tokens = tokenizer.tokenize(text)
    tags = ["O"] * len(tokens)
    for span in spans:
        tags[span.start] = f"B-{span.label}"
        for i in range(span.start + 1, span.end + 1):
            tags[i] = f"I-{span.label}"
    return Tagged(text, tokens, tags, entities_of(text, tokens, spans, probs))


SAID = _tagged(
    "Ada Lovelace met Acme Corp. in London.",
    RegexTokenizer("words"),
    [Span("PER", 0, 1), Span("ORG", 3, 4), Span("LOC", 7, 7)],
    [0.9, 0.75, 0.5],
)


def test_displacy_dict_exactly() -> None:
    assert to_displacy(SAID, title="news") == {
        "text": "Ada Lovelace met Acme Corp. in London.",
        "ents": [
            {"start": 0, "end": 12, "label": "PER"},
            {"start": 17, "end": 26, "label": "ORG"},
            {"start": 31, "end": 37, "label": "LOC"},
        ],
        "title": "news",
    }
    assert to_displacy(Tagged("", [], [], []))["ents"] == []


def test_displacy_renders_the_dict() -> None:
    displacy = pytest.importorskip("spacy.displacy")
    html = displacy.render(to_displacy(SAID), style="ent", manual=True, page=False, jupyter=False)
    assert "Ada Lovelace" in html and "ORG" in html and "London" in html


# The Doc -----------------------------------------------------------------------------------------


def _check(doc: Any, tagged: Tagged) -> None:
    """The Doc says what the tagged text says: text, entities, tokens at their offsets, user data."""
    assert doc.text == tagged.text
    assert [(e.start_char, e.end_char, e.label_, e.text) for e in doc.ents] == [
        (e.start, e.end, e.label, e.text) for e in tagged.entities
    ]
    by_start = {t.idx: t for t in doc}
    data = doc.user_data[USER_DATA_KEY]
    assert len(data["tags"]) == len(doc)
    for token, tag in zip(tagged.tokens, tagged.tags, strict=True):
        spacy_token = by_start[token.start]
        assert spacy_token.text == tagged.text[token.start : token.end]
        assert data["tags"][spacy_token.i] == tag
    assert sum(t is not None for t in data["tags"]) == len(tagged.tokens)
    assert data["probabilities"] == [e.probability for e in tagged.entities]
    assert data["certified"] == tagged.certified


@pytest.fixture(scope="module")
def nlp() -> Any:
    spacy = pytest.importorskip("spacy")
    return spacy.blank("en")


def test_doc_of_a_tagged_sentence(nlp: Any) -> None:
    doc = to_spacy(SAID, nlp)
    _check(doc, SAID)
    assert [t.text for t in doc] == [
        "Ada",
        "Lovelace",
        "met",
        "Acme",
        "Corp",
        ".",
        "in",
        "London",
        ".",
    ]
    assert [t.whitespace_ for t in doc] == [" ", " ", " ", " ", "", " ", " ", "", ""]
    assert [t.ent_iob_ for t in doc] == ["B", "I", "O", "B", "I", "O", "O", "B", "O"]
    assert doc.user_data["crfhead"]["probabilities"] == [0.9, 0.75, 0.5]


def test_doc_keeps_whitespace_and_skipped_characters(nlp: Any) -> None:
    text = "  In march 2025,\n\nsolenne  power\tgrew 4%  "
    tagged = _tagged(text, LetterTokenizer(), [Span("DATE", 1, 1), Span("ORG", 2, 3)], [0.8, 0.6])
    doc = to_spacy(tagged, nlp.vocab)  # a Vocab works as well as the Language
    _check(doc, tagged)
    assert [t.text for t in doc] == [
        "  ",
        "In",
        "march",
        "2025,",
        "\n\n",
        "solenne",
        " ",
        "power",
        "\t",
        "grew",
        "4%",
        " ",
    ]
    assert doc.user_data["crfhead"]["tags"][:4] == [None, "O", "B-DATE", None]
    assert [e.text for e in doc.ents] == ["march", "solenne  power"]


def test_doc_of_random_texts_matches_the_text(nlp: Any) -> None:
    rng = random.Random(28)
    alphabet = ["a", "b", "Z", " ", " ", "  ", "\n", "\t", ",", ".", "7", "é", "-"]
    for case in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        tokenizer = rng.choice(
            [RegexTokenizer("words"), LetterTokenizer(), RegexTokenizer("whitespace")]
        )
        n = len(tokenizer.tokenize(text))
        spans, i = [], 0
        while i < n:
            if rng.random() < 0.4:
                end = min(n - 1, i + rng.randint(0, 2))
                spans.append(Span(rng.choice(["X", "Y"]), i, end))
                i = end + 1
            i += 1
        probs = None if case % 3 == 0 else [rng.random() for _ in spans]
        tagged = _tagged(text, tokenizer, spans, probs)
        _check(to_spacy(tagged, nlp), tagged)


def test_user_data_survives_to_bytes(nlp: Any) -> None:
    from spacy.tokens import Doc

    doc = to_spacy(SAID, nlp)
    back = Doc(nlp.vocab).from_bytes(doc.to_bytes())
    assert back.text == SAID.text and [e.label_ for e in back.ents] == ["PER", "ORG", "LOC"]
    assert back.user_data["crfhead"] == doc.user_data["crfhead"]


def test_certified_travels(nlp: Any) -> None:
    tagged = Tagged(SAID.text, SAID.tokens, SAID.tags, SAID.entities, certified=True)
    assert to_spacy(tagged, nlp).user_data["crfhead"]["certified"] is True


def test_error_not_a_vocab(nlp: Any) -> None:
    with pytest.raises(TypeError, match="to_spacy takes a spaCy Language or Vocab, got str"):
        to_spacy(SAID, "en")


def test_error_overlapping_tokens(nlp: Any) -> None:
    tokens = [Token("ab", 0, 2), Token("b", 1, 2)]
    bad = Tagged("ab", tokens, ["O", "O"], [])
    with pytest.raises(
        ValueError, match=r"token 'b' at \[1, 2\) does not follow the one before \(ending at 2\)"
    ):
        to_spacy(bad, nlp)
