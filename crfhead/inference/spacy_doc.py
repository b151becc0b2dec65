"""Tagged text for spaCy: :func:`to_spacy` (a ``Doc``) and :func:`to_displacy` (no spaCy needed).

:func:`to_displacy` gives displaCy's manual input (``displacy.render(..., manual=True)``).

:func:`to_spacy` builds the ``Doc`` from the :class:`~crfhead.inference.entities.Tagged` text's own
tokens, so ``doc.text == tagged.text`` exactly: spaCy holds a text as words, each followed by one
space or none, so the rest of the text becomes tokens too. A single space after a word is its
trailing space; other whitespace (runs of spaces, newlines, leading whitespace) becomes whitespace
tokens, as spaCy's own tokenizer makes; characters the model's tokenizer skipped (the finance
tokenizer keeps letters only) become tokens of their own, outside the tags. ``doc.ents`` are the
entities (the same character spans and labels).

What spaCy has no place for is kept in ``doc.user_data["crfhead"]``, plain data that
``Doc.to_bytes`` and ``DocBin`` keep (no extension to register, so nothing global changes):

* ``"probabilities"``: each entity's exact probability (``None`` for a head that is not a
  probability model), in the order of ``doc.ents``;
* ``"tags"``: one tag per ``Doc`` token, ``None`` for the tokens the model did not tag;
* ``"certified"``: :attr:`Tagged.certified`.

spaCy is imported on use (``pip install spacy``; ``spacy.blank("en")`` needs no model download).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from crfhead.inference.entities import Tagged

__all__ = ["USER_DATA_KEY", "to_displacy", "to_spacy"]

USER_DATA_KEY = "crfhead"
"""The ``doc.user_data`` key of what :func:`to_spacy` keeps beyond spaCy's own fields."""

_PIECES = re.compile(r"\s+|\S+")


def to_displacy(tagged: Tagged, title: str | None = None) -> dict[str, Any]:
    """The dict ``displacy.render(..., manual=True, style="ent")`` takes: text, entities, title.

    Returns:
        ``{"text": ..., "ents": [{"start", "end", "label"}, ...], "title": title}``, character
        offsets into the text.
    """
    return {
        "text": tagged.text,
        "ents": [{"start": e.start, "end": e.end, "label": e.label} for e in tagged.entities],
        "title": title,
    }


def _words(tagged: Tagged) -> tuple[list[str], list[bool], list[int], list[str | None]]:
    """The ``words`` and ``spaces`` of a ``Doc`` covering the whole text, and more.

    Also each tagged token's word index and every word's tag (``None`` between tagged tokens).
    """
    words: list[str] = []
    spaces: list[bool] = []
    tags: list[str | None] = []
    index: list[int] = []

    def gap(text: str) -> None:
        for piece in _PIECES.findall(text):
            if not piece.isspace():
                words.append(piece)
                spaces.append(False)
                tags.append(None)
                continue
            if words and not spaces[-1] and not words[-1].isspace() and piece[0] == " ":
                spaces[-1] = True  # one space after a word is its trailing space
                piece = piece[1:]
            if piece:
                words.append(piece)
                spaces.append(False)
                tags.append(None)

    pos = 0
    for token, tag in zip(tagged.tokens, tagged.tags, strict=True):
        if token.start < pos or token.end < token.start or token.end > len(tagged.text):
            raise ValueError(
                f"token {token.text!r} at [{token.start}, {token.end}) does not follow the one "
                f"before (ending at {pos}) in a text of {len(tagged.text)} characters"
            )
        gap(tagged.text[pos : token.start])
        index.append(len(words))
        words.append(tagged.text[token.start : token.end])
        spaces.append(False)
        tags.append(tag)
        pos = token.end
    gap(tagged.text[pos:])
    return words, spaces, index, tags


def to_spacy(tagged: Tagged, nlp_or_vocab: Any) -> Any:
    """A ``spacy.tokens.Doc`` of the tagged text, its entities as ``doc.ents`` (see the module).

    Args:
        tagged: a text tagged by :meth:`TextTagger.annotate <crfhead.inference.TextTagger.annotate>`.
        nlp_or_vocab: a spaCy ``Language`` (``spacy.blank("en")``) or its ``Vocab``.

    Returns:
        The ``Doc``: ``doc.text == tagged.text``; ``doc.ents`` the entities, same character spans
        and labels; ``doc.user_data["crfhead"]`` the probabilities, tags and ``certified``.

    Raises:
        TypeError: ``nlp_or_vocab`` is neither a ``Language`` nor a ``Vocab``.
        ValueError: tokens that overlap or lie outside the text.
    """
    spacy_tokens = importlib.import_module("spacy.tokens")
    vocab = getattr(nlp_or_vocab, "vocab", nlp_or_vocab)
    if not hasattr(vocab, "strings"):
        raise TypeError(
            f"to_spacy takes a spaCy Language or Vocab, got {type(nlp_or_vocab).__name__}"
        )
    words, spaces, index, tags = _words(tagged)
    doc = spacy_tokens.Doc(vocab, words=words, spaces=spaces)
    doc.ents = [
        spacy_tokens.Span(doc, index[e.token_start], index[e.token_end - 1] + 1, label=e.label)
        for e in tagged.entities
    ]
    doc.user_data[USER_DATA_KEY] = {
        "probabilities": [e.probability for e in tagged.entities],
        "tags": tags,
        "certified": tagged.certified,
    }
    return doc
