"""Tokenizers that turn raw text into a corpus's tokens, keeping each token's character offsets.

A model is only as good as its input looks like its training data, so the rule a corpus was tokenized
with travels with every model trained on it (in the vocabularies, hence in every checkpoint and saved
model) and is applied to raw text at tagging time:

* :class:`LetterTokenizer`: the synthetic finance corpus's rule (maximal runs of ASCII letters,
  lowercased; digits, punctuation and symbols dropped: ``"$12.4 million"`` → ``["million"]``);
* :class:`RegexTokenizer` with a named rule: ``"words"`` (CoNLL-2003 style: words, numbers with their
  inner ``.``/``,``, hyphenated words and clitics kept whole, each punctuation mark its own token),
  ``"tweets"`` (WNUT 2017 / #MSM2013 style: URLs, ``@user``, ``#tag`` and emoticons kept whole, then
  the ``"words"`` rule) or ``"whitespace"``.

A token's ``text`` is the corpus's form of it (lowercased for the finance rule) and ``start``/``end``
index the raw text (``raw[start:end]`` is the token before lowercasing). Tokenizers serialise to a
small dict (:meth:`Tokenizer.to_dict`, :func:`tokenizer_from_dict`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import accumulate, repeat
from typing import Any, ClassVar, NamedTuple

__all__ = [
    "RULES",
    "LetterTokenizer",
    "RegexTokenizer",
    "Token",
    "Tokenizer",
    "tokenizer_from_dict",
]


class Token(NamedTuple):
    """One token: its corpus form and its character span ``[start, end)`` in the raw text.

    Immutable, compared by value; a named tuple because a tokenizer makes one per token of every text
    tagged, and a tuple is built in less than half a frozen dataclass's time.
    """

    text: str
    start: int
    end: int


def _matches(pattern: re.Pattern[str], text: str, lower: bool) -> list[Token]:
    """The successive matches of ``pattern`` (one capturing group around the whole rule) in ``text``.

    ``pattern.split`` gives the gaps and the matches alternately, so the offsets are running sums of
    their lengths and each token is built as a tuple (``tuple.__new__``): no Python frame per token,
    several times faster than a ``finditer`` loop on short sentences. ``lower`` lowercases each match
    (its offsets are the raw text's).
    """
    parts = pattern.split(text)  # [gap, match, gap, match, ..., gap]
    ends = list(accumulate(map(len, parts)))
    words = parts[1::2]
    if lower:
        words = [w.lower() for w in words]
    return list(map(tuple.__new__, repeat(Token), zip(words, ends[:-1:2], ends[1::2], strict=True)))


class Tokenizer:
    """Raw text → tokens with offsets (subclasses set :attr:`kind` and implement :meth:`tokenize`)."""

    kind: ClassVar[str] = ""

    def tokenize(self, text: str) -> list[Token]:
        """The tokens of ``text``, in order, with their offsets into ``text``."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able description that :func:`tokenizer_from_dict` turns back into this tokenizer."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tokenizer) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.to_dict().items())))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items() if k != "kind")
        return f"{type(self).__name__}({args})"


class LetterTokenizer(Tokenizer):
    """Maximal runs of ASCII letters, lowercased (the synthetic finance corpus's rule).

    Args:
        lowercase: lowercase each token (the offsets are those of the raw letters either way).
    """

    kind = "letters"
    _PATTERN = re.compile(r"([A-Za-z]+)")

    def __init__(self, lowercase: bool = True) -> None:
        self.lowercase = lowercase

    def tokenize(self, text: str) -> list[Token]:  # noqa: D102
        if self.lowercase and text.isascii():
            # Lowercasing ASCII keeps every offset and letter, so the lowered text is matched once
            # (not each token lowered). Outside ASCII a character may lower into the pattern (the
            # Kelvin sign into "k") or change length, so each raw match is lowered instead.
            return _matches(self._PATTERN, text.lower(), lower=False)
        return _matches(self._PATTERN, text, lower=self.lowercase)

    def to_dict(self) -> dict[str, Any]:  # noqa: D102
        return {"kind": self.kind, "lowercase": self.lowercase}


_WORD = (
    r"\d+(?:[.,:/]\d+)*%?"  # 12, 12.4, 1,200, 10:30, 3/4, 4%
    r"|(?:[^\W\d_]\.){2,}"  # U.S., U.K.
    r"|[^\W_]+(?:[-'\u2019][^\W_]+)*"  # words, hyphenated words, clitics (o'neill, don't)
    r"|\S"  # anything else: one punctuation mark or symbol per token
)
_TWEET = (
    r"https?://\S+|www\.\S+"  # URLs
    r"|[@#][\w_]+"  # mentions and hashtags
    r"|[:;=8][\-o*']?[)\](\[dDpP/\\|]"  # emoticons :) ;-) :D
    rf"|{_WORD}"
)
RULES: dict[str, str] = {"words": _WORD, "tweets": _TWEET, "whitespace": r"\S+"}
"""The named rules of :class:`RegexTokenizer`, as regular expressions matched left to right."""


class RegexTokenizer(Tokenizer):
    """Tokens are the successive matches of a regular expression (a named rule of :data:`RULES`).

    Args:
        rule: ``"words"``, ``"tweets"`` or ``"whitespace"``.
        lowercase: lowercase each token (for a corpus whose vocabulary is lowercased).

    Raises:
        ValueError: an unknown rule.
    """

    kind = "regex"

    def __init__(self, rule: str = "words", lowercase: bool = False) -> None:
        if rule not in RULES:
            raise ValueError(f"unknown tokenizer rule {rule!r}; choose one of {sorted(RULES)}")
        self.rule, self.lowercase = rule, lowercase
        self._pattern = re.compile(f"({RULES[rule]})")  # the rules' own groups do not capture

    def tokenize(self, text: str) -> list[Token]:  # noqa: D102
        return _matches(self._pattern, text, lower=self.lowercase)

    def to_dict(self) -> dict[str, Any]:  # noqa: D102
        return {"kind": self.kind, "rule": self.rule, "lowercase": self.lowercase}


_KINDS: dict[str, type[Tokenizer]] = {"letters": LetterTokenizer, "regex": RegexTokenizer}


def tokenizer_from_dict(spec: Mapping[str, Any]) -> Tokenizer:
    """The tokenizer :meth:`Tokenizer.to_dict` described.

    Raises:
        ValueError: an unknown kind or argument, naming it.
    """
    args = dict(spec)
    kind = args.pop("kind", None)
    cls = _KINDS.get(str(kind))
    if cls is None:
        raise ValueError(f"unknown tokenizer kind {kind!r}; known: {sorted(_KINDS)}")
    try:
        return cls(**args)
    except TypeError as err:
        raise ValueError(f"bad arguments {args} for the {kind!r} tokenizer: {err}") from None
