"""The document generator of the synthetic finance corpus: filings and earnings calls, in BIO.

Moved here from ``crfhead/data/finance.py`` (the corpus of the seed text's section "Tagging entities
in filings", *Sequence Labeling: From HMMs to Linear-Chain CRFs*). A document draws its company, people and
period, then fills the templates of :mod:`crfhead.data.finance.templates` with words of
:mod:`crfhead.data.finance.lexicon`; every entity is generated as a
:class:`~crfhead.schemes.Span` and encoded in BIO, which gives the 17 :data:`LABELS` over the 8
:data:`ENTITY_TYPES`.

* **Corpus runs.** A run is a seed. Document ``i`` of run ``seed`` draws only from its own
  ``random.Random(f"crfhead-finance:{seed}:{i}")``, so the same seed gives the same documents byte
  for byte on any machine, and the first ``n`` documents of a run do not depend on how many were
  asked for (``generate_documents(s, 30)[:3] == generate_documents(s, 3)``): "the first 3, 10 and
  30 documents of one run" are prefixes. The sequence of draws is the contract: a change that
  adds, removes or reorders a draw (or a word of the lexicon) changes every run.
* **Tokens.** Surface text is written with digits and punctuation (``"$12.4 million"``,
  ``"4.5 percent"``, ``"fiscal 2023"``) and then tokenised into lowercase letter-only tokens
  (:func:`tokenize`), so a money amount keeps ``million`` (or ``billion``, ``cents``, a currency
  word), a percentage keeps ``percent`` (or ``basis points``, ``percentage points``) and
  ``fiscal 2023`` keeps ``fiscal``. An entity whose tokens all vanish (``"$0.25"`` a share,
  ``"4%"``, ``"due 2031"``) yields no span; :attr:`FinanceDocument.dropped` counts those by type.
* **Phenomena.** ``the`` opens DATE (``the third quarter``, ``the fiscal year``) and PRODUCT
  (``the kestrel turbine``) spans and is ``O`` everywhere else (``the company``, ``the board``,
  ``the quarter``); it is never inside a span. ``million`` occurs only inside MONEY and
  ``percent`` only inside PERCENT. A company's brand is also its product line (ORG ``kestrel`` /
  PRODUCT ``the kestrel turbine``), and places occur inside company names (ORG
  ``north carolina power``, ``port tandis logistics``). Names come from curated lists and from a
  syllable generator (90,625 words, so tens of thousands of distinct company, person and place
  names), so unseen names are common: against 200 test documents of another run, about 0.38 of the
  test tokens are unseen after the first 3 documents of a run, 0.21 after 10 and 0.13 after 30
  (:func:`~crfhead.data.finance.stats.unseen_rates`; means over 12 pairs of runs, standard
  deviations 0.03, 0.01 and 0.005), the seed's regime (0.369 and 0.138). Every type has
  multi-token names (``solenne power``, ``marek novak``, ``north carolina``,
  ``the kestrel turbine``, ``cloud infrastructure``, ``the third quarter``, ``million euros``,
  ``basis points``).

Write a run with ``python scripts/make_finance_corpus.py --seed 0 --docs 30 --out DIR``.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from crfhead.data.finance.lexicon import lexicon
from crfhead.data.finance.profile import DEFAULT, Profile
from crfhead.data.finance.profile import profile as resolve_profile
from crfhead.data.finance.templates import TEMPLATES
from crfhead.data.sentence import Sentence
from crfhead.schemes import Span, labels_for, spans_to_tags

__all__ = [
    "ENTITY_TYPES",
    "LABELS",
    "FinanceDocument",
    "generate_corpus",
    "generate_documents",
    "generate_finance_documents",
    "tokenize",
]

ENTITY_TYPES: tuple[str, ...] = (
    "ORG",
    "PERSON",
    "GPE",
    "PRODUCT",
    "SECTOR",
    "DATE",
    "MONEY",
    "PERCENT",
)
"""The entity types, in label order."""

LABELS: tuple[str, ...] = tuple(labels_for(ENTITY_TYPES, "BIO"))
"""The 17 BIO labels: ``O``, then ``B-`` and ``I-`` of each type in :data:`ENTITY_TYPES` order."""

_TOKEN = re.compile(r"[a-z]+")
_SENTENCE_START = re.compile(r"(?:^|[.?!]\s+)\"?[a-z]")


def tokenize(text: str) -> list[str]:
    """The corpus tokens of ``text``: its maximal runs of ASCII letters, lowercased.

    Digits, punctuation and symbols are dropped: ``"$12.4 million"`` → ``["million"]``.
    """
    return _TOKEN.findall(text.lower())


_LEX = lexicon()

# Calendar words stay in code, not in the lexicon: their positions are quarter and month numbers.
_ORDINALS = ("first", "second", "third", "fourth")
_MONTHS = tuple(
    "january february march april may june july august september october november december".split()
)
_QUARTER_END = {1: ("march", 31), 2: ("june", 30), 3: ("september", 30), 4: ("december", 31)}

# The knobs every profile shares. Names from the syllable generator are the long tail that stays
# unseen however much training text there is (how often a name is generated is the profile's:
# crfhead.data.finance.profile); the templates filings and
# calls share set how fast the rest of the vocabulary is covered. Changing any of them changes every
# run.
_SENTENCES = (6, 15)  # sentences per document, inclusive
_P_VANISH = 0.03  # money / percent written so that no letter survives ("$450,120", "4%")
_P_CO_NAME = 0.8  # a sentence names the company where it could say "the company"
_P_QUOTE = 0.45  # a filing sentence quotes management (a call-body remark)
_P_CALL_FILING = 0.45  # a call sentence reads like a filing (the CFO reading the numbers)


@functools.cache
def _zipf_weights(n: int, exponent: float) -> tuple[float, ...]:
    """Cumulative Zipf weights of ``n`` ranked items: item ``r`` weighs ``1 / (r + 1) ** exponent``."""
    return tuple(itertools.accumulate(1.0 / (rank + 1) ** exponent for rank in range(n)))


@dataclass(frozen=True)
class _Org:
    """A company: its full name, short name, product-line word and product nouns.

    The product line is the short name for most companies (ORG ``kestrel``, PRODUCT ``the kestrel
    turbine``) and a word of its own for companies named after a place or a person.
    """

    full: str
    short: str
    brand: str
    products: tuple[str, ...]


_FLAGSHIPS = (
    _Org("solenne power", "solenne", "solenne", ("inverter", "wind turbine", "storage array")),
    _Org("kestrel", "kestrel", "kestrel", ("turbine", "platform", "engine")),
    _Org("meridian systems", "meridian", "meridian", ("router", "gateway", "cloud suite")),
    _Org("halcyon biosciences", "halcyon", "halcyon", ("test kit", "implant", "analyzer")),
    _Org("cobalt networks", "cobalt", "cobalt", ("chip", "module", "data platform")),
    _Org("borealis motors", "borealis", "borealis", ("battery", "charger", "tractor")),
)


_SYLLABLES = (_LEX.onsets, _LEX.vowels, _LEX.middles, _LEX.endings)


def _pseudo_word(rng: random.Random) -> str:
    """A generated word: an onset, a vowel, a middle and an ending (``tandis``)."""
    return "".join(rng.choice(part) for part in _SYLLABLES)


def _zipf_choice(rng: random.Random, pool: tuple[str, ...], exponent: float) -> str:
    """An item of ``pool`` drawn by Zipf rank (``rng.choice``, uniform, at exponent 0)."""
    if exponent == 0:
        return rng.choice(pool)
    weights = _zipf_weights(len(pool), exponent)
    return pool[bisect.bisect(weights, rng.random() * weights[-1])]


@functools.cache
def _ranked(pool: tuple[str, ...]) -> tuple[str, ...]:
    """``pool`` in a fixed pseudo-random order, by a hash of each entry.

    The lists are alphabetical: ranking them as they stand would make every common name an ``a``.
    """
    return tuple(sorted(pool, key=lambda w: hashlib.sha256(w.encode()).digest()))


def _name(rng: random.Random, pool: tuple[str, ...], p: Profile) -> str:
    """A curated name of ``pool``: uniform, or by Zipf rank where the profile has ``name_zipf``."""
    if p.name_zipf == 0:
        return rng.choice(pool)
    return _zipf_choice(rng, _ranked(pool), p.name_zipf)


def _brand(rng: random.Random, p: Profile) -> str:
    if rng.random() < p.p_pseudo_brand:
        return _pseudo_word(rng)
    return _name(rng, _LEX.brand_words, p)


def _surname(rng: random.Random, p: Profile) -> str:
    if rng.random() < p.p_pseudo_surname:
        return _pseudo_word(rng)
    return _name(rng, _LEX.last_names, p)


def _place(rng: random.Random, p: Profile) -> str:
    """A place: a curated country, region or city, or a generated town (``port tandis``)."""
    if rng.random() < p.p_town:
        return rng.choice(_LEX.town_forms).format(_pseudo_word(rng))
    return _name(rng, _LEX.places, p)


def _new_org(rng: random.Random, p: Profile) -> _Org:
    """A generated company: brand + suffix (most), place + suffix, or surname + suffix."""
    suffix = rng.choice(_LEX.org_suffixes)
    products = (rng.choice(_LEX.product_nouns), rng.choice(_LEX.product_nouns))
    u = rng.random()
    if u < p.p_gpe_org:
        place = _place(rng, p)
        return _Org(f"{place} {suffix}", f"{place} {suffix}", _brand(rng, p), products)
    if u < p.p_gpe_org + p.p_surname_org:
        name = f"{_surname(rng, p)} {suffix}"
        return _Org(name, name, _brand(rng, p), products)
    brand = _brand(rng, p)
    if rng.random() < 0.12:
        return _Org(brand, brand, brand, products)  # a one-word company, like kestrel
    full = f"{brand} {suffix}"
    if rng.random() < 0.15:
        full += " " + rng.choice(_LEX.corp_endings)
    return _Org(full, brand, brand, products)


@dataclass
class _Person:
    first: str
    last: str

    @property
    def full(self) -> str:
        return f"{self.first} {self.last}"


def _org_or_flagship(rng: random.Random, p: Profile) -> _Org:
    """A document's company or a rival: one of the recurring ``_FLAGSHIPS``, or a new company."""
    return rng.choice(_FLAGSHIPS) if rng.random() < p.p_flagship else _new_org(rng, p)


