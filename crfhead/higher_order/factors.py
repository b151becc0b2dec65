"""Kinds of non-local factors a decoder adds to a group, each kind with one weight (Qian & Liu, TACL 2014).

A :class:`Factors` builds a group's patterns with unit scores and says which *kind* each belongs to, so
a decoder can weight kinds (one weight per entity type, and one for all-``O`` phrases) and count how
many of each hold in a labelling (the perceptron's feature counts):

* :class:`Consistency` -- :func:`~crfhead.higher_order.builders.consistency_patterns` (identical
  phrases of a tweet group take the same label subsequence; kinds: the entity types, then ``O``);
* :class:`SkipChain` -- :func:`~crfhead.higher_order.builders.skip_patterns` (identical capitalised
  tokens of a document take the same label; kinds: the entity types).

A pattern's unit score may be an integer above 1 when the builder merged duplicates: it is the
multiplicity the weight is multiplied by.
"""

from __future__ import annotations

from collections.abc import Sequence

from crfhead.higher_order.builders import READINGS, consistency_patterns, skip_patterns
from crfhead.higher_order.patterns import Pattern
from crfhead.schemes import entity_types

__all__ = ["Consistency", "Factors", "SkipChain"]


def _label_type(label: str) -> str:
    return "O" if label == "O" else label.partition("-")[2]


class Factors:
    """Base class: a group's patterns by kind. Subclasses define :meth:`kinds`, :meth:`build`, :meth:`kind`."""

    def kinds(self, labels: Sequence[str], scheme: str) -> list[str]:
        """The kinds, in a fixed order (one weight each)."""
        raise NotImplementedError

    def build(
        self, group: Sequence[Sequence[str]], labels: Sequence[str], scheme: str
    ) -> list[Pattern]:
        """The group's patterns, unit scores (the builder's)."""
        raise NotImplementedError

    def kind(self, pattern: Pattern, labels: Sequence[str]) -> str:
        """The kind a pattern of :meth:`build` belongs to."""
        raise NotImplementedError

    def patterns(
        self, group: Sequence[Sequence[str]], labels: Sequence[str], scheme: str
    ) -> list[list[Pattern]]:
        """The group's patterns (unit scores), one list per kind of :meth:`kinds`."""
        kinds = self.kinds(labels, scheme)
        where = {kind: i for i, kind in enumerate(kinds)}
        out: list[list[Pattern]] = [[] for _ in kinds]
        for p in self.build(group, labels, scheme):
            out[where[self.kind(p, labels)]].append(p)
        return out

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class Consistency(Factors):
    """Identical phrases of a group rewarded for the same entity reading or for all ``O``.

    Args:
        max_length: the longest phrase, in tokens.
        lowercase: compare tokens case-insensitively.
        min_sentences: groups of fewer sentences get no patterns (2: phrases are linked across
            tweets only, never within a tweet alone, as the seed's tweet groups are decoded).
        readings: ``"entities"`` (one entity reading or all ``O``) or ``"all"`` (the seed's
            feature: any label subsequence; see
            :func:`~crfhead.higher_order.builders.consistency_patterns`).
    """

    def __init__(
        self,
        max_length: int = 3,
        lowercase: bool = True,
        min_sentences: int = 1,
        readings: str = "entities",
    ) -> None:
        if max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {max_length}")
        if min_sentences < 1:
            raise ValueError(f"min_sentences must be >= 1, got {min_sentences}")
        self.max_length, self.lowercase = max_length, lowercase
        self.min_sentences = min_sentences
        if readings not in READINGS:
            raise ValueError(f"readings must be one of {READINGS}, got {readings!r}")
        self.readings = readings

    def kinds(self, labels: Sequence[str], scheme: str) -> list[str]:  # noqa: D102
        return [*entity_types(labels, scheme), "O"]

    def build(  # noqa: D102
        self, group: Sequence[Sequence[str]], labels: Sequence[str], scheme: str
    ) -> list[Pattern]:
        if len(group) < self.min_sentences:
            return []
        return consistency_patterns(
            group,
            labels,
            scheme,
            1.0,
            max_length=self.max_length,
            lowercase=self.lowercase,
            readings=self.readings,
        )

    def kind(self, pattern: Pattern, labels: Sequence[str]) -> str:  # noqa: D102
        # An entity reading has a non-O cell; the all-O reading has none. A reading of several
        # entities (readings="all") is of its first one's type.
        typed = [_label_type(labels[k]) for _, _, k in pattern.cells if labels[k] != "O"]
        return typed[0] if typed else "O"


class SkipChain(Factors):
    """Identical (capitalised) tokens of a document rewarded for taking the same entity label.

    Args:
        capitalised_only: link only tokens whose first character is uppercase.
    """

    def __init__(self, capitalised_only: bool = True) -> None:
        self.capitalised_only = capitalised_only

    def kinds(self, labels: Sequence[str], scheme: str) -> list[str]:  # noqa: D102
        return list(entity_types(labels, scheme))

    def build(  # noqa: D102
        self, group: Sequence[Sequence[str]], labels: Sequence[str], scheme: str
    ) -> list[Pattern]:
        return skip_patterns(group, labels, 1.0, capitalised_only=self.capitalised_only)

    def kind(self, pattern: Pattern, labels: Sequence[str]) -> str:  # noqa: D102
        return _label_type(labels[pattern.cells[0][2]])
