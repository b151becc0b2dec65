"""Strings ↔ ids for words, characters and features: ``<pad>`` is 0 and ``<unk>`` is 1."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

__all__ = ["Vocab"]


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
        return [self.id(x) for x in items]

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
