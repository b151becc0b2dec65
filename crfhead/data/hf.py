"""Round trip between crfhead sentences and a HuggingFace ``datasets.Dataset`` (local, offline).

A dataset has the columns ``tokens``, ``tags`` (strings; ``None`` for unlabelled sentences),
``doc_id``, ``id`` and one list column per extra source column, so users can use ``datasets`` maps,
caching and splits and come back with :func:`from_dataset`.

:func:`from_dataset` also reads the Hub's convention for NER datasets (``conll2003``, ``wnut_17``...):
the tags in ``ner_tags`` as integer ``ClassLabel`` ids, mapped back to their names with the feature's
``names`` (as are other ``ClassLabel`` columns such as ``pos_tags``). Integers without a
``ClassLabel`` are refused: nothing says which tag an id means.
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


def _class_names(feature: Any) -> list[str] | None:
    """The ``names`` of a ``ClassLabel`` feature, or of the ``ClassLabel`` inside a list feature."""
    while feature is not None:
        names = getattr(feature, "names", None)
        if isinstance(names, list) and hasattr(feature, "int2str"):
            return [str(n) for n in names]
        feature = getattr(feature, "feature", None)  # List / LargeList / Sequence
    return None


def _strings(values: Sequence[Any], names: list[str] | None, column: str, row: int) -> list[str]:
    """A row's column as strings: ``ClassLabel`` ids mapped to their names, strings kept."""
    if names is None:
        if any(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise ValueError(
                f"column {column!r} of row {row} holds integer ids but is not a ClassLabel "
                "feature, so its names are unknown: cast it with "
                "dataset.cast_column(column, datasets.Sequence(datasets.ClassLabel(names=[...])))"
            )
        return [str(v) for v in values]
    out = []
    for v in values:
        if not (isinstance(v, int) and 0 <= v < len(names)):
            raise ValueError(
                f"column {column!r} of row {row}: {v!r} is not a ClassLabel id in "
                f"[0, {len(names)}) (names {names})"
            )
        out.append(names[v])
    return out


def from_dataset(dataset: datasets.Dataset, tags: str | None = None) -> list[Sentence]:
    """Sentences from a dataset made by :func:`to_dataset`, or any with ``tokens`` and tags.

    Args:
        dataset: a ``datasets.Dataset`` with a ``tokens`` column.
        tags: the tag column; default ``tags``, else the Hub's ``ner_tags``, else none (unlabelled).
            Its values are strings or ``ClassLabel`` ids (mapped to the feature's ``names``).

    Returns:
        One :class:`~crfhead.data.Sentence` per row; every other list column (``pos_tags``...) becomes
        one of its ``columns``, ``ClassLabel`` ids mapped to names as well.

    Raises:
        ValueError: without a ``tokens`` column, for a ``tags`` column that does not exist, or for
            integer tags that are not ``ClassLabel`` ids (the row and column named).
    """
    columns = list(dataset.column_names)
    if "tokens" not in columns:
        raise ValueError(f"dataset has no 'tokens' column (columns: {columns})")
    if tags is None:
        tags = next((c for c in ("tags", "ner_tags") if c in columns), None)
    elif tags not in columns:
        raise ValueError(f"dataset has no tag column {tags!r} (columns: {columns})")
    features = dataset.features
    names = {c: _class_names(features[c]) for c in columns}
    extra = [c for c in columns if c not in (*_FIXED, tags)]
    out = []
    for i, row in enumerate(dataset):
        gold = None
        if tags is not None and row[tags] is not None:
            gold = _strings(row[tags], names[tags], tags, i)
        out.append(
            Sentence(
                tokens=[str(t) for t in row["tokens"]],
                tags=gold,
                doc_id=row.get("doc_id"),
                id=None if row.get("id") is None else str(row["id"]),
                columns={
                    c: _strings(row[c], names[c], c, i) for c in extra if isinstance(row[c], list)
                },
            )
        )
    return out