def _new_person(rng: random.Random, p: Profile) -> _Person:
    return _Person(_name(rng, _LEX.first_names, p), _surname(rng, p))


def _tenths(rng: random.Random, low: int, high: int) -> str:
    """An amount of ``randrange(low, high)`` tenths, written with its decimal (60%) or rounded.

    A rounded amount is never ``0``: 0.3 percent rounds to ``1``.
    """
    x = rng.randrange(low, high) / 10
    return f"{x:.1f}" if rng.random() < 0.6 else f"{round(x) or 1}"


def _money(rng: random.Random) -> str:
    """A money amount; the letters that survive tokenisation are the unit and currency words."""
    u = rng.random()
    if u < _P_VANISH:
        return f"${rng.randrange(10, 999)},{rng.randrange(100, 999)}"
    amount = _tenths(rng, 11, 9999)
    v = rng.random()
    if v < 0.55:
        return f"${amount} million"
    if v < 0.7:
        return f"${rng.randrange(11, 99) / 10:.1f} billion"
    if v < 0.78:
        return f"{amount} million dollars"
    if v < 0.86:
        return f"{amount} million " + rng.choice(("euros", "pounds", "swiss francs"))
    if v < 0.92:
        return rng.choice(("€", "£")) + f"{amount} million"
    if v < 0.96:
        return f"{rng.randrange(11, 99)} billion yen"
    return f"us${amount} million"


