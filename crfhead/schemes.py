"""Tagging schemes, their allowed transitions, conversion between schemes, and repair of invalid tags.

Schemes (Ramshaw & Marcus 1995; Sang & Veenstra 1999; Ratinov & Roth 2009):

* ``IO``    -- ``I-X`` inside an entity, ``O`` outside; adjacent same-type entities merge.
* ``BIO``   -- IOB2: every entity opens with ``B-X``; ``I-X`` only continues an ``X`` entity.
* ``IOB1``  -- entities open with ``I-X``; ``B-X`` only separates two adjacent ``X`` entities.
* ``BIOES`` -- ``B``egin, ``I``nside, ``E``nd, ``S``ingle; aliases ``IOBES`` (same letters) and
  ``BIOUL`` (``U``nit for ``S``, ``L``ast for ``E``).

Labels are ``"O"`` or ``"<prefix>-<TYPE>"``. From a label list, :func:`allowed_transitions` gives the
bool ``(K, K)`` ``[from, to]`` matrix and the allowed start and end tags, which the heads apply to the
chain potentials (:func:`crfhead.engine.potentials.constrain`) for the partition function *and* for
decoding alike. :func:`tags_to_spans` reads any sequence leniently (conlleval rules: an ``I-X`` after
``O`` opens an entity), so :func:`repair_tags` and :func:`convert_tags` never lose an entity.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "SCHEMES",
    "Span",
    "allowed_transitions",
    "canonical_scheme",
    "convert_tags",
    "entity_types",
    "has_valid_path",
    "is_valid",
    "labels_for",
    "repair_tags",
    "spans_to_tags",
    "split_label",
    "tags_to_spans",
]

# Each scheme's own letters for the roles begin / inside / end / single.
_LETTERS: dict[str, dict[str, str]] = {
    "IO": {"I": "I"},
    "BIO": {"B": "B", "I": "I"},
    "IOB1": {"B": "B", "I": "I"},
    "BIOES": {"B": "B", "I": "I", "E": "E", "S": "S"},
    "BIOUL": {"B": "B", "I": "I", "E": "L", "S": "U"},
}
_ALIASES = {
    "IO": "IO",
    "BIO": "BIO",
    "IOB2": "BIO",
    "IOB1": "IOB1",
    "BIOES": "BIOES",
    "IOBES": "BIOES",
    "BIOUL": "BIOUL",
}
SCHEMES: tuple[str, ...] = tuple(_ALIASES)
"""Every accepted scheme name (aliases included)."""


@dataclass(frozen=True)
class Span:
    """An entity: tokens ``start`` to ``end`` inclusive, of type ``label``."""

    label: str
    start: int
    end: int


@functools.lru_cache(maxsize=256)
def canonical_scheme(scheme: str) -> str:
    """The canonical name of ``scheme`` (case-insensitive; ``IOB2`` → ``BIO``, ``IOBES`` → ``BIOES``)."""
    key = scheme.upper()
    if key not in _ALIASES:
        raise ValueError(f"unknown tagging scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")
    return _ALIASES[key]


@functools.lru_cache(maxsize=1 << 14)
def split_label(label: str, scheme: str) -> tuple[str, str | None]:
    """Split a label into its role (``"O"``, ``"B"``, ``"I"``, ``"E"``, ``"S"``) and entity type.

    Raises:
        ValueError: if the label is not of the form ``O`` or ``<prefix>-<TYPE>`` with a prefix of
            ``scheme``; the message names the label.
    """
    scheme = canonical_scheme(scheme)
    if label == "O":
        return "O", None
    prefix, sep, typ = label.partition("-")
    roles = {letter: role for role, letter in _LETTERS[scheme].items()}
    if not sep or not typ or prefix not in roles:
        allowed = ", ".join(f"{p}-X" for p in roles)
        raise ValueError(
            f"label {label!r} is not valid in the {scheme} scheme (expected O, {allowed})"
        )
    return roles[prefix], typ


def entity_types(labels: Sequence[str], scheme: str) -> list[str]:
    """The entity types of a label list, in order of first appearance."""
    seen: dict[str, None] = {}
    for label in labels:
        _, typ = split_label(label, scheme)
        if typ is not None:
            seen.setdefault(typ, None)
    return list(seen)


def labels_for(types: Sequence[str], scheme: str) -> list[str]:
    """The full label list of ``scheme`` over ``types``: ``O`` first, then each type's prefixes."""
    scheme = canonical_scheme(scheme)
    letters = _LETTERS[scheme]
    return ["O"] + [
        f"{letters[role]}-{typ}"
        for typ in types
        for role in ("B", "I", "E", "S")
        if role in letters
    ]


