"""What the user already knows about a text, as chain constraints: pinned spans and forbidden labels.

``TextTagger.tag(text, spans=[(start, end, label)], forbid=[...])`` conditions decoding and every
probability on this knowledge. This module turns it into what the head's chain takes: ``allowed``
``(n, K)`` bool (the labels each token may take; :func:`crfhead.engine.potentials.restrict`) and,
for IOB1 only, banned edges (a pair of tags on consecutive tokens that a per-token set cannot
exclude), applied as ``-inf`` per-position transitions.

**Pinning a span** ``(start, end, label)`` (character offsets into the text, ``end`` exclusive;
``label`` an entity type such as ``"PER"``) means that its tokens form *exactly* one entity of that
type under the lenient reading of :func:`crfhead.schemes.tags_to_spans`: every labelling left has
that entity, so it comes out with probability 1 and its neighbours are conditioned on it. Per
scheme (roles ``B`` begin, ``I`` inside, ``E`` end, ``S`` single; BIOUL's ``L``/``U`` are ``E``/``S``):

* ``BIO`` (IOB2): first token ``B-X``, the others ``I-X``; the token after is not ``I-X``.
* ``IOB1``: first token ``I-X`` or ``B-X``, the others ``I-X``; the token after is not ``I-X``;
  and the edge from ``B-X``/``I-X`` into an ``I-X`` first token is banned, so the span opens
  whatever precedes it (``B-X`` exactly when an ``X`` entity ends just before, as IOB1 writes it).
* ``BIOES``/``BIOUL``: one token ``S-X``; else ``B-X``, ``I-X`` ... ``E-X``; nothing is asked of
  the neighbours (``S``/``E`` close the entity whatever follows, ``B``/``S`` open it whatever
  precedes).
* ``IO``: every token ``I-X`` and neither neighbour ``I-X``: a pinned span is a maximal run of
  ``I-X``. IO cannot write two adjacent entities of one type, so two pinned spans of one type that
  touch are refused.

These are the scheme's own encodings of the span (the only ones a constrained head allows); an
unconstrained head could also read ``O I-X`` as an entity opening at the ``I-X`` in BIO, which a pin
does not allow: a pin keeps the labellings that write the span as the scheme writes it.

**Forbidding** ``forbid=[...]``: a label (``"B-MISC"``, or ``"O"``) or an entity type (``"MISC"``:
all its labels) is excluded at every token; a triple ``(start, end, label)`` excludes it on the
tokens that overlap the character range ``[start, end)``. A pin and a forbid that leave a token no
label are refused here; a set of constraints that leaves no valid *path* (with the scheme's
transitions) is refused by the tagger, naming the text.

**Chains and windows.** A text's constraint is built once over its tokens
(:class:`TextConstraint`) and cut per chain (:meth:`TextConstraint.chain`): a pinned span that a
window's edge cuts is pinned in that window as the piece the window holds, also allowed to be
written as a whole entity there (at a window's first token ``B-X`` as well as ``I-X`` in BIO: the
window's chain starts there); the seams of the merge never cut a pinned span
(:func:`crfhead.inference.documents.merge_windows`), so the piece's tags are never the output.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from crfhead.data.tokenize import Token
from crfhead.schemes import Span, canonical_scheme, split_label

__all__ = [
    "ChainConstraint",
    "Forbid",
    "Pin",
    "TextConstraint",
    "text_constraint",
]

Pin = tuple[int, int, str]
"""A pinned span: ``(start, end, type)``, character offsets into the text, ``end`` exclusive."""

Forbid = str | tuple[int, int, str]
"""A forbidden label or entity type everywhere, or ``(start, end, label or type)`` on a range."""


@dataclass(frozen=True)
class ChainConstraint:
    """The constraint of one chain (a sentence or a window), as the head's chain takes it.

    Attributes:
        allowed: ``(n, K)`` bool, the labels each of the chain's ``n`` tokens may take.
        bans: ``(t, from, to)``: the edge into chain token ``t`` from tag ``from`` to tag ``to`` is
            forbidden (IOB1's pinned starts; empty in the other schemes).
    """

    allowed: Tensor
    bans: tuple[tuple[int, int, int], ...]


class _Sets:
    """``(K,)`` bool tag sets of one label list in one scheme (by type and canonical roles)."""

    def __init__(self, labels: Sequence[str], scheme: str) -> None:
        self.scheme = canonical_scheme(scheme)
        self.labels = list(labels)
        self.parsed = [split_label(label, self.scheme) for label in labels]
        self.types = sorted({typ for _, typ in self.parsed if typ is not None})

    def vec(self, typ: str, roles: frozenset[str]) -> Tensor:
        """``(K,)`` bool: the labels ``<role>-typ`` with ``role`` in ``roles``."""
        return torch.tensor([t == typ and r in roles for r, t in self.parsed], dtype=torch.bool)

    def ids(self, typ: str, roles: frozenset[str]) -> list[int]:
        """The indices of :meth:`vec`'s labels."""
        return [k for k, (r, t) in enumerate(self.parsed) if t == typ and r in roles]

    def roles(self, length: int) -> list[frozenset[str]]:
        """The roles each token of a pinned span of ``length`` tokens may take (module docstring)."""
        if self.scheme == "IO":
            return [frozenset("I")] * length
        if self.scheme in ("BIOES", "BIOUL"):
            if length == 1:
                return [frozenset("S")]
            return [frozenset("B"), *[frozenset("I")] * (length - 2), frozenset("E")]
        first = frozenset("B") if self.scheme == "BIO" else frozenset("BI")  # IOB1: with a ban
        return [first, *[frozenset("I")] * (length - 1)]

    @property
    def continues(self) -> frozenset[str]:
        """Roles of the token after a pinned span that would continue it (excluded there)."""
        return frozenset() if self.scheme in ("BIOES", "BIOUL") else frozenset("I")


@dataclass(frozen=True)
class TextConstraint:
    """The pins and forbids of one text over its tokens (build with :func:`text_constraint`).

    Attributes:
        pinned: the pinned spans as inclusive token indices, in text order.
        base: ``(n, K)`` bool, the labels the forbids leave each token.
        allowed: ``(n, K)`` bool, the labels each token may take (forbids and pins together).
    """

    pinned: tuple[Span, ...]
    base: Tensor
    allowed: Tensor
    _sets: _Sets | None

    def chain(self, tokens: range) -> ChainConstraint:
        """The constraint of the chain made of ``tokens`` (a sentence or a window of one).

        A pinned span that the chain's edges cut is pinned as the piece inside the chain, each
        token also allowed the role it has in that piece read as a whole entity (module docstring).
        """
        lo, hi = tokens.start, tokens.stop
        n = hi - lo
        allowed = self.base[lo:hi].clone()
        bans: list[tuple[int, int, int]] = []
        sets = self._sets
        for span in self.pinned:
            assert sets is not None  # a pin needs the scheme (text_constraint)
            if span.end < lo or span.start >= hi:
                # Only the neighbour conditions can reach into the chain.
                self._neighbours(allowed, span, lo, n, bans)
                continue
            full = sets.roles(span.end - span.start + 1)
            a, b = max(span.start, lo), min(span.end, hi - 1)
            cut = a != span.start or b != span.end
            piece = sets.roles(b - a + 1)
            for t in range(a, b + 1):
                roles = full[t - span.start] | (piece[t - a] if cut else frozenset())
                allowed[t - lo] &= sets.vec(span.label, roles)
            self._neighbours(allowed, span, lo, n, bans)
        return ChainConstraint(allowed, tuple(bans))

    def _neighbours(
        self, allowed: Tensor, span: Span, lo: int, n: int, bans: list[tuple[int, int, int]]
    ) -> None:
        """Apply a pinned span's conditions on the tokens just before and after it, where in the chain."""
        sets = self._sets
        assert sets is not None
        after, before = span.end + 1 - lo, span.start - 1 - lo
        if 0 <= after < n and sets.continues:
            allowed[after] &= ~sets.vec(span.label, sets.continues)
        if 0 <= before < n and sets.scheme == "IO":
            allowed[before] &= ~sets.vec(span.label, frozenset("I"))
        if sets.scheme == "IOB1" and before >= 0 and before + 1 < n:
            # The edge into the span's first token: an I-X there after B-X/I-X would continue the
            # entity before it, so IOB1 writes B-X there; the ban makes the choice exact.
            for f in sets.ids(span.label, frozenset("BI")):
                for i in sets.ids(span.label, frozenset("I")):
                    bans.append((before + 1, f, i))


def _offsets(item: object, what: str, where: str, length: int) -> tuple[int, int, str]:
    """``item`` checked as ``(start, end, label)`` with ``0 <= start < end <= length``."""
    if (
        not isinstance(item, tuple | list)
        or len(item) != 3
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in item[:2])
        or not isinstance(item[2], str)
    ):
        raise ValueError(
            f"{what} {item!r} of {where}: expected (start, end, label) with int character offsets "
            "(end exclusive) and a str label"
        )
    start, end, label = int(item[0]), int(item[1]), str(item[2])
    if not 0 <= start < end <= length:
        raise ValueError(
            f"{what} {item!r} of {where}: offsets outside the text or empty; need "
            f"0 <= start < end <= {length} (the text's length)"
        )
    return start, end, label


