"""The tokenizers against their definitions: the finance rule's maximal ASCII letter runs (lowercased,
raw offsets) and each named regex rule's successive matches.

The tokenizers split the text once (gaps and matches alternately) and build the tokens as tuples; the
finance rule matches the lowered text when it is ASCII. These tests hold them to the per-match
``finditer`` definition on random texts, ASCII or not (a Kelvin sign lowers to ``k``, which the rule
must not take as a letter; a dotted capital I lowers to two characters), and check the tokens' type
and tuple form.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crfhead.data.tokenize import RULES, LetterTokenizer, RegexTokenizer, Token

_LETTERS = re.compile(r"[A-Za-z]+")
_ALPHABET = "aZq Mx.,$-1\u212a\u0130\u00e9\u00df\t"


def _definition(text: str, lowercase: bool) -> list[Token]:
    return [
        Token(m.group().lower() if lowercase else m.group(), m.start(), m.end())
        for m in _LETTERS.finditer(text)
    ]


@given(st.text(alphabet=_ALPHABET, max_size=40), st.booleans())
def test_letter_tokenizer_is_its_definition_on_any_text(text: str, lowercase: bool) -> None:
    assert LetterTokenizer(lowercase).tokenize(text) == _definition(text, lowercase)


def test_letters_next_to_a_kelvin_sign_and_a_dotted_capital_i() -> None:
    text = "Temp 5\u212a \u0130stanbul ABC"  # the Kelvin sign and İ are not ASCII letters
    tokens = LetterTokenizer().tokenize(text)
    assert tokens == [Token("temp", 0, 4), Token("stanbul", 9, 16), Token("abc", 17, 20)]
    assert all(text[t.start : t.end].lower() == t.text for t in tokens)


def test_a_token_is_an_immutable_record_with_named_fields() -> None:
    token = LetterTokenizer().tokenize("Aiko")[0]
    assert (token.text, token.start, token.end) == ("aiko", 0, 4)
    assert token == Token("aiko", 0, 4) and hash(token) == hash(Token("aiko", 0, 4))


_RULE_ALPHABET = "aZ1 .,:/%@#-'\u2019_:;)(DpP\t\u0130\u00df\u212a\U0001f600htps"


@pytest.mark.parametrize("rule", sorted(RULES))
@given(text=st.text(alphabet=_RULE_ALPHABET, max_size=50), lowercase=st.booleans())
@settings(max_examples=150, deadline=None)
def test_regex_rules_are_their_successive_matches(rule: str, text: str, lowercase: bool) -> None:
    want = [
        Token(m.group().lower() if lowercase else m.group(), m.start(), m.end())
        for m in re.finditer(RULES[rule], text)
    ]
    got = RegexTokenizer(rule, lowercase).tokenize(text)
    assert got == want
    assert all(type(t) is Token for t in got)


def test_regex_offsets_index_the_raw_text() -> None:
    text = "\u0130stanbul's U.S. office: 1,200 https://x.io/a?b :) #tag"
    tokens = RegexTokenizer("tweets", lowercase=True).tokenize(text)
    assert [t.text for t in tokens] == [
        "i\u0307stanbul's",
        "u.s.",
        "office",
        ":",
        "1,200",
        "https://x.io/a?b",
        ":)",
        "#tag",
    ]
    assert all(text[t.start : t.end].lower() == t.text for t in tokens)
    assert type(LetterTokenizer().tokenize("a b")[1]) is Token