def _allowed(prev: tuple[str, str | None], cur: tuple[str, str | None], scheme: str) -> bool:
    (p_role, p_typ), (c_role, c_typ) = prev, cur
    if scheme == "IO":
        return True
    if scheme == "BIO":
        return c_role != "I" or (p_role in ("B", "I") and p_typ == c_typ)
    if scheme == "IOB1":
        return c_role != "B" or (p_role in ("B", "I") and p_typ == c_typ)
    # BIOES / BIOUL: inside an open entity only I-X or E-X may follow; outside, only O, B-*, S-*.
    if p_role in ("B", "I"):
        return c_role in ("I", "E") and c_typ == p_typ
    return c_role in ("O", "B", "S")


def allowed_transitions(labels: Sequence[str], scheme: str) -> tuple[Tensor, Tensor, Tensor]:
    """The structure a scheme imposes on a label list.

    Returns:
        ``(transitions, start, end)`` as bool tensors ``(K, K)`` ``[from, to]``, ``(K,)`` and ``(K,)``:
        True where the transition / first tag / last tag is allowed.
    """
    scheme = canonical_scheme(scheme)
    parsed = [split_label(label, scheme) for label in labels]
    K = len(parsed)
    trans = torch.tensor(
        [[_allowed(a, b, scheme) for b in parsed] for a in parsed], dtype=torch.bool
    )
    trans = trans.reshape(K, K)
    outside: tuple[str, str | None] = ("O", None)
    start = torch.tensor([_allowed(outside, b, scheme) for b in parsed], dtype=torch.bool)
    if scheme in ("BIOES", "BIOUL"):
        end = torch.tensor([role in ("O", "E", "S") for role, _ in parsed], dtype=torch.bool)
    else:
        end = torch.ones(K, dtype=torch.bool)
    return trans, start.reshape(K), end.reshape(K)


def has_valid_path(sets: Sequence[Sequence[str] | None], scheme: str) -> bool:
    """Whether some tag sequence valid in ``scheme`` takes a label of ``sets[t]`` at every ``t``.

    ``sets[t]`` is the labels position ``t`` may take, ``None`` for any label (of the types the
    sentence names, and ``O``). A reachability pass over the scheme's start, transition and end
    rules: ``O(T K^2)`` at worst, on label strings.
    """
    scheme = canonical_scheme(scheme)
    if not sets:
        return True
    named = [label for labels in sets if labels is not None for label in labels]
    everything = labels_for(entity_types(named, scheme), scheme)
    parsed = {label: split_label(label, scheme) for label in everything + named}
    outside: tuple[str, str | None] = ("O", None)

    def options(t: int) -> list[str]:
        labels = sets[t]
        return everything if labels is None else list(dict.fromkeys(labels))

    reach = {label for label in options(0) if _allowed(outside, parsed[label], scheme)}
    for t in range(1, len(sets)):
        if not reach:
            return False
        reach = {
            label
            for label in options(t)
            if any(_allowed(parsed[p], parsed[label], scheme) for p in reach)
        }
    if scheme in ("BIOES", "BIOUL"):
        reach = {label for label in reach if parsed[label][0] in ("O", "E", "S")}
    return bool(reach)