def _pin_tokens(item: Pin, tokens: Sequence[Token], text: str, where: str) -> tuple[int, int]:
    """The first and last token (inclusive) of a pinned character span.

    Raises:
        ValueError: the span cuts a token, or holds none (naming the span and the text).
    """
    start, end, _ = item
    for j, tok in enumerate(tokens):
        if tok.start < start < tok.end or tok.start < end < tok.end:
            raise ValueError(
                f"span {item!r} of {where} cuts token {j} {tok.text!r} at [{tok.start}, "
                f"{tok.end}): a pinned span must start and end on token boundaries"
            )
    inside = [j for j, tok in enumerate(tokens) if start <= tok.start and tok.end <= end]
    if not inside:
        raise ValueError(
            f"span {item!r} of {where} ({text[start:end]!r}) holds no token of the model's "
            "tokenizer"
        )
    return inside[0], inside[-1]


def text_constraint(
    text: str,
    tokens: Sequence[Token],
    labels: Sequence[str],
    scheme: str | None,
    spans: Sequence[Pin] | None = None,
    forbid: Sequence[Forbid] | None = None,
    *,
    index: int = 0,
) -> TextConstraint | None:
    """The constraint of one text, or ``None`` when it has neither pins nor forbids.

    Args:
        text: the text (offsets index it).
        tokens: its tokens, with their character offsets.
        labels: the ``K`` labels of the model.
        scheme: their tagging scheme (``None``: labels without one, which can forbid labels only).
        spans: the pinned spans ``(start, end, type)``.
        forbid: labels, types, or ``(start, end, label or type)`` ranges to exclude.
        index: the text's index, for error messages (``texts[index]``).

    Raises:
        ValueError: naming the span or forbid and the text: not a ``(start, end, label)`` triple,
            offsets outside the text, a span that cuts a token or holds none, overlapping spans,
            adjacent same-type spans in IO, an unknown type or label, or a token left no label.
    """
    if not spans and not forbid:
        return None
    where = f"texts[{index}]"
    K = len(labels)
    if scheme is None and spans:
        raise ValueError(
            f"spans= for {where}: the model's labels have no tagging scheme, so a span has no "
            "entity type to pin; forbid labels instead"
        )
    sets = _Sets(labels, scheme or "IO") if scheme is not None else None
    types = sets.types if sets is not None else []
    base = torch.ones(len(tokens), K, dtype=torch.bool)
    for item in forbid or []:
        if isinstance(item, str):
            label, rows = item, slice(None)
        else:
            start, end, label = _offsets(item, "forbid", where, len(text))
            hit = [j for j, t in enumerate(tokens) if t.start < end and t.end > start]
            rows = slice(hit[0], hit[-1] + 1) if hit else slice(0, 0)
        if label in labels:
            base[rows, labels.index(label)] = False
        elif sets is not None and label in types:
            base[rows] &= ~sets.vec(label, frozenset("BIES"))
        else:
            raise ValueError(
                f"forbid {item!r} of {where}: {label!r} is neither a label ({list(labels)}) nor an "
                f"entity type ({types})"
            )
    pinned: list[tuple[Span, Pin]] = []
    for item in spans or []:
        start, end, label = _offsets(item, "span", where, len(text))
        if label not in types:
            hint = ""
            if label in labels and sets is not None:
                hint = f"; give the type {split_label(label, sets.scheme)[1]!r}, not a label"
            raise ValueError(
                f"span {item!r} of {where}: {label!r} is not an entity type of the model "
                f"({types}){hint}"
            )
        first, last = _pin_tokens((start, end, label), tokens, text, where)
        pinned.append((Span(label, first, last), (start, end, label)))
    pinned.sort(key=lambda p: p[0].start)
    for (a, pa), (b, pb) in itertools.pairwise(pinned):
        if b.start <= a.end:
            raise ValueError(f"spans {pa!r} and {pb!r} of {where} overlap (they share a token)")
        if sets is not None and sets.scheme == "IO" and b.start == a.end + 1 and a.label == b.label:
            raise ValueError(
                f"spans {pa!r} and {pb!r} of {where} are adjacent and of one type {a.label!r}: the "
                "IO scheme cannot separate them (pin them as one span)"
            )
    constraint = TextConstraint(tuple(s for s, _ in pinned), base, base, sets)
    whole = constraint.chain(range(len(tokens))).allowed
    empty = (~whole.any(1)).nonzero()[:, 0].tolist()
    if empty:
        j = empty[0]
        raise ValueError(
            f"spans=/forbid= of {where} leave token {j} {tokens[j].text!r} at [{tokens[j].start}, "
            f"{tokens[j].end}) no label (forbid {list(forbid or [])}, spans {list(spans or [])})"
        )
    return TextConstraint(constraint.pinned, base, whole, constraint._sets)
