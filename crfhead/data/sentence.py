"""Sentences, label vocabularies and read reports: the data types every reader returns.

* :class:`Sentence` -- tokens, tags (``None`` for unlabelled text), an optional document id (the
  higher-order decoders group sentences by document) and any extra columns of the source file.
* :class:`LabelVocab` -- the label list of a model with its tagging scheme; it travels inside
  checkpoints (:meth:`LabelVocab.to_dict` / :meth:`LabelVocab.from_dict`) so a saved model decodes to
  strings on its own.
* :class:`ReadReport` -- what a reader read, repaired and skipped, with examples: nothing is lost
  silently.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from crfhead.schemes import (
    canonical_scheme,
    entity_types,
    has_valid_path,
    labels_for,
    repair_tags,
)

__all__ = [
    "ANY",
    "PLACEHOLDER",
    "LabelVocab",
    "ReadReport",
    "Sentence",
    "gold_or_none",
    "repair_sentences",
]

ANY: tuple[str, ...] = ("*",)
"""A :attr:`Sentence.allowed` entry meaning "any label of the vocabulary" (a ``*`` CoNLL cell)."""

PLACEHOLDER = "O"
"""What ``Sentence.tags`` holds at a partial position (not gold: see :attr:`Sentence.allowed`)."""


@dataclass
class Sentence:
    """One sentence.

    Attributes:
        tokens: the words.
        tags: one tag per token, or ``None`` for unlabelled text.
        doc_id: the document the sentence belongs to, if known.
        columns: extra per-token columns of the source (e.g. ``{"pos": [...], "chunk": [...]}``).
        id: an identifier from the source (tweet id, ``file:line``), if any.
        allowed: partial labels (issue 29, :mod:`crfhead.data.partial`): ``None`` when every
            position has its single gold tag in ``tags``; else one entry per token, ``None`` (the
            tag in ``tags`` is gold) or the tuple of labels the token may take (:data:`ANY`,
            ``("*",)``: any label). At a partial position ``tags`` holds :data:`PLACEHOLDER`.
    """

    tokens: list[str]
    tags: list[str] | None = None
    doc_id: str | None = None
    columns: dict[str, list[str]] = field(default_factory=dict)
    id: str | None = None
    allowed: list[tuple[str, ...] | None] | None = None

    def __post_init__(self) -> None:
        if self.tags is not None and len(self.tags) != len(self.tokens):
            raise ValueError(
                f"sentence {self.id or ''} has {len(self.tokens)} tokens but {len(self.tags)} tags"
            )
        if self.allowed is not None:
            if self.tags is None:
                raise ValueError(f"sentence {self.id or ''} has label sets but no tags")
            if len(self.allowed) != len(self.tokens):
                raise ValueError(
                    f"sentence {self.id or ''} has {len(self.tokens)} tokens but "
                    f"{len(self.allowed)} label-set entries"
                )
        if not self.columns:  # the common case: nothing to compare (and no view object)
            return
        for name, col in self.columns.items():
            if len(col) != len(self.tokens):
                raise ValueError(
                    f"column {name!r} of sentence {self.id or ''} has {len(col)} entries for "
                    f"{len(self.tokens)} tokens"
                )

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def is_partial(self) -> bool:
        """Whether some position's gold is a set of labels (or any label)."""
        return self.allowed is not None and any(a is not None for a in self.allowed)


def gold_or_none(s: Sentence) -> list[str | None] | None:
    """The sentence's gold tags with partial positions as ``None`` (``None`` if unlabelled)."""
    if s.tags is None:
        return None
    if s.allowed is None:
        return list(s.tags)
    return [t if a is None else None for t, a in zip(s.tags, s.allowed, strict=True)]


@dataclass
class ReadReport:
    """What a reader did: counts and a few examples of everything it changed or skipped.

    Attributes:
        source: the file or corpus read.
        sentences: sentences returned.
        tokens: tokens returned.
        documents: documents seen (``-DOCSTART-`` or equivalent).
        repaired_sentences: sentences whose tag sequence was invalid in the scheme and was repaired.
        repaired_tags: tags changed by those repairs.
        skipped_empty: empty sentences skipped.
        notes: other counted events (e.g. unmatched mentions, normalised types), by name.
        examples: up to ``max_examples`` examples per event name.
    """

    source: str
    sentences: int = 0
    tokens: int = 0
    documents: int = 0
    repaired_sentences: int = 0
    repaired_tags: int = 0
    skipped_empty: int = 0
    notes: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    max_examples: int = 5

    def count(self, event: str, example: str | None = None, n: int = 1) -> None:
        """Count ``n`` occurrences of ``event``, keeping ``example`` if there is room."""
        self.notes[event] += n
        if example is not None:
            self.example(event, example)

    def example(self, event: str, text: str) -> None:
        """Keep ``text`` as an example of ``event`` if fewer than ``max_examples`` are kept."""
        bucket = self.examples.setdefault(event, [])
        if len(bucket) < self.max_examples:
            bucket.append(text)

    def summary(self) -> str:
        """One paragraph for logs."""
        parts = [
            f"{self.source}: {self.sentences} sentences, {self.tokens} tokens",
            f"{self.documents} documents" if self.documents else "",
            f"{self.repaired_sentences} sentences repaired ({self.repaired_tags} tags)"
            if self.repaired_sentences
            else "",
            f"{self.skipped_empty} empty sentences skipped" if self.skipped_empty else "",
        ]
        parts += [f"{n} {event}" for event, n in sorted(self.notes.items())]
        text = ", ".join(p for p in parts if p)
        for event, examples in sorted(self.examples.items()):
            text += f"\n  {event}: " + "; ".join(examples)
        return text

    def warn_if_changed(self) -> None:
        """Emit one warning if anything was repaired, skipped or noted."""
        if self.repaired_sentences or self.skipped_empty or self.notes:
            warnings.warn(self.summary(), stacklevel=3)


