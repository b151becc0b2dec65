"""Strings ↔ ids for words, characters and features: ``<pad>`` is 0 and ``<unk>`` is 1."""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from torch import Tensor

__all__ = ["Vocab", "WordCoverage", "word_coverage"]


class Vocab:
    """Strings ↔ ids; id 0 is padding and id 1 the unknown symbol.

    Args:
        items: the known strings, in id order after ``<pad>`` and ``<unk>``.
        lower: lowercase strings before lookup.
    """

    PAD = "<pad>"
    UNK = "<unk>"

    def __init__(self, items: Iterable[str] = (), lower: bool = False) -> None:
        self.lower = lower
        self.itos: list[str] = [self.PAD, self.UNK]
        self.stoi: dict[str, int] = {self.PAD: 0, self.UNK: 1}
        for item in items:
            self.add(item)

    @classmethod
    def build(
        cls,
        items: Iterable[str],
        *,
        min_count: int = 1,
        max_size: int | None = None,
        lower: bool = False,
    ) -> Vocab:
        """The strings seen at least ``min_count`` times, most frequent first (ties: first seen)."""
        counts = Counter(x.lower() if lower else x for x in items)
        kept = [x for x, n in counts.most_common() if n >= min_count]
        return cls(kept[:max_size] if max_size is not None else kept, lower=lower)

    def add(self, item: str) -> int:
        """Add ``item`` if new; return its id."""
        key = item.lower() if self.lower else item
        if key not in self.stoi:
            self.stoi[key] = len(self.itos)
            self.itos.append(key)
        return self.stoi[key]

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, item: object) -> bool:
        return isinstance(item, str) and (item.lower() if self.lower else item) in self.stoi

    def id(self, item: str) -> int:
        """The id of ``item``, 1 (``<unk>``) if unknown."""
        return self.stoi.get(item.lower() if self.lower else item, 1)

    def encode(self, items: Iterable[str]) -> list[int]:
        """Ids of ``items`` (unknown → 1)."""
        get = self.stoi.get  # the collator's inner loop: one dict lookup an item, no method call
        if self.lower:
            return [get(x.lower(), 1) for x in items]
        return [get(x, 1) for x in items]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form, stored in checkpoints."""
        return {"items": self.itos[2:], "lower": self.lower}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Vocab:
        """Inverse of :meth:`to_dict`."""
        return cls(data["items"], lower=bool(data.get("lower", False)))

    @classmethod
    def size_of(cls, data: dict[str, Any]) -> int:
        """``len(Vocab.from_dict(data))`` without building it: the items plus ``<pad>`` and ``<unk>``."""
        return len(data["items"]) + 2


@runtime_checkable
class WordCoverage(Protocol):
    """What the data module asks of a word vector source (:class:`crfhead.encoders.WordVectors`).

    Attributes:
        extend_vocab: whether the words of the evaluation splits that the source covers join the
            word vocabulary.
    """

    extend_vocab: bool

    def covers(self, words: Sequence[str]) -> Tensor:
        """``(len(words),)`` bool: which words the source has a vector for."""
        ...


def word_coverage(spec: Any) -> WordCoverage:
    """A :class:`WordCoverage` source, or one built from its ``{"class_path", "init_args"}`` spec.

    The class is imported by name (the data layer does not import the encoders) and built by its own
    ``from_spec`` where it has one, so the spec is checked as the encoder checks it.

    Raises:
        ValueError: the spec names no importable class, or the object has no ``covers``.
    """
    if isinstance(spec, dict):
        module, _, name = str(spec.get("class_path", "")).rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError) as error:
            raise ValueError(
                f"word_vectors class_path {spec.get('class_path')!r} cannot be imported: {error}"
            ) from None
        build = getattr(cls, "from_spec", None)
        spec = build(spec) if callable(build) else cls(**dict(spec.get("init_args") or {}))
    if not isinstance(spec, WordCoverage):
        raise ValueError(
            f"word_vectors must say which words it covers (extend_vocab and covers(words)), got {spec!r}"
        )
    return spec
