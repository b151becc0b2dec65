"""Round trip between crfhead sentences and a HuggingFace ``datasets.Dataset`` (local, offline).

A dataset has the columns ``tokens``, ``tags`` (strings; ``None`` for unlabelled sentences),
``doc_id``, ``id`` and one list column per extra source column, so users can use ``datasets`` maps,
caching and splits and come back with :func:`from_dataset`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from crfhead.data.sentence import Sentence

if TYPE_CHECKING:
    import datasets

__all__ = ["from_dataset", "to_dataset"]

_FIXED = ("tokens", "tags", "doc_id", "id")


def to_dataset(sentences: Sequence[Sentence]) -> datasets.Dataset:
    """A ``datasets.Dataset`` with one row per sentence."""
    import datasets  # heavy: imported on use

    extra = sorted({key for s in sentences for key in s.columns})
    data: dict[str, list[Any]] = {
        "tokens": [s.tokens for s in sentences],
        "tags": [s.tags for s in sentences],
        "doc_id": [s.doc_id for s in sentences],
        "id": [s.id for s in sentences],
    }
    for key in extra:
        data[key] = [s.columns.get(key) for s in sentences]
    features = datasets.Features(
        {
            "tokens": datasets.Sequence(datasets.Value("string")),
            "tags": datasets.Sequence(datasets.Value("string")),
            "doc_id": datasets.Value("string"),
            "id": datasets.Value("string"),
            **{key: datasets.Sequence(datasets.Value("string")) for key in extra},
        }
    )
    return datasets.Dataset.from_dict(data, features=features)


def from_dataset(dataset: datasets.Dataset) -> list[Sentence]:
    """Sentences from a dataset made by :func:`to_dataset` (or any with ``tokens`` and ``tags``)."""
    if "tokens" not in dataset.column_names:
        raise ValueError(f"dataset has no 'tokens' column (columns: {dataset.column_names})")
    extra = [c for c in dataset.column_names if c not in _FIXED]
    out = []
    for row in dataset:
        out.append(
            Sentence(
                tokens=list(row["tokens"]),
                tags=list(row["tags"]) if row.get("tags") is not None else None,
                doc_id=row.get("doc_id"),
                id=row.get("id"),
                columns={c: list(row[c]) for c in extra if row[c] is not None},
            )
        )
    return out