def _small_money(rng: random.Random) -> str:
    """A per-share amount: ``"25 cents"`` keeps ``cents``, ``"$0.25"`` vanishes (dropped)."""
    cents = rng.randrange(5, 95)
    return f"{cents} cents" if rng.random() < 0.5 else f"${cents / 100:.2f}"


def _percent(rng: random.Random) -> str:
    """A percentage: ``percent`` or ``per cent`` survives tokenisation, ``"4%"`` vanishes."""
    u = rng.random()
    if u < _P_VANISH:
        return f"{rng.randrange(1, 40)}%"
    amount = _tenths(rng, 1, 400)
    if u < 0.9:
        return f"{amount} percent"
    return f"{amount} per cent"


def _bps(rng: random.Random) -> str:
    """A change of a ratio: ``basis points`` or ``percentage points``."""
    if rng.random() < 0.55:
        return f"{rng.randrange(10, 400)} basis points"
    return f"{rng.randrange(1, 50) / 10:.1f} percentage points"


class _Document:
    """One document being generated: its company, people, period and the mentions so far."""

    def __init__(self, rng: random.Random, p: Profile) -> None:
        self.rng = rng
        self.profile = p
        self.org = _org_or_flagship(rng, p)
        self.hq = _place(rng, p)
        self.sector = rng.choice(_LEX.sectors)
        self.ceo = _new_person(rng, p)
        self.cfo = _new_person(rng, p)
        self.year = rng.randrange(2015, 2027)
        self.quarter = rng.randrange(1, 5)
        self.rivals = [_org_or_flagship(rng, p) for _ in range(2)]
        self.rivals = [r for r in self.rivals if r.full != self.org.full] or [_new_org(rng, p)]
        self.analyst = _new_person(rng, p)
        self.bank = _new_org(rng, p)
        self.mentioned: set[str] = set()  # membership only, never iterated
        self.dropped: Counter[str] = Counter()
        handlers: dict[str, Callable[[], tuple[str, str | None]]] = {
            "ORG": self._org,
            "CO": self._company,
            "ORGF": lambda: (self._once(self.org.full), "ORG"),
            "RIVAL": self._rival,
            "PARTNER": lambda: (_new_org(self.rng, p).full, "ORG"),
            "BANK": lambda: (self._bank_name(), "ORG"),
            "CEO": lambda: (self._person(self.ceo), "PERSON"),
            "CEO_FIRST": lambda: (self.ceo.first, "PERSON"),
            "CFO": lambda: (self._person(self.cfo), "PERSON"),
            "EXEC": lambda: (_new_person(self.rng, p).full, "PERSON"),
            "PERSON": lambda: (_new_person(self.rng, p).full, "PERSON"),
            "ANALYST": self._new_analyst,
            "ANALYST_FIRST": lambda: (self.analyst.first, "PERSON"),
            "HQ": lambda: (self.hq, "GPE"),
            "GPE": lambda: (_place(self.rng, p), "GPE"),
            "PRODUCT": self._product,
            "NEWPRODUCT": self._new_product,
            "SECTOR": lambda: (self.sector, "SECTOR"),
            "SECTOR2": lambda: (self.rng.choice(_LEX.sectors), "SECTOR"),
            "PERIOD": self._period,
            "PRIOR": self._prior,
            "NEXT": self._next,
            "DATE": self._date,
            "DAY": self._day,
            "YEAR": lambda: (self._year_form(self.year), "DATE"),
            "DUEYEAR": lambda: (str(self.year + self.rng.randrange(3, 12)), "DATE"),
            "MONEY": lambda: (_money(self.rng), "MONEY"),
            "SMALLMONEY": lambda: (_small_money(self.rng), "MONEY"),
            "PERCENT": lambda: (_percent(self.rng), "PERCENT"),
            "BPS": lambda: (_bps(self.rng), "PERCENT"),
        }
        self.handlers = handlers

    # ---- entity slots ----------------------------------------------------------------------------

    def _once(self, key: str) -> str:
        self.mentioned.add(key)
        return key

    def _org(self) -> tuple[str, str | None]:
        org = self.org
        if org.full not in self.mentioned or self.rng.random() < 0.3:
            return self._once(org.full), "ORG"
        return org.short, "ORG"

    def _company(self) -> tuple[str, str | None]:
        """The company by name (an ORG) or as ``the company`` (``O``)."""
        return self._org() if self.rng.random() < _P_CO_NAME else ("the company", None)

    def _rival(self) -> tuple[str, str | None]:
        rival = self.rng.choice(self.rivals)
        if rival.full not in self.mentioned:
            return self._once(rival.full), "ORG"
        return rival.short, "ORG"

    def _bank_name(self) -> str:
        bank = self.bank
        if self.rng.random() < 0.6:
            return f"{bank.brand} {self.rng.choice(_LEX.bank_suffixes)}"
        return bank.full

    def _person(self, person: _Person) -> str:
        if person.full not in self.mentioned:
            return self._once(person.full)
        return person.full if self.rng.random() < 0.5 else person.last

    def _new_analyst(self) -> tuple[str, str | None]:
        self.analyst = _new_person(self.rng, self.profile)
        self.bank = _new_org(self.rng, self.profile)
        return self.analyst.full, "PERSON"

    def _product(self) -> tuple[str, str | None]:
        org = self.org
        return f"the {org.brand} {self.rng.choice(org.products)}", "PRODUCT"

    def _new_product(self) -> tuple[str, str | None]:
        rng = self.rng
        line = self.org.brand if rng.random() < 0.5 else _brand(rng, self.profile)
        return f"the {line} {rng.choice(_LEX.product_nouns)}", "PRODUCT"

    def _year_form(self, year: int) -> str:
        return f"{self.rng.choice(('fiscal', 'fiscal', 'calendar', 'fiscal year'))} {year}"

    def _quarter_form(self, quarter: int, year: int) -> str:
        rng = self.rng
        u = rng.random()
        if u < 0.45:
            return f"the {_ORDINALS[quarter - 1]} quarter"
        if u < 0.75:
            return f"the {_ORDINALS[quarter - 1]} quarter of {self._year_form(year)}"
        month, day = _QUARTER_END[quarter]
        if u < 0.9:
            return f"the three months ended {month} {day}, {year}"
        return f"the quarter ended {month} {day}"

    def _period(self) -> tuple[str, str | None]:
        rng = self.rng
        u = rng.random()
        if u < 0.7:
            return self._quarter_form(self.quarter, self.year), "DATE"
        if u < 0.8:
            return rng.choice(("the fiscal year", "the full year", "the year")), "DATE"
        if u < 0.9:
            return self._year_form(self.year), "DATE"
        half = "first" if self.quarter <= 2 else "second"
        return f"the {half} half of {self._year_form(self.year)}", "DATE"

    def _prior(self) -> tuple[str, str | None]:
        rng = self.rng
        u = rng.random()
        if u < 0.5:
            return self._quarter_form(self.quarter, self.year - 1), "DATE"
        if u < 0.7:
            return self._year_form(self.year - 1), "DATE"
        if u < 0.85:
            return "the year-ago quarter", "DATE"
        return "the same quarter last year", "DATE"

    def _next(self) -> tuple[str, str | None]:
        rng = self.rng
        u = rng.random()
        if u < 0.3 and self.quarter < 4:
            return f"the {_ORDINALS[self.quarter]} quarter", "DATE"
        if u < 0.55:
            return self._year_form(self.year + 1), "DATE"
        if u < 0.7:
            return rng.choice(("the second half", "the coming year", "the full year")), "DATE"
        if u < 0.85:
            return rng.choice(
                ("the coming fiscal year", "the fiscal year", "the next twelve months")
            ), "DATE"
        return f"the {rng.choice(_ORDINALS)} quarter of {self._year_form(self.year + 1)}", "DATE"

    def _date(self) -> tuple[str, str | None]:
        """A date that follows ``in`` or ``by``: a month, a season, part of a year."""
        rng = self.rng
        year = self.year + rng.randrange(-1, 2)
        u = rng.random()
        if u < 0.35:
            return f"{rng.choice(_MONTHS)} {year}", "DATE"
        if u < 0.5:
            return rng.choice(_MONTHS), "DATE"
        if u < 0.7:
            return f"{rng.choice(('early', 'late', 'mid'))} {year}", "DATE"
        if u < 0.9:
            return f"the {rng.choice(('spring', 'summer', 'autumn', 'winter'))}", "DATE"
        return str(year), "DATE"  # vanishes: a dropped entity

    def _day(self) -> tuple[str, str | None]:
        """A date that follows ``on``, ``as of`` or ``effective``: a day."""
        rng = self.rng
        month = rng.randrange(1, 13)
        day = rng.randrange(1, 29)
        year = self.year + rng.randrange(0, 2)
        u = rng.random()
        if u < 0.5:
            return f"{_MONTHS[month - 1]} {day}", "DATE"
        if u < 0.95:
            return f"{_MONTHS[month - 1]} {day}, {year}", "DATE"
        return f"{month:02d}/{day:02d}/{year}", "DATE"  # vanishes: a dropped entity

    # ---- sentences -------------------------------------------------------------------------------

    def sentence(self, group: str) -> tuple[list[str], list[Span], str]:
        """One sentence from a template of ``group``: tokens, spans and the surface text."""
        templates = TEMPLATES[group]
        weights = _zipf_weights(len(templates), self.profile.template_zipf)
        pieces = templates[bisect.bisect(weights, self.rng.random() * weights[-1])]
        tokens: list[str] = []
        spans: list[Span] = []
        surface: list[str] = []
        if self.profile.p_aside > 0 and self.rng.random() < self.profile.p_aside:
            aside = self._aside()
            surface.append(aside + ", ")
            tokens.extend(tokenize(aside))
        for literal, slot in pieces:
            surface.append(literal)
            tokens.extend(tokenize(literal))
            if slot is None:
                continue
            if slot.islower():
                text, label = self.rng.choice(_LEX.filler[slot]), None
            else:
                text, label = self.handlers[slot]()
            surface.append(text)
            words = tokenize(text)
            if label is not None:
                if not words:
                    self.dropped[label] += 1
                    continue
                spans.append(Span(label, len(tokens), len(tokens) + len(words) - 1))
            tokens.extend(words)
        text = _SENTENCE_START.sub(lambda m: m.group(0).upper(), "".join(surface))
        return tokens, spans, text

    def _aside(self) -> str:
        """An ``O`` phrase that opens a sentence: a connective, an adjective and two nouns.

        The adjective and nouns come from long lists (uniformly, or by Zipf rank where the profile's
        ``aside_zipf`` is above 0): the long tail of open-class words a real filing has.
        """
        rng, zipf = self.rng, self.profile.aside_zipf
        words = [rng.choice(_LEX.aside_connectives)]
        pools = (_LEX.aside_adjectives, _LEX.aside_nouns, _LEX.aside_nouns)
        words += [_zipf_choice(rng, pool, zipf) for pool in pools]
        return " ".join(words)

    def plan(self, kind: str) -> list[str]:
        """The template groups of the document's sentences, in order (6 to 15 of them)."""
        rng = self.rng
        n = rng.randrange(_SENTENCES[0], _SENTENCES[1] + 1)
        if kind == "filing":
            body = [
                "filing_quote" if rng.random() < _P_QUOTE else "filing_body" for _ in range(n - 2)
            ]
            return ["filing_open", *body, "filing_close"]
        groups = ["call_open", "call_intro"]
        while len(groups) < n - 1:
            if rng.random() < 0.35 and len(groups) + 3 <= n - 1:
                groups += ["call_question_intro", "call_question", "call_answer"]
            else:
                groups.append("filing_body" if rng.random() < _P_CALL_FILING else "call_body")
        return [*groups, "call_close"]


