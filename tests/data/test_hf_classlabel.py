"""``from_dataset`` reads the Hub's NER convention: ``ner_tags`` as integer ``ClassLabel`` ids (offline,
a tiny in-memory dataset)."""

from __future__ import annotations

import pytest

from crfhead.data import Sentence, from_dataset, to_dataset

datasets = pytest.importorskip("datasets")

NER = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def _hub_like(ner_tags: list[list[int]], *, class_label: bool = True) -> object:
    tag_feature = datasets.ClassLabel(names=NER) if class_label else datasets.Value("int64")
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "tokens": datasets.Sequence(datasets.Value("string")),
            "pos_tags": datasets.Sequence(datasets.ClassLabel(names=["NNP", "VBZ", "IN", "."])),
            "ner_tags": datasets.Sequence(tag_feature),
        }
    )
    return datasets.Dataset.from_dict(
        {
            "id": ["0", "1"],
            "tokens": [["Ada", "Lovelace", "visits", "Paris"], ["Hi", "."]],
            "pos_tags": [[0, 0, 1, 0], [0, 3]],
            "ner_tags": ner_tags,
        },
        features=features,
    )


def test_classlabel_ids_become_their_names() -> None:
    sentences = from_dataset(_hub_like([[1, 2, 0, 3], [0, 0]]))
    assert sentences[0] == Sentence(
        tokens=["Ada", "Lovelace", "visits", "Paris"],
        tags=["B-PER", "I-PER", "O", "B-LOC"],
        columns={"pos_tags": ["NNP", "NNP", "VBZ", "NNP"]},
        id="0",
    )
    assert sentences[1].tags == ["O", "O"] and sentences[1].columns == {"pos_tags": ["NNP", "."]}


def test_string_tags_still_round_trip_and_tags_column_can_be_named() -> None:
    original = [Sentence(["a", "b"], ["B-X", "O"], id="s1")]
    assert from_dataset(to_dataset(original)) == original
    hub = _hub_like([[1, 2, 0, 3], [0, 0]])
    assert [s.tags for s in from_dataset(hub, tags="pos_tags")][1] == ["NNP", "."]


def test_error_integer_tags_without_classlabel_name_the_column() -> None:
    with pytest.raises(
        ValueError, match=r"column 'ner_tags' of row 0 holds integer ids but is not"
    ):
        from_dataset(_hub_like([[1, 2, 0, 3], [0, 0]], class_label=False))


def test_error_unknown_tag_column_is_named() -> None:
    with pytest.raises(ValueError, match=r"no tag column 'labels'"):
        from_dataset(_hub_like([[1, 2, 0, 3], [0, 0]]), tags="labels")
