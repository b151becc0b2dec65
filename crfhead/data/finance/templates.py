"""The sentence templates of the synthetic finance corpus, and their compilation into pieces.

A template is a sentence with slots: ``{UPPER}`` slots are entities (or entity-like numbers) that
the generator fills and tags, ``{lower}`` slots are filler words (tagged ``O``) drawn from the
lexicon's ``filler`` lists. No literal text contains a digit, ``million``, ``billion``, ``percent``
or a ``the`` that an entity slot follows directly, so those words occur only inside the entities
the generator writes. Within a group the first templates are the common ones (the generator
weights them by rank), so the order of each tuple is part of the corpus.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TypeAlias

__all__ = ["TEMPLATES", "Piece", "Template", "compile_templates"]

Piece: TypeAlias = tuple[str, str | None]
"""A literal and the slot that follows it (``None`` after a template's last literal)."""

Template: TypeAlias = tuple[Piece, ...]
"""A compiled template: its pieces, in order."""

_SLOT = re.compile(r"\{(\w+)\}")

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


def compile_templates(templates: Sequence[str]) -> tuple[Template, ...]:
    """Split each template into ``(literal, slot)`` pieces (``slot`` ``None`` after the last).

    Args:
        templates: template strings, ``{name}`` marking a slot.

    Returns:
        One :data:`Template` per string, in order.
    """
    out = []
    for template in templates:
        pieces: list[Piece] = []
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

TEMPLATES: Mapping[str, tuple[Template, ...]] = MappingProxyType(
    {
        name: compile_templates(templates)
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
)
"""The compiled templates of each sentence group (``"filing_body"``, ``"call_question"``, ...)."""