@dataclass
class FinanceDocument:
    """One generated document.

    Attributes:
        doc_id: ``"finance-<seed>-<index>"``.
        kind: ``"filing"`` or ``"transcript"``.
        company: the full name of the company the document is about.
        sentences: the tagged sentences (``doc_id`` set; ``id`` is ``"<doc_id>:<n>"``).
        texts: the surface text of each sentence, digits and punctuation included.
        dropped: entities whose tokens all vanished in tokenisation, by type (no span was made).
    """

    doc_id: str
    kind: str
    company: str
    sentences: list[Sentence]
    texts: list[str]
    dropped: dict[str, int] = field(default_factory=dict)


def _generate_document(seed: int, index: int, p: Profile) -> FinanceDocument:
    # The default profile keeps the seed string it had before profiles; another profile's runs are
    # their own (document i of run s differs between profiles in every draw).
    key = (
        f"crfhead-finance:{seed}:{index}"
        if p == DEFAULT
        else f"crfhead-finance:{p.name}:{seed}:{index}"
    )
    rng = random.Random(key)
    doc = _Document(rng, p)
    kind = "filing" if rng.random() < 0.5 else "transcript"
    doc_id = f"finance-{seed}-{index}"
    sentences: list[Sentence] = []
    texts: list[str] = []
    for n, group in enumerate(doc.plan(kind)):
        tokens, spans, text = doc.sentence(group)
        tags = spans_to_tags(spans, len(tokens), "BIO")
        sentences.append(Sentence(tokens=tokens, tags=tags, doc_id=doc_id, id=f"{doc_id}:{n}"))
        texts.append(text)
    dropped = {t: doc.dropped[t] for t in ENTITY_TYPES if doc.dropped[t]}
    return FinanceDocument(doc_id, kind, doc.org.full, sentences, texts, dropped)


