"""The synthetic finance corpus: company filings and earnings-call transcripts tagged with entities.

This is the shared finance corpus of the seed text's section "Tagging entities in filings"
(``shared/seeds/000_7c5bc3c5795a6d4c.txt``): documents are generated from templates with slot fillers,
every entity is generated as a :class:`~crfhead.constraints.Span` and encoded in BIO, which gives the
17 :data:`LABELS` over the 8 :data:`ENTITY_TYPES`.

* **Corpus runs.** A run is a seed. Document ``i`` of run ``seed`` draws only from its own
  ``random.Random(f"crfhead-finance:{seed}:{i}")``, so the same seed gives the same documents byte for
  byte on any machine, and the first ``n`` documents of a run do not depend on how many were asked for
  (``generate_documents(s, 30)[:3] == generate_documents(s, 3)``): "the first 3, 10 and 30 documents of
  one run" are prefixes.
* **Tokens.** Surface text is written with digits and punctuation (``"$12.4 million"``,
  ``"4.5 percent"``, ``"fiscal 2023"``) and then tokenised into lowercase letter-only tokens
  (:func:`tokenize`), so a money amount keeps ``million`` (or ``billion``, ``cents``, a currency word),
  a percentage keeps ``percent`` (or ``basis points``, ``percentage points``) and ``fiscal 2023`` keeps
  ``fiscal``. An entity whose tokens all vanish (``"$0.25"`` a share, ``"4%"``, ``"due 2031"``) yields
  no span; :attr:`FinanceDocument.dropped` counts those by type.
* **Phenomena.** ``the`` opens DATE (``the third quarter``, ``the fiscal year``) and PRODUCT
  (``the kestrel turbine``) spans and is ``O`` everywhere else (``the company``, ``the board``,
  ``the quarter``); it is never inside a span. ``million`` occurs only inside MONEY and ``percent`` only
  inside PERCENT. A company's brand is also its product line (ORG ``kestrel`` / PRODUCT
  ``the kestrel turbine``), and places occur inside company names (ORG ``north carolina power``,
  ``port tandis logistics``). Names come from curated lists and from a syllable generator (90,625
  words, so tens of thousands of distinct company, person and place names), so unseen names are
  common: against 200 test documents of another run, about 0.38 of the test tokens are unseen after
  the first 3 documents of a run, 0.21 after 10 and 0.13 after 30 (:func:`unseen_rates`; means over
  12 pairs of runs, standard deviations 0.03, 0.01 and 0.005), the seed's regime (0.369 and 0.138).
  Every type has multi-token names (``solenne power``, ``marek novak``, ``north carolina``, ``the kestrel
  turbine``, ``cloud infrastructure``, ``the third quarter``, ``million euros``, ``basis points``).

Write a run with ``python scripts/make_finance_corpus.py --seed 0 --docs 30 --out DIR``.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from crfhead.constraints import Span, labels_for, spans_to_tags, tags_to_spans
from crfhead.data.sentence import Sentence

__all__ = [
    "ENTITY_TYPES",
    "LABELS",
    "FinanceDocument",
    "corpus_statistics",
    "generate_corpus",
    "generate_documents",
    "generate_finance_documents",
    "tokenize",
    "unseen_rate",
    "unseen_rates",
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
_SLOT = re.compile(r"\{(\w+)\}")
_SENTENCE_START = re.compile(r"(?:^|[.?!]\s+)\"?[a-z]")


def tokenize(text: str) -> list[str]:
    """The corpus tokens of ``text``: its maximal runs of ASCII letters, lowercased.

    Digits, punctuation and symbols are dropped: ``"$12.4 million"`` → ``["million"]``.
    """
    return _TOKEN.findall(text.lower())


# --------------------------------------------------------------------------------------------------
# Name resources. Everything is a tuple (fixed order); nothing depends on set or dict hash order.
# --------------------------------------------------------------------------------------------------


def _split(text: str) -> tuple[str, ...]:
    """The whitespace-separated words of ``text``, in order."""
    return tuple(text.split())


_BRAND_WORDS = _split(
    "acacia alder altair amber anchor apex argent aspen atlas aurora avocet basalt beacon bedrock "
    "beryl birch bluewater borealis bramble brightwater caldera cascade cedar cirrus clearwater "
    "clover cobalt compass condor cornerstone cygnus draco egret ember equinox falcon fathom "
    "fernwood firefly foxglove garnet granite halcyon harbor harrier hawthorn helix heron "
    "horizon hyperion ibis indigo ironwood jasper juniper keystone kestrel lantern larch lark "
    "linden lodestar lumen lyra magnolia mariner meridian merlin monsoon nimbus northstar nova "
    "oakridge obsidian onyx orion osprey palisade pelican peregrine pinnacle plover polaris "
    "quartz quill radiant raven redwood sable saffron sentinel sequoia sextant sierra silverline "
    "sirius solstice sparrow stratus summit tallis tempest thistle titan topaz tundra vantage "
    "vega verdant vertex willow wren zenith zephyr zircon"
)

_ORG_SUFFIXES = (
    "power",
    "energy",
    "holdings",
    "systems",
    "capital",
    "group",
    "labs",
    "technologies",
    "industries",
    "networks",
    "partners",
    "bank",
    "financial",
    "therapeutics",
    "biosciences",
    "semiconductor",
    "logistics",
    "foods",
    "motors",
    "resources",
    "mining",
    "materials",
    "software",
    "health",
    "insurance",
    "realty",
    "pharmaceuticals",
    "airlines",
    "telecom",
    "media",
    "analytics",
    "robotics",
    "solar",
    "petroleum",
    "chemicals",
    "brands",
    "dynamics",
    "aerospace",
    "utilities",
    "capital partners",
    "asset management",
    "financial group",
    "energy partners",
    "data systems",
    "medical devices",
)

_BANK_SUFFIXES = (
    "securities",
    "capital markets",
    "research",
    "and company",
    "brothers",
    "partners",
    "investment bank",
    "equity research",
    "advisors",
)

_CORP_ENDINGS = ("inc", "corp", "plc", "ltd", "ag", "sa", "nv", "limited", "corporation")

_FIRST_NAMES = _split(
    "aaron adele ahmed aiko alana alejandro alice amara amir ana andrea anil anna anton aria arjun "
    "astrid aurelio beatriz benedikt bianca bjorn carla carlos catalina chen chidi chloe clara "
    "daniel dario david deepa diana dmitri eduardo elena elif eliza emeka emil emma erik esther "
    "fatima felix fernando fiona francesca gabriel gita grace hamid hana hannah hector helena "
    "henrik hiroshi ibrahim ines ingrid irene isabel ivan jakob james jana javier jin joanna "
    "jonas jorge julia kamal karin kenji laila lars laura leila leon lina lucas lucia luis "
    "magnus maria marek marta mateo maya mei michael mikhail mina miriam nadia naomi nikhil "
    "nina noah nora olga omar oscar pablo paolo pedro priya rafael rahul ravi rebecca renata "
    "ricardo rosa ruth samir sara sebastian sergei simone sofia sonia stefan sunil tamara "
    "thomas tobias tomas valentina victor walter wei xavier yara yuki yusuf zainab zoe"
)

_LAST_NAMES = _split(
    "abbott adeyemi alvarez andersen arslan bauer becker bergstrom bianchi brandt castillo chen "
    "costa cruz dahl delgado demir dubois duarte eriksen esposito fischer fonseca garcia gomez "
    "gruber haddad hansen hartmann herrera hoffmann holm horvath ibarra ivanova jensen johansson "
    "kaplan kato keller khan kim kowalski kraus kumar lambert larsen laurent lindqvist lopez "
    "mahmoud marino martinez mendes meyer moreau morales mueller murphy nakamura navarro "
    "nielsen novak nowak okafor olsen ortiz pereira petrov popescu quinn ramos reyes ricci "
    "rossi santos sato schmidt schulz silva sorensen suzuki tanaka torres varga vasquez vogel "
    "wagner walsh weber wong yamamoto yilmaz zimmermann"
)

_PLACES = (
    "alabama",
    "alberta",
    "amsterdam",
    "arizona",
    "atlanta",
    "austin",
    "bangalore",
    "barcelona",
    "bavaria",
    "beijing",
    "berlin",
    "bogota",
    "boston",
    "brazil",
    "british columbia",
    "buenos aires",
    "california",
    "canada",
    "cape town",
    "chicago",
    "chile",
    "colorado",
    "copenhagen",
    "costa rica",
    "dallas",
    "denmark",
    "denver",
    "dubai",
    "dublin",
    "egypt",
    "finland",
    "florida",
    "france",
    "frankfurt",
    "georgia",
    "germany",
    "hamburg",
    "hong kong",
    "houston",
    "india",
    "indonesia",
    "ireland",
    "israel",
    "italy",
    "japan",
    "jakarta",
    "kenya",
    "kuala lumpur",
    "lagos",
    "las vegas",
    "lisbon",
    "london",
    "los angeles",
    "madrid",
    "malaysia",
    "manila",
    "massachusetts",
    "melbourne",
    "mexico",
    "mexico city",
    "miami",
    "michigan",
    "milan",
    "minnesota",
    "montreal",
    "morocco",
    "mumbai",
    "munich",
    "nairobi",
    "nevada",
    "new delhi",
    "new jersey",
    "new mexico",
    "new south wales",
    "new york",
    "new zealand",
    "nigeria",
    "north carolina",
    "north dakota",
    "norway",
    "ohio",
    "ontario",
    "oregon",
    "osaka",
    "oslo",
    "paris",
    "pennsylvania",
    "peru",
    "philippines",
    "poland",
    "portugal",
    "quebec",
    "rotterdam",
    "san diego",
    "san francisco",
    "sao paulo",
    "saudi arabia",
    "scotland",
    "seattle",
    "seoul",
    "shanghai",
    "singapore",
    "south africa",
    "south carolina",
    "south korea",
    "spain",
    "stockholm",
    "sweden",
    "switzerland",
    "sydney",
    "taiwan",
    "tennessee",
    "texas",
    "thailand",
    "tokyo",
    "toronto",
    "turkey",
    "united arab emirates",
    "united kingdom",
    "united states",
    "utah",
    "vancouver",
    "vietnam",
    "virginia",
    "warsaw",
    "washington",
    "west virginia",
    "zurich",
)

_PRODUCT_NOUNS = (
    "turbine",
    "platform",
    "processor",
    "engine",
    "suite",
    "controller",
    "battery",
    "series",
    "sensor",
    "router",
    "gateway",
    "inverter",
    "compressor",
    "drone",
    "chip",
    "module",
    "console",
    "scanner",
    "analyzer",
    "pump",
    "reactor",
    "charger",
    "tablet",
    "headset",
    "implant",
    "vaccine",
    "tractor",
    "locomotive",
    "satellite",
    "card",
    "cloud suite",
    "data platform",
    "wind turbine",
    "payments app",
    "heat pump",
    "storage array",
    "flight system",
    "test kit",
)

_SECTORS = (
    "aerospace and defense",
    "agriculture",
    "asset management",
    "automotive",
    "biotechnology",
    "building materials",
    "cloud infrastructure",
    "commercial real estate",
    "consumer electronics",
    "consumer lending",
    "cybersecurity",
    "data centers",
    "digital advertising",
    "digital payments",
    "electric vehicles",
    "enterprise software",
    "food processing",
    "freight logistics",
    "gaming",
    "generic drugs",
    "grid storage",
    "healthcare services",
    "hospitality",
    "industrial automation",
    "industrial gases",
    "insurance brokerage",
    "life sciences",
    "managed care",
    "marine shipping",
    "medical devices",
    "metals and mining",
    "mobile networks",
    "offshore wind",
    "oil and gas",
    "packaged foods",
    "precision agriculture",
    "private credit",
    "renewable energy",
    "residential construction",
    "retail banking",
    "semiconductors",
    "solar power",
    "specialty chemicals",
    "specialty retail",
    "telecommunications",
    "water utilities",
    "wealth management",
    "wireless equipment",
)

_ONSETS = _split("b c d f g h j k l m n p r s t v z br cr dr fr gr pr tr st sk kl th sh")
_VOWELS = ("a", "e", "i", "o", "u")
_MIDDLES = _split("l ll m n nn r rr s st str v x th nd nt rd lv rn sc ld mb ss t d k")
_ENDINGS = _split(
    "a e el en er ia ine is on or us enne ora ix ex an ar et ina o ium yn ara ade ille"
)

_ORDINALS = ("first", "second", "third", "fourth")
_MONTHS = _split(
    "january february march april may june july august september october november december"
)
_QUARTER_END = {1: ("march", 31), 2: ("june", 30), 3: ("september", 30), 4: ("december", 31)}

# Filler words (O): one tuple per lowercase slot name.
_WORDS: dict[str, tuple[str, ...]] = {
    "rose": (
        "rose",
        "increased",
        "grew",
        "climbed",
        "advanced",
        "improved",
        "expanded",
        "jumped",
    ),
    "fell": ("fell", "declined", "decreased", "dropped", "slipped", "contracted", "eased"),
    "moved": (
        "rose",
        "increased",
        "grew",
        "fell",
        "declined",
        "decreased",
        "improved",
        "slipped",
    ),
    "metric": (
        "revenue",
        "net revenue",
        "net sales",
        "operating income",
        "gross profit",
        "adjusted ebitda",
        "free cash flow",
        "net income",
        "operating cash flow",
        "subscription revenue",
        "services revenue",
        "recurring revenue",
        "order intake",
        "bookings",
        "backlog",
        "segment profit",
    ),
    "ratio": (
        "gross margin",
        "operating margin",
        "adjusted ebitda margin",
        "net interest margin",
        "return on equity",
        "customer churn",
        "utilization",
        "effective tax rate",
    ),
    "segment": (
        "industrial",
        "consumer",
        "services",
        "commercial",
        "international",
        "specialty",
        "wholesale",
        "digital",
    ),
    "strong": (
        "strong",
        "solid",
        "firm",
        "robust",
        "healthy",
        "resilient",
        "steady",
        "favorable",
    ),
    "driver": (
        "higher volumes",
        "pricing actions",
        "new customer wins",
        "stronger demand",
        "favorable mix",
        "cost discipline",
        "recent acquisitions",
        "higher utilization",
    ),
    "headwind": (
        "weaker demand",
        "currency headwinds",
        "supply constraints",
        "higher input costs",
        "softer pricing",
        "inventory destocking",
        "a labor strike",
        "severe weather",
    ),
    "daypart": ("morning", "afternoon", "evening", "day"),
    "ceo_title": ("chief executive officer", "president and chief executive", "chief executive"),
    "cfo_title": ("chief financial officer", "finance director", "chief financial officer"),
    "exec_title": (
        "chief operating officer",
        "chief technology officer",
        "general counsel",
        "treasurer",
        "head of strategy",
        "chief risk officer",
        "president of the international business",
        "chief commercial officer",
    ),
    "said": ("said", "noted", "added", "commented", "stated", "explained"),
    "expects": ("expects", "anticipates", "projects", "forecasts", "targets"),
    "expect": ("expect", "anticipate", "project", "forecast", "are targeting"),
    "next": ("next", "following", "next"),
    "ask": ("can you talk about", "how should we think about", "could you talk about"),
    "thanks": ("thanks", "thank you", "great question", "sure"),
}

# --------------------------------------------------------------------------------------------------
# Templates. ``{UPPER}`` slots are entities (or entity-like numbers), ``{lower}`` slots filler words.
# No literal text contains a digit, ``million``, ``billion``, ``percent`` or a ``the`` that an entity
# slot follows directly.
# --------------------------------------------------------------------------------------------------

_FILING_OPEN = (
    "{ORGF}, based in {HQ} and active in {SECTOR}, today reported financial results for {PERIOD}.",
    "{ORGF} reported {metric} of {MONEY} for {PERIOD}, an increase of {PERCENT} over {PRIOR}.",
    "{HQ}-based {ORGF} announced results for {PERIOD} on {DAY}.",
    "this quarterly report covers the operations of {ORGF} and its subsidiaries for {PERIOD}.",
    "{ORGF}, the {SECTOR} group headquartered in {HQ}, filed its annual report for {YEAR} on {DAY}.",
    "{ORGF} today announced {strong} results for {PERIOD}, led by growth in {SECTOR}.",
)

_FILING_BODY = (
    "{metric} for {PERIOD} was {MONEY}, compared with {MONEY} in {PRIOR}.",
    "{metric} {rose} {PERCENT} to {MONEY}, driven by {driver} in {GPE}.",
    "{ratio} was {PERCENT}, compared with {PERCENT} in {PRIOR}.",
    "{ratio} {moved} by {BPS} from {PRIOR}, reflecting {driver}.",
    "sales of {PRODUCT} {rose} {PERCENT} as demand from {SECTOR2} customers strengthened.",
    "{CO} shipped {PRODUCT} to customers in {GPE} and {GPE} during the quarter.",
    "{ORG} launched {NEWPRODUCT} in {GPE} in {DATE}.",
    "the board of directors declared a quarterly dividend of {SMALLMONEY} per share, payable on {DAY}.",
    "during the quarter, {ORG} repurchased shares for a total of {MONEY}.",
    "{ORG} completed the acquisition of {PARTNER}, a {SECTOR2} business based in {GPE}, for {MONEY}.",
    "{ORG} agreed to sell its {segment} unit to {RIVAL} for {MONEY} in cash.",
    "{CEO}, {ceo_title} of {ORG}, {said} that {PERIOD} reflected {strong} demand in {SECTOR}.",
    '"we delivered {strong} results in {PERIOD}," {said} {CEO}, {ceo_title} of {CO}.',
    "the board appointed {EXEC} as {exec_title}, effective {DAY}.",
    "{EXEC} succeeds {PERSON}, who will retire from {CO} in {DATE}.",
    "cash and equivalents totaled {MONEY} at the end of {PERIOD}.",
    "long-term debt was {MONEY} as of {DAY}, down from {MONEY} a year earlier.",
    "for {NEXT}, {CO} {expects} {metric} of {MONEY} to {MONEY}.",
    "{CO} raised its outlook for {NEXT} and now {expects} growth of {PERCENT}.",
    "{SECTOR} revenue in {GPE} {rose} {PERCENT}, while {SECTOR2} revenue {fell} {PERCENT}.",
    "international sales, led by {GPE} and {GPE}, accounted for {PERCENT} of {metric}.",
    "{ORG} faces competition from {RIVAL} and {RIVAL} in the {SECTOR} market.",
    "operating expenses {rose} {PERCENT} to {MONEY}, reflecting investment in {PRODUCT}.",
    "the {segment} segment reported {metric} of {MONEY}, up {PERCENT} year over year.",
    "results in {GPE} were affected by {headwind} during {PERIOD}.",
    "{ORG} signed a supply agreement with {PARTNER} valued at {MONEY}.",
    "{CO} opened a new plant in {GPE} to build {PRODUCT} for customers in {SECTOR2}.",
    "net income attributable to {ORG} was {MONEY}, or {SMALLMONEY} per diluted share.",
    "the tax rate was {PERCENT} for {PERIOD}, compared with {PERCENT} for {PRIOR}.",
    "backlog reached a record {MONEY} at {DAY}, up {PERCENT} from a year earlier.",
    "{CO} issued {MONEY} of senior notes due {DUEYEAR} to refinance existing debt.",
    "{ORG} is exposed to currency movements in {GPE}, {GPE} and {GPE}.",
    "in {DATE}, {ORG} entered the {SECTOR2} market through a joint venture with {PARTNER}.",
    "{PRODUCT} accounted for {PERCENT} of total {metric} in {PERIOD}.",
    "{PRODUCT} received regulatory approval in {GPE} in {DATE}.",
    "{metric} {fell} {PERCENT} to {MONEY} because of {headwind} in {GPE}.",
    "the {segment} business of {ORG} now serves customers in {GPE} and {GPE}.",
    "{RIVAL} reported {metric} of {MONEY} for the same period, a decline of {PERCENT}.",
    "capital expenditures were {MONEY}, mainly for capacity in {GPE}.",
    "{CO} recorded a restructuring charge of {MONEY} related to its {segment} operations.",
    "{ORG} holds a stake of {PERCENT} in {PARTNER}, a {SECTOR2} company.",
    "on {DAY}, {ORG} closed the sale of its {SECTOR2} assets in {GPE} to {RIVAL}.",
    "major customers include {PARTNER}, {PARTNER} and {PARTNER}.",
    "{CO} has offices in {GPE}, {GPE}, {GPE} and {GPE}.",
    "{PERSON}, {PERSON} and {PERSON} were elected to the board of {ORG} on {DAY}.",
    "analysts at {BANK} and {BANK} raised their estimates for {ORG} after {PERIOD}.",
    "{ORG} sold {PRODUCT} to {PARTNER} in {GPE} and to {PARTNER} in {GPE}.",
)

_FILING_CLOSE = (
    "this release contains forward-looking statements about {ORG} that involve risks and uncertainties.",
    "{ORG} will host a conference call to discuss these results on {DAY}.",
    "actual results may differ materially from those described in the annual report for {YEAR}.",
    "for more information, contact investor relations at {ORG} in {HQ}.",
    "{CO} undertakes no obligation to update these statements after {DAY}.",
)

_CALL_OPEN = (
    "good {daypart}, and welcome to the earnings call of {ORGF} for {PERIOD}.",
    "good {daypart}, everyone, and thank you for joining the conference call of {ORGF}.",
    "welcome to the conference call of {ORGF} to discuss results for {PERIOD}.",
)

_CALL_INTRO = (
    "joining me today are {CEO}, our {ceo_title}, and {CFO}, our {cfo_title}.",
    "i would now like to turn the call over to {CEO}, {ceo_title} of {ORG}.",
    "before we begin, please note that our remarks today include forward-looking statements.",
    "with me on the call are {CEO} and {CFO}, who will review our results for {PERIOD}.",
)

_CALL_BODY = (
    "we delivered {strong} results in {PERIOD}, with {metric} of {MONEY}.",
    "demand for {PRODUCT} remained {strong} across {GPE} and {GPE}.",
    "in {SECTOR}, we won several new customers, including {PARTNER}.",
    "{metric} grew {PERCENT} year over year, ahead of our guidance.",
    "our {ratio} expanded by {BPS} to {PERCENT}.",
    "we {expect} {metric} for {NEXT} in the range of {MONEY} to {MONEY}.",
    "turning to the balance sheet, we ended {PERIOD} with {MONEY} in cash.",
    "we returned {MONEY} to shareholders through dividends and buybacks in {PERIOD}.",
    "we launched {NEWPRODUCT} in {DATE} and early orders have been {strong}.",
    "in {GPE}, we saw {headwind}, which reduced {metric} by about {MONEY}.",
    "we are seeing {strong} momentum in {SECTOR2}, particularly in {GPE}.",
    "as {CEO} mentioned, {metric} {rose} {PERCENT} in {PERIOD}.",
    "i will now hand the call over to {CFO} to walk through the numbers.",
    "thank you, {CEO_FIRST}, and good {daypart}, everyone.",
    "we continue to gain share against {RIVAL} in {SECTOR}.",
    "the integration of {PARTNER} is on track and should add {MONEY} of revenue in {NEXT}.",
    "capital expenditures were {MONEY}, or about {PERCENT} of revenue.",
    "we now {expect} {metric} growth of {PERCENT} to {PERCENT} for {NEXT}.",
    "{PRODUCT} is now sold in {GPE}, and we plan to enter {GPE} in {NEXT}.",
    "our {segment} business {moved} {PERCENT} in the quarter, while {SECTOR2} was flat.",
    "the board has approved a new buyback program of {MONEY}.",
    "we hired {EXEC} as {exec_title} to lead our expansion in {GPE}.",
    "{metric} in {GPE} {fell} {PERCENT} because of {headwind}.",
    "new customers this quarter include {PARTNER} in {GPE} and {PARTNER} in {GPE}.",
    "we opened offices in {GPE} and {GPE}, and {EXEC} will run our business in {GPE}.",
    "we see a large opportunity for {PRODUCT} in {SECTOR2} in the years ahead.",
)

_CALL_QUESTION_INTRO = (
    "our {next} question comes from {ANALYST} with {BANK}.",
    "we will now take a question from {ANALYST} of {BANK}.",
    "the {next} question is from {ANALYST} at {BANK}.",
)

_CALL_QUESTION = (
    "{ask} pricing for {PRODUCT} in {GPE}?",
    "{ask} your {ratio} in {NEXT}?",
    "{ask} what you are seeing from {RIVAL} in {SECTOR}?",
    "{ask} the impact of {headwind} on {PERIOD}?",
    "{ask} the pipeline in {SECTOR2} and how much of it is in {GPE}?",
    "{ask} the margin outlook for {PRODUCT} now that {RIVAL} has cut prices?",
)

_CALL_ANSWER = (
    "{thanks}, {ANALYST_FIRST}. we expect our {ratio} to improve by {BPS} in {NEXT}.",
    "{thanks}. pricing in {GPE} has held up well, and {PRODUCT} is gaining share.",
    "{thanks}, {ANALYST_FIRST}. {RIVAL} remains a tough competitor, but our win rates are rising.",
    "{thanks}. the impact was about {MONEY} in {PERIOD}, and we expect it to fade by {DATE}.",
    "{thanks}. about {PERCENT} of the pipeline sits in {GPE}, mostly with {SECTOR2} customers.",
    "{thanks}, {ANALYST_FIRST}. {CFO} can give you more detail on that.",
)

_CALL_CLOSE = (
    "that concludes our question and answer session for today.",
    "thank you all for joining us, and we look forward to speaking with you again in {DATE}.",
    "this concludes the conference call of {ORG}; you may now disconnect.",
    "i will now turn the call back to {CEO} for closing remarks.",
)


def _compile(templates: Sequence[str]) -> tuple[tuple[tuple[str, str | None], ...], ...]:
    """Split each template into ``(literal, slot)`` pieces (``slot`` ``None`` after the last)."""
    out = []
    for template in templates:
        pieces: list[tuple[str, str | None]] = []
        at = 0
        for match in _SLOT.finditer(template):
            pieces.append((template[at : match.start()], match.group(1)))
            at = match.end()
        pieces.append((template[at:], None))
        out.append(tuple(pieces))
    return tuple(out)


# Filings quote management: a remark of the call body, in quotes, attributed to the CEO or CFO.
_FILING_QUOTE = tuple(
    f'"{t[:-1]}," {{said}} {{{who}}}.'
    for t in _CALL_BODY
    if t.endswith(".") and "call" not in t and "{CEO" not in t
    for who in ("CEO", "CFO")
)

_T = {
    name: _compile(templates)
    for name, templates in (
        ("filing_open", _FILING_OPEN),
        ("filing_body", _FILING_BODY),
        ("filing_quote", _FILING_QUOTE),
        ("filing_close", _FILING_CLOSE),
        ("call_open", _CALL_OPEN),
        ("call_intro", _CALL_INTRO),
        ("call_body", _CALL_BODY),
        ("call_question_intro", _CALL_QUESTION_INTRO),
        ("call_question", _CALL_QUESTION),
        ("call_answer", _CALL_ANSWER),
        ("call_close", _CALL_CLOSE),
    )
}

# The knobs. Names from the syllable generator are the long tail that stays unseen however much
# training text there is; template frequencies (``_ZIPF``) and the templates filings and calls share
# set how fast the rest of the vocabulary is covered. Together they set the unseen-token rates, tuned
# to the seed's (see the module docstring): changing any of them changes every corpus run.
_P_FLAGSHIP = 0.1  # a document's company (or a rival) is one of the recurring _FLAGSHIPS
_P_PSEUDO_BRAND = 0.95  # a company brand is a generated word, not one of _BRAND_WORDS
_P_PSEUDO_SURNAME = 0.97  # a surname is a generated word, not one of _LAST_NAMES
_P_GPE_ORG = 0.12  # a company is named after a place (``ohio power``-style)
_P_SURNAME_ORG = 0.08  # a company is named after a person (``novak partners``-style)
_P_TOWN = 0.7  # a place is a generated town, not one of _PLACES
_SENTENCES = (6, 15)  # sentences per document, inclusive
_P_VANISH = 0.03  # money / percent written so that no letter survives ("$450,120", "4%")
_P_CO_NAME = 0.8  # a sentence names the company where it could say "the company"
_ZIPF = 0.7  # template frequencies within a group fall as 1 / rank ** _ZIPF
_P_QUOTE = 0.45  # a filing sentence quotes management (a call-body remark)
_P_CALL_FILING = 0.45  # a call sentence reads like a filing (the CFO reading the numbers)


@functools.cache
def _template_weights(n: int) -> tuple[float, ...]:
    """Cumulative Zipf weights of ``n`` templates: the first templates of a group are the common ones."""
    return tuple(itertools.accumulate(1.0 / (rank + 1) ** _ZIPF for rank in range(n)))


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


def _pseudo_word(rng: random.Random) -> str:
    return rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_MIDDLES) + rng.choice(_ENDINGS)


def _brand(rng: random.Random) -> str:
    return _pseudo_word(rng) if rng.random() < _P_PSEUDO_BRAND else rng.choice(_BRAND_WORDS)


def _surname(rng: random.Random) -> str:
    return _pseudo_word(rng) if rng.random() < _P_PSEUDO_SURNAME else rng.choice(_LAST_NAMES)


_TOWN_FORMS = ("{} city", "port {}", "{} springs", "{} falls", "saint {}", "{}", "{}", "{} valley")


def _place(rng: random.Random) -> str:
    """A place: a curated country, region or city, or a generated town (``port tandis``)."""
    if rng.random() < _P_TOWN:
        return rng.choice(_TOWN_FORMS).format(_pseudo_word(rng))
    return rng.choice(_PLACES)


def _new_org(rng: random.Random) -> _Org:
    """A generated company: brand + suffix (most), place + suffix, or surname + suffix."""
    suffix = rng.choice(_ORG_SUFFIXES)
    products = (rng.choice(_PRODUCT_NOUNS), rng.choice(_PRODUCT_NOUNS))
    u = rng.random()
    if u < _P_GPE_ORG:
        place = _place(rng)
        return _Org(f"{place} {suffix}", f"{place} {suffix}", _brand(rng), products)
    if u < _P_GPE_ORG + _P_SURNAME_ORG:
        name = f"{_surname(rng)} {suffix}"
        return _Org(name, name, _brand(rng), products)
    brand = _brand(rng)
    if rng.random() < 0.12:
        return _Org(brand, brand, brand, products)  # a one-word company, like kestrel
    full = f"{brand} {suffix}"
    if rng.random() < 0.15:
        full += " " + rng.choice(_CORP_ENDINGS)
    return _Org(full, brand, brand, products)


@dataclass
class _Person:
    first: str
    last: str

    @property
    def full(self) -> str:
        return f"{self.first} {self.last}"


def _new_person(rng: random.Random) -> _Person:
    return _Person(rng.choice(_FIRST_NAMES), _surname(rng))


def _money(rng: random.Random) -> str:
    """A money amount; the letters that survive tokenisation are the unit and currency words."""
    u = rng.random()
    if u < _P_VANISH:
        return f"${rng.randrange(10, 999)},{rng.randrange(100, 999)}"
    x = rng.randrange(11, 9999) / 10
    amount = f"{x:.1f}" if rng.random() < 0.6 else f"{round(x)}"
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
    """A per-share amount: ``"25 cents"`` keeps ``cents``, ``"$0.25"`` vanishes (a dropped entity)."""
    cents = rng.randrange(5, 95)
    return f"{cents} cents" if rng.random() < 0.5 else f"${cents / 100:.2f}"


def _percent(rng: random.Random) -> str:
    u = rng.random()
    if u < _P_VANISH:
        return f"{rng.randrange(1, 40)}%"
    x = rng.randrange(1, 400) / 10
    amount = f"{x:.1f}" if rng.random() < 0.6 else f"{round(x) or 1}"
    if u < 0.9:
        return f"{amount} percent"
    return f"{amount} per cent"


def _bps(rng: random.Random) -> str:
    if rng.random() < 0.55:
        return f"{rng.randrange(10, 400)} basis points"
    return f"{rng.randrange(1, 50) / 10:.1f} percentage points"


class _Document:
    """The state of one document being generated: its company, people, period and the mentions so far."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.org = rng.choice(_FLAGSHIPS) if rng.random() < _P_FLAGSHIP else _new_org(rng)
        self.hq = _place(rng)
        self.sector = rng.choice(_SECTORS)
        self.ceo = _new_person(rng)
        self.cfo = _new_person(rng)
        self.year = rng.randrange(2015, 2027)
        self.quarter = rng.randrange(1, 5)
        self.rivals = [
            rng.choice(_FLAGSHIPS) if rng.random() < _P_FLAGSHIP else _new_org(rng)
            for _ in range(2)
        ]
        self.rivals = [r for r in self.rivals if r.full != self.org.full] or [_new_org(rng)]
        self.analyst = _new_person(rng)
        self.bank = _new_org(rng)
        self.mentioned: set[str] = set()  # membership only, never iterated
        self.dropped: Counter[str] = Counter()
        handlers: dict[str, Callable[[], tuple[str, str | None]]] = {
            "ORG": self._org,
            "CO": self._company,
            "ORGF": lambda: (self._once(self.org.full), "ORG"),
            "RIVAL": self._rival,
            "PARTNER": lambda: (_new_org(self.rng).full, "ORG"),
            "BANK": lambda: (self._bank_name(), "ORG"),
            "CEO": lambda: (self._person(self.ceo), "PERSON"),
            "CEO_FIRST": lambda: (self.ceo.first, "PERSON"),
            "CFO": lambda: (self._person(self.cfo), "PERSON"),
            "EXEC": lambda: (_new_person(self.rng).full, "PERSON"),
            "PERSON": lambda: (_new_person(self.rng).full, "PERSON"),
            "ANALYST": self._new_analyst,
            "ANALYST_FIRST": lambda: (self.analyst.first, "PERSON"),
            "HQ": lambda: (self.hq, "GPE"),
            "GPE": lambda: (_place(self.rng), "GPE"),
            "PRODUCT": self._product,
            "NEWPRODUCT": self._new_product,
            "SECTOR": lambda: (self.sector, "SECTOR"),
            "SECTOR2": lambda: (self.rng.choice(_SECTORS), "SECTOR"),
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
            return f"{bank.brand} {self.rng.choice(_BANK_SUFFIXES)}"
        return bank.full

    def _person(self, person: _Person) -> str:
        if person.full not in self.mentioned:
            return self._once(person.full)
        return person.full if self.rng.random() < 0.5 else person.last

    def _new_analyst(self) -> tuple[str, str | None]:
        self.analyst = _new_person(self.rng)
        self.bank = _new_org(self.rng)
        return self.analyst.full, "PERSON"

    def _product(self) -> tuple[str, str | None]:
        org = self.org
        return f"the {org.brand} {self.rng.choice(org.products)}", "PRODUCT"

    def _new_product(self) -> tuple[str, str | None]:
        rng = self.rng
        line = self.org.brand if rng.random() < 0.5 else _brand(rng)
        return f"the {line} {rng.choice(_PRODUCT_NOUNS)}", "PRODUCT"

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
        templates = _T[group]
        weights = _template_weights(len(templates))
        pieces = templates[bisect.bisect(weights, self.rng.random() * weights[-1])]
        tokens: list[str] = []
        spans: list[Span] = []
        surface: list[str] = []
        for literal, slot in pieces:
            surface.append(literal)
            tokens.extend(tokenize(literal))
            if slot is None:
                continue
            if slot.islower():
                text, label = self.rng.choice(_WORDS[slot]), None
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


def _generate_document(seed: int, index: int) -> FinanceDocument:
    rng = random.Random(f"crfhead-finance:{seed}:{index}")
    doc = _Document(rng)
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


def generate_finance_documents(seed: int, n_docs: int) -> list[FinanceDocument]:
    """The first ``n_docs`` documents of corpus run ``seed``, with surface text and drop counts.

    Args:
        seed: the corpus run.
        n_docs: how many documents (document ``i`` is the same whatever ``n_docs`` is).

    Returns:
        The documents, in order.

    Raises:
        ValueError: ``n_docs`` is negative.
    """
    if n_docs < 0:
        raise ValueError(f"n_docs must be >= 0, got {n_docs}")
    return [_generate_document(seed, i) for i in range(n_docs)]


def generate_documents(seed: int, n_docs: int) -> list[list[Sentence]]:
    """The first ``n_docs`` documents of corpus run ``seed``, each a list of tagged sentences.

    Args:
        seed: the corpus run; the same seed gives the same documents on any machine.
        n_docs: how many documents; ``generate_documents(s, m)[:n] == generate_documents(s, n)``.

    Returns:
        One list of :class:`~crfhead.data.sentence.Sentence` per document (6 to 15 sentences, BIO
        tags over :data:`LABELS`, ``doc_id`` ``"finance-<seed>-<i>"``, ``id`` ``"<doc_id>:<n>"``).
    """
    return [d.sentences for d in generate_finance_documents(seed, n_docs)]


def generate_corpus(seed: int, n_docs: int) -> list[Sentence]:
    """The sentences of :func:`generate_documents` ``(seed, n_docs)``, flattened in order."""
    return [s for doc in generate_documents(seed, n_docs) for s in doc]


# --------------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------------


def _flatten(items: Iterable[Sentence | Sequence[Sentence]]) -> list[Sentence]:
    out: list[Sentence] = []
    for item in items:
        if isinstance(item, Sentence):
            out.append(item)
        else:
            out.extend(item)
    return out


def unseen_rate(
    train: Iterable[Sentence | Sequence[Sentence]], test: Iterable[Sentence | Sequence[Sentence]]
) -> float:
    """The fraction of test tokens (occurrences) whose word never occurs in the training text.

    Args:
        train: training sentences, or documents (lists of sentences).
        test: test sentences or documents.

    Returns:
        A fraction in ``[0, 1]`` (0 for an empty test set).
    """
    vocab = {tok for s in _flatten(train) for tok in s.tokens}
    total = unseen = 0
    for s in _flatten(test):
        total += len(s.tokens)
        unseen += sum(tok not in vocab for tok in s.tokens)
    return unseen / total if total else 0.0


def unseen_rates(
    train_seed: int = 0,
    test_seed: int = 1,
    sizes: Sequence[int] = (3, 10, 30),
    test_docs: int = 200,
) -> dict[int, float]:
    """:func:`unseen_rate` of the first ``n`` documents of run ``train_seed``, for each ``n`` in ``sizes``.

    Args:
        train_seed: the training run.
        test_seed: the test run (should differ from ``train_seed``).
        sizes: training sizes in documents.
        test_docs: test size in documents.

    Returns:
        ``{n: rate}`` in the order of ``sizes``.
    """
    train = generate_documents(train_seed, max(sizes, default=0))
    test = generate_corpus(test_seed, test_docs)
    return {n: unseen_rate(train[:n], test) for n in sizes}


def _split_statistics(sentences: Sequence[Sentence]) -> dict[str, Any]:
    entities: Counter[str] = Counter()
    multi: Counter[str] = Counter()
    entity_tokens = 0
    for s in sentences:
        for span in tags_to_spans(s.tags or ["O"] * len(s), "BIO"):
            entities[span.label] += 1
            multi[span.label] += span.end > span.start
            entity_tokens += span.end - span.start + 1
    types = [*ENTITY_TYPES, *sorted(set(entities) - set(ENTITY_TYPES))]
    tokens = sum(len(s) for s in sentences)
    documents = len({s.doc_id for s in sentences})
    return {
        "documents": documents,
        "sentences": len(sentences),
        "tokens": tokens,
        "tokens_per_document": tokens / documents if documents else 0.0,
        "tokens_per_sentence": tokens / len(sentences) if sentences else 0.0,
        "vocabulary": len({tok for s in sentences for tok in s.tokens}),
        "entity_tokens": entity_tokens,
        "entities": {t: entities[t] for t in types},
        "multi_token_entities": {t: multi[t] for t in types},
    }


def corpus_statistics(train: Sequence[Sentence], test: Sequence[Sentence]) -> dict[str, Any]:
    """Sizes, entity counts and the unseen-token rate of a train/test pair.

    Args:
        train: training sentences.
        test: test sentences.

    Returns:
        ``{"train": {...}, "test": {...}, "unseen_rate": r, "unseen_type_rate": q}``. Each split has
        ``documents`` (distinct ``doc_id``), ``sentences``, ``tokens``, ``tokens_per_document``,
        ``tokens_per_sentence``, ``vocabulary``, ``entity_tokens``, ``entities`` and
        ``multi_token_entities`` (per type, in :data:`ENTITY_TYPES` order). ``unseen_rate`` is the
        fraction of test tokens never seen in training (:func:`unseen_rate`), ``unseen_type_rate``
        the fraction of test word types.
    """
    train_vocab = {tok for s in train for tok in s.tokens}
    test_vocab = {tok for s in test for tok in s.tokens}
    return {
        "train": _split_statistics(train),
        "test": _split_statistics(test),
        "unseen_rate": unseen_rate(train, test),
        "unseen_type_rate": len(test_vocab - train_vocab) / len(test_vocab) if test_vocab else 0.0,
    }
