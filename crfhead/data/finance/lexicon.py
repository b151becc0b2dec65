"""The word lists of the synthetic finance corpus, read from ``lexicon.json`` next to this file.

Word lists are data, not code: names, places, product nouns, sectors, the syllables of generated
names and the filler words of the templates live in ``lexicon.json`` (shipped as package data) and
are read once, on first use, into a frozen :class:`Lexicon` of tuples. The generator draws words by
position, so the order of every list is part of the corpus: editing the file changes every run.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from importlib import resources
from types import MappingProxyType
from typing import Any

__all__ = ["Lexicon", "lexicon"]

_RESOURCE = "lexicon.json"


@dataclass(frozen=True)
class Lexicon:
    """The word lists, each a tuple in file order (entries may be several words).

    Attributes:
        brand_words: curated brand words (``kestrel``); most brands are generated instead.
        org_suffixes: what follows a company's brand, place or surname (``power``,
            ``data systems``).
        bank_suffixes: what follows a bank's brand (``securities``, ``equity research``).
        corp_endings: legal endings of a company name (``inc``, ``plc``).
        first_names: curated first names.
        last_names: curated surnames; most surnames are generated instead.
        places: curated countries, regions and cities (``north carolina``).
        town_forms: ``str.format`` patterns of a generated town around a generated word
            (``"port {}"``).
        product_nouns: product nouns (``turbine``, ``heat pump``).
        sectors: industry sectors (``cloud infrastructure``).
        onsets: first consonants of a generated word.
        vowels: its vowel.
        middles: its middle consonants.
        endings: its ending.
        filler: the filler words (tagged ``O``) of each lowercase template slot (``{metric}``).
        aside_connectives: the first word of an aside (``amid``), an ``O`` phrase that opens a
            sentence in profiles that have them (:class:`~crfhead.data.finance.profile.Profile`).
        aside_adjectives: its second word (``resilient``), drawn by Zipf rank: a long tail of
            open-class words outside every entity.
        aside_nouns: its third word (``freight``), drawn the same way.
    """

    brand_words: tuple[str, ...]
    org_suffixes: tuple[str, ...]
    bank_suffixes: tuple[str, ...]
    corp_endings: tuple[str, ...]
    first_names: tuple[str, ...]
    last_names: tuple[str, ...]
    places: tuple[str, ...]
    town_forms: tuple[str, ...]
    product_nouns: tuple[str, ...]
    sectors: tuple[str, ...]
    onsets: tuple[str, ...]
    vowels: tuple[str, ...]
    middles: tuple[str, ...]
    endings: tuple[str, ...]
    filler: Mapping[str, tuple[str, ...]]
    aside_connectives: tuple[str, ...]
    aside_adjectives: tuple[str, ...]
    aside_nouns: tuple[str, ...]


def _words(key: str, value: Any) -> tuple[str, ...]:
    """``value`` as a tuple of words, or ``ValueError`` naming ``key`` if it is not a word list."""
    if not isinstance(value, list) or not value or not all(isinstance(w, str) and w for w in value):
        raise ValueError(f"{_RESOURCE}: {key!r} must be a non-empty list of non-empty strings")
    return tuple(value)


def _parse(raw: Mapping[str, Any]) -> Lexicon:
    """The :class:`Lexicon` of the decoded JSON object ``raw`` (its ``"about"`` text is skipped)."""
    names = [f.name for f in fields(Lexicon)]
    missing = sorted(set(names) - set(raw))
    unknown = sorted(set(raw) - set(names) - {"about"})
    if missing or unknown:
        raise ValueError(f"{_RESOURCE}: missing lists {missing}, unknown lists {unknown}")
    filler = raw["filler"]
    if not isinstance(filler, dict):
        raise ValueError(f"{_RESOURCE}: 'filler' must map slot names to word lists")
    lists = {name: _words(name, raw[name]) for name in names if name != "filler"}
    slots = MappingProxyType({slot: _words(f"filler.{slot}", w) for slot, w in filler.items()})
    return Lexicon(**lists, filler=slots)


@functools.cache
def lexicon() -> Lexicon:
    """The word lists of the corpus, read from the package's ``lexicon.json`` on the first call.

    Returns:
        The same :class:`Lexicon` on every call.

    Raises:
        ValueError: the file lacks a list, has an unknown one, or a list is not non-empty strings.
    """
    package = __name__.rpartition(".")[0]
    text = resources.files(package).joinpath(_RESOURCE).read_text(encoding="utf-8")
    return _parse(json.loads(text))
