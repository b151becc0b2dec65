"""Partial labels (issue 29): positions whose gold is a *set* of labels, or any label.

Representation (decided here, used by every reader, the collator, training and scoring):

* :attr:`Sentence.allowed <crfhead.data.sentence.Sentence.allowed>` is ``None`` for a fully
  labelled sentence (the common case: nothing changes for it), else one entry per token: ``None``
  -- the single known tag in ``Sentence.tags`` -- or a tuple of labels the token may take, with
  :data:`ANY` (``("*",)``) meaning every label of the model's vocabulary.
* ``Sentence.tags[i]`` at a partial position holds the placeholder :data:`PLACEHOLDER` (``"O"``) so
  code that only reads ``tags`` keeps working; it is *not* gold. :func:`gold_or_none` gives the gold
  with those positions as ``None`` (what the metrics take).
* In a CoNLL tag cell, ``B-PER|B-ORG`` is a set and ``*`` is any label (:func:`parse_cell`).

Scheme conversion of partial sentences (:func:`convert_partial`) is exact for BIO (IOB2) → BIOES
(BIOUL), because BIOES → BIO is position-wise: the BIOES labellings consistent with the converted
sets are exactly the conversions of the BIO labellings consistent with the original sets (the head
keeps only valid paths). Other conversions of partial sentences are refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from crfhead.data.sentence import ANY, PLACEHOLDER, Sentence, gold_or_none
from crfhead.schemes import canonical_scheme, convert_tags, split_label

__all__ = [
    "ANY",
    "PLACEHOLDER",
    "convert_partial",
    "gold_or_none",
    "mark_unknown",
    "parse_cell",
]


def parse_cell(cell: str, scheme: str) -> tuple[str, ...] | None:
    """The label set of a tag cell: ``None`` for a single label, :data:`ANY` for ``*``.

    Raises:
        ValueError: an empty member (``B-PER|``, ``|``), ``*`` inside a set, or a member outside
            ``scheme`` (the caller adds file and line).
    """
    if cell == "*":
        return ANY
    if "|" not in cell:
        split_label(cell, scheme)  # validates
        return None
    members = cell.split("|")
    out: list[str] = []
    for m in members:
        if not m:
            raise ValueError(f"label set {cell!r} has an empty member")
        if m == "*":
            raise ValueError(f"label set {cell!r}: '*' (any label) cannot be part of a set")
        split_label(m, scheme)
        if m not in out:
            out.append(m)
    return tuple(out)


def mark_unknown(sentences: Iterable[Sentence], unknown: Sequence[str]) -> int:
    """Make every known position tagged with one of ``unknown`` an any-label position, in place.

    Returns the number of positions changed.
    """
    unknown_set = set(unknown)
    changed = 0
    for s in sentences:
        if s.tags is None:
            continue
        allowed: list[tuple[str, ...] | None] = (
            list(s.allowed) if s.allowed is not None else [None] * len(s)
        )
        hit = False
        for i, t in enumerate(s.tags):
            if allowed[i] is None and t in unknown_set:
                allowed[i] = ANY
                s.tags[i] = PLACEHOLDER
                hit = True
                changed += 1
        if hit:
            s.allowed = allowed
    return changed


def _to_bioes(label: str, nxt: Sequence[str] | None, target: str) -> set[str]:
    """The BIOES (``target``) labels a BIO ``label`` can become, given the next position's labels.

    ``nxt``: the next position's possible BIO labels (``None``: any label; ``[]``: none, the end).
    """
    role, typ = split_label(label, "BIO")
    if typ is None:
        return {"O"}
    letters = {"BIOES": ("B", "I", "E", "S"), "BIOUL": ("B", "I", "L", "U")}[target]
    b, i, e, s = (f"{x}-{typ}" for x in letters)
    cont, stop = (b, s) if role == "B" else (i, e)
    if nxt is None:
        return {cont, stop}
    out: set[str] = set()
    for n in nxt or ["O"]:
        out.add(cont if n == f"I-{typ}" else stop)
    return out


def convert_partial(s: Sentence, source: str, target: str) -> None:
    """Convert a sentence's tags (and label sets) from ``source`` to ``target``, in place.

    Raises:
        ValueError: a partial sentence and a conversion other than BIO → BIOES/BIOUL (or the
            identity), naming the sentence.
    """
    source, target = canonical_scheme(source), canonical_scheme(target)
    if s.tags is None or source == target:
        return
    if s.allowed is None or all(a is None for a in s.allowed):
        s.tags = convert_tags(s.tags, source, target)
        s.allowed = None
        return
    if source != "BIO" or target not in ("BIOES", "BIOUL"):
        raise ValueError(
            f"sentence {s.id or '?'} has partial labels: converting them from {source} to "
            f"{target} is not supported (exact only for BIO/IOB2 -> BIOES/BIOUL); train in "
            f"{source} or give fully labelled data"
        )
    sets: list[tuple[str, ...] | None] = [
        (t,) if a is None else (None if a == ANY else a)
        for t, a in zip(s.tags, s.allowed, strict=True)
    ]
    new_tags: list[str] = []
    new_allowed: list[tuple[str, ...] | None] = []
    for pos, cur in enumerate(sets):
        nxt: Sequence[str] | None = sets[pos + 1] if pos + 1 < len(sets) else []
        if cur is None:  # any label stays any label
            new_tags.append(PLACEHOLDER)
            new_allowed.append(ANY)
            continue
        out: set[str] = set()
        for label in cur:
            out |= _to_bioes(label, nxt, target)
        if len(out) == 1:
            new_tags.append(next(iter(out)))
            new_allowed.append(None)
        else:
            new_tags.append(PLACEHOLDER)
            new_allowed.append(tuple(sorted(out)))
    s.tags = new_tags
    s.allowed = new_allowed if any(a is not None for a in new_allowed) else None