def repair_sentences(
    sentences: Iterable[Sentence], scheme: str, report: ReadReport
) -> list[Sentence]:
    """Repair invalid tag sequences in place (counted in ``report``); returns the sentences."""
    out = []
    for s in sentences:
        if s.is_partial:
            # Repairing around a set would guess the unknown positions: a partial sentence is kept
            # as read (the head only ever scores valid paths through the sets), and refused here,
            # by its id, when no valid path goes through them (training would fail on its batch).
            assert s.tags is not None and s.allowed is not None
            sets = [
                (t,) if a is None else (None if a == ANY else a)
                for t, a in zip(s.tags, s.allowed, strict=True)
            ]
            if not has_valid_path(sets, scheme):
                cells = " ".join(
                    t if a is None else ("*" if a == ANY else "|".join(a))
                    for t, a in zip(s.tags, s.allowed, strict=True)
                )
                raise ValueError(
                    f"sentence {s.id or '?'}: no tag sequence valid in {scheme} goes through its "
                    f"labels ({cells}); fix the known tags around the sets"
                )
            report.count("partial sentences (not repaired)")
        elif s.tags is not None:
            fixed, changed = repair_tags(s.tags, scheme)
            if changed:
                report.repaired_sentences += 1
                report.repaired_tags += changed
                report.example(
                    "repaired", f"{s.id or '?'}: {' '.join(s.tags)} -> {' '.join(fixed)}"
                )
                s.tags = fixed
        out.append(s)
    return out


class LabelVocab:
    """Labels ↔ ids for one tagging scheme.

    Args:
        labels: the label list (``O`` first by convention).
        scheme: its tagging scheme (validated: every label must belong to it).
    """

    def __init__(self, labels: Sequence[str], scheme: str) -> None:
        self.scheme = canonical_scheme(scheme)
        entity_types(labels, self.scheme)  # validates every label
        if len(set(labels)) != len(labels):
            raise ValueError(f"duplicate labels in {list(labels)}")
        self.labels = list(labels)
        self._index = {label: i for i, label in enumerate(self.labels)}

    @classmethod
    def from_types(cls, types: Sequence[str], scheme: str) -> LabelVocab:
        """Every label of ``scheme`` over the entity ``types``."""
        return cls(labels_for(types, scheme), scheme)

    @classmethod
    def from_sentences(cls, sentences: Iterable[Sentence], scheme: str) -> LabelVocab:
        """Every label of ``scheme`` over the entity types seen in ``sentences`` (sorted)."""
        types: set[str] = set()
        for s in sentences:
            if s.tags is not None:
                types.update(entity_types(s.tags, scheme))
            for a in s.allowed or ():
                if a is not None and a != ANY:
                    types.update(entity_types(a, scheme))
        return cls.from_types(sorted(types), scheme)

    def __len__(self) -> int:
        return len(self.labels)

    def __contains__(self, label: object) -> bool:
        return label in self._index

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, LabelVocab)
            and other.labels == self.labels
            and other.scheme == self.scheme
        )

    def __hash__(self) -> int:
        return hash((tuple(self.labels), self.scheme))

    def __repr__(self) -> str:
        return f"LabelVocab({self.labels!r}, scheme={self.scheme!r})"

    def encode(self, tags: Sequence[str]) -> list[int]:
        """Tag ids; an unknown tag raises ``ValueError`` naming it."""
        try:
            return [self._index[t] for t in tags]
        except KeyError as err:
            raise ValueError(
                f"unknown tag {err.args[0]!r}: not among the {len(self)} labels "
                f"{self.labels} of this {self.scheme} vocabulary"
            ) from None

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tags of ids (negative ids, i.e. masked positions, are dropped)."""
        return [self.labels[i] for i in ids if i >= 0]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form, stored in checkpoints."""
        return {"labels": list(self.labels), "scheme": self.scheme}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabelVocab:
        """Inverse of :meth:`to_dict`."""
        return cls(data["labels"], data["scheme"])
