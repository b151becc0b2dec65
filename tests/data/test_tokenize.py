"""The finance rule's tokenizer against its definition: maximal ASCII letter runs, lowercased, raw offsets.

The tokenizer matches the lowered text when it is ASCII (one ``lower`` per text); these tests hold it
to the per-token definition on random texts, ASCII or not (a Kelvin sign lowers to ``k``, which the
rule must not take as a letter), and check the tokens' tuple form.
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from crfhead.data.tokenize import LetterTokenizer, Token

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