def generate_finance_documents(
    seed: int, n_docs: int, profile: str | Profile = DEFAULT
) -> list[FinanceDocument]:
    """The first ``n_docs`` documents of corpus run ``seed``, with surface text and drop counts.

    Args:
        seed: the corpus run.
        n_docs: how many documents (document ``i`` is the same whatever ``n_docs`` is).
        profile: the generator's profile, by name (``"default"``, ``"seed"``) or object
            (:mod:`crfhead.data.finance.profile`).

    Returns:
        The documents, in order.

    Raises:
        ValueError: ``n_docs`` is negative, or ``profile`` names no profile.
    """
    if n_docs < 0:
        raise ValueError(f"n_docs must be >= 0, got {n_docs}")
    p = resolve_profile(profile)
    return [_generate_document(seed, i, p) for i in range(n_docs)]


def generate_documents(
    seed: int, n_docs: int, profile: str | Profile = DEFAULT
) -> list[list[Sentence]]:
    """The first ``n_docs`` documents of corpus run ``seed``, each a list of tagged sentences.

    Args:
        seed: the corpus run; the same seed gives the same documents on any machine.
        n_docs: how many documents; ``generate_documents(s, m)[:n] == generate_documents(s, n)``.
        profile: the generator's profile (see :func:`generate_finance_documents`).

    Returns:
        One list of :class:`~crfhead.data.sentence.Sentence` per document (6 to 15 sentences, BIO
        tags over :data:`LABELS`, ``doc_id`` ``"finance-<seed>-<i>"``, ``id`` ``"<doc_id>:<n>"``).
    """
    return [d.sentences for d in generate_finance_documents(seed, n_docs, profile)]


def generate_corpus(seed: int, n_docs: int, profile: str | Profile = DEFAULT) -> list[Sentence]:
    """The sentences of :func:`generate_documents` ``(seed, n_docs, profile)``, flattened in order."""
    return [s for doc in generate_documents(seed, n_docs, profile) for s in doc]