def tags_to_spans(tags: Sequence[str], scheme: str) -> list[Span]:
    """Entities of a tag sequence, read leniently as conlleval does.

    An entity opens at a begin/single tag, or at any tag whose type differs from the open entity's
    (so ``I-X`` after ``O`` opens one); it closes after an end/single tag, at ``O``, or where the next
    entity opens.
    """
    spans: list[Span] = []
    open_typ: str | None = None
    open_at = 0
    for t, label in enumerate(tags):
        role, typ = ("O", None) if label == "O" else split_label(label, scheme)
        if role == "O" or typ != open_typ or role in ("B", "S"):
            if open_typ is not None:
                spans.append(Span(open_typ, open_at, t - 1))
            open_typ, open_at = typ, t
        if role in ("E", "S") and open_typ is not None:
            spans.append(Span(open_typ, open_at, t))
            open_typ = None
    if open_typ is not None:
        spans.append(Span(open_typ, open_at, len(tags) - 1))
    return spans


def spans_to_tags(spans: Sequence[Span], length: int, scheme: str) -> list[str]:
    """Encode non-overlapping entities over ``length`` tokens in ``scheme``."""
    scheme = canonical_scheme(scheme)
    letters = _LETTERS[scheme]
    tags = ["O"] * length
    previous_end: dict[int, str] = {}
    for span in sorted(spans, key=lambda s: s.start):
        if span.start < 0 or span.end >= length or span.end < span.start:
            raise ValueError(f"span {span} does not fit in {length} tokens")
        if any(tag != "O" for tag in tags[span.start : span.end + 1]):
            raise ValueError(f"span {span} overlaps another span")
        n = span.end - span.start + 1
        if scheme in ("BIOES", "BIOUL"):
            roles = ["S"] if n == 1 else ["B"] + ["I"] * (n - 2) + ["E"]
        elif scheme == "BIO":
            roles = ["B"] + ["I"] * (n - 1)
        elif scheme == "IOB1":
            touching = previous_end.get(span.start - 1) == span.label
            roles = ["B" if touching else "I"] + ["I"] * (n - 1)
        else:
            roles = ["I"] * n
        for i, role in enumerate(roles):
            tags[span.start + i] = f"{letters[role]}-{span.label}"
        previous_end[span.end] = span.label
    return tags


def convert_tags(tags: Sequence[str], source: str, target: str) -> list[str]:
    """Re-encode a tag sequence from scheme ``source`` into scheme ``target`` (through its spans)."""
    return spans_to_tags(tags_to_spans(tags, source), len(tags), target)


@functools.lru_cache(maxsize=1 << 16)
def _follows(prev: str, cur: str, scheme: str) -> bool:
    """Whether label ``cur`` may follow label ``prev`` in the canonical ``scheme`` (a start follows ``O``)."""
    return _allowed(split_label(prev, scheme), split_label(cur, scheme), scheme)


def is_valid(tags: Sequence[str], scheme: str) -> bool:
    """Whether every start, transition and end of ``tags`` is allowed in ``scheme``.

    Raises:
        ValueError: a label of ``tags`` that is not of ``scheme`` (every label is read, whatever
            precedes it).
    """
    scheme = canonical_scheme(scheme)
    valid, prev = True, "O"
    for cur in tags:
        valid = _follows(prev, cur, scheme) and valid
        prev = cur
    return valid and (scheme not in ("BIOES", "BIOUL") or _follows(prev, "O", scheme))


def repair_tags(tags: Sequence[str], scheme: str) -> tuple[list[str], int]:
    """Make a tag sequence valid in ``scheme`` without losing an entity.

    The sequence is read leniently (:func:`tags_to_spans`) and re-encoded, so ``O I-PER`` becomes
    ``O B-PER`` in BIO and an unclosed ``B-ORG I-ORG`` becomes ``B-ORG E-ORG`` in BIOES.

    Returns:
        ``(repaired, changed)``: the valid sequence and how many tags changed (0 if it was valid).
    """
    fixed = convert_tags(tags, scheme, scheme)
    return fixed, sum(a != b for a, b in zip(tags, fixed, strict=True))
