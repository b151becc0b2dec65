"""HFCorpus: a local ``save_to_disk`` DatasetDict (ClassLabel tags), string tags, a data files folder,
the splits checked row by row against what was written, a one-epoch ``train.py`` run chosen by
``class_path``, and one test per error (missing split, missing column, ids without ClassLabel, a tag
outside the scheme, a single Dataset, a path that exists nowhere)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

datasets = pytest.importorskip("datasets")

from crfhead.data.hf_corpus import HFCorpus  # noqa: E402

# The fixture's test row is repaired on purpose; the test that reads it asserts the warning.
pytestmark = pytest.mark.filterwarnings("ignore:.*sentences repaired:UserWarning")

NAMES = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG"]
POS = ["NN", "VB"]

ROWS: dict[str, list[dict[str, Any]]] = {
    "train": [
        {"tokens": ["-DOCSTART-"], "ner_tags": [0], "pos_tags": [0], "n": [1]},
        {
            "tokens": ["Ada", "Lovelace", "wrote"],
            "ner_tags": [1, 2, 0],
            "pos_tags": [0, 0, 1],
            "n": [1, 2, 3],
        },
        {"tokens": [], "ner_tags": [], "pos_tags": [], "n": []},
        {
            "tokens": ["Acme", "Corp", "sells"],
            "ner_tags": [3, 4, 0],
            "pos_tags": [0, 0, 1],
            "n": [4, 5, 6],
        },
        {"tokens": ["-DOCSTART-"], "ner_tags": [0], "pos_tags": [0], "n": [1]},
        {"tokens": ["Bob", "runs"], "ner_tags": [1, 0], "pos_tags": [0, 1], "n": [7, 8]},
    ],
    "validation": [
        {"tokens": ["Eve", "Acme"], "ner_tags": [1, 3], "pos_tags": [0, 0], "n": [1, 2]},
    ],
    "test": [
        # I-PER after O: invalid in BIO, repaired to B-PER as the CoNLL reader does.
        {"tokens": ["Carol", "Jones"], "ner_tags": [0, 2], "pos_tags": [0, 0], "n": [1, 2]},
    ],
}


def _features(tags: Any) -> Any:
    return datasets.Features(
        {
            "tokens": datasets.Sequence(datasets.Value("string")),
            "ner_tags": tags,
            "pos_tags": datasets.Sequence(datasets.ClassLabel(names=POS)),
            "n": datasets.Sequence(datasets.Value("int32")),  # ints, no ClassLabel: not read
        }
    )


def _save(folder: Path, tags: Any = None, rows: dict[str, list[dict[str, Any]]] = ROWS) -> Path:
    features = _features(tags or datasets.Sequence(datasets.ClassLabel(names=NAMES)))
    dd = datasets.DatasetDict(
        {
            split: datasets.Dataset.from_list(items, features=features)
            for split, items in rows.items()
        }
    )
    dd.save_to_disk(str(folder))
    return folder


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _save(tmp_path_factory.mktemp("hf") / "ner")


def test_save_to_disk_classlabel_splits_are_read_exactly(saved: Path) -> None:
    with pytest.warns(
        UserWarning, match=r"split 'test': 1 sentences, 2 tokens, 1 sentences repaired \(1 tags\)"
    ):
        splits = HFCorpus(str(saved), columns=["pos_tags"]).load()
    train = splits["train"]
    assert [s.tokens for s in train] == [
        ["Ada", "Lovelace", "wrote"],
        ["Acme", "Corp", "sells"],
        ["Bob", "runs"],
    ]
    assert [s.tags for s in train] == [
        ["B-PER", "I-PER", "O"],
        ["B-ORG", "I-ORG", "O"],
        ["B-PER", "O"],
    ]
    # -DOCSTART- rows split documents; the empty row is skipped; ids name the split and row.
    assert [s.doc_id for s in train] == ["train-1", "train-1", "train-2"]
    assert [s.id for s in train] == ["train:1", "train:3", "train:5"]
    assert train[0].columns == {"pos_tags": ["NN", "NN", "VB"]}
    assert [s.tags for s in splits["dev"]] == [["B-PER", "B-ORG"]]
    assert splits["dev"][0].doc_id is None  # no -DOCSTART- in the split: no documents
    assert [s.tags for s in splits["test"]] == [["O", "B-PER"]]  # repaired in BIO


def test_other_columns_are_dropped_unless_asked(saved: Path) -> None:
    train = HFCorpus(str(saved)).load()["train"]
    assert all(s.columns == {} for s in train)


def test_string_tags_renamed_columns_and_split_names(tmp_path: Path) -> None:
    rows = {
        "tr": [{"words": ["x", "Ada"], "labels": ["O", "S-PER"]}],
        "dv": [{"words": ["Acme"], "labels": ["S-ORG"]}],
        "te": [{"words": ["Bo", "Li"], "labels": ["B-PER", "E-PER"]}],
    }
    features = datasets.Features(
        {
            "words": datasets.Sequence(datasets.Value("string")),
            "labels": datasets.Sequence(datasets.Value("string")),
        }
    )
    datasets.DatasetDict(
        {k: datasets.Dataset.from_list(v, features=features) for k, v in rows.items()}
    ).save_to_disk(str(tmp_path / "d"))
    corpus = HFCorpus(
        str(tmp_path / "d"),
        train_split="tr",
        dev_split="dv",
        test_split="te",
        tokens_column="words",
        tags_column="labels",
        scheme="BIOES",
    )
    splits = corpus.load()
    assert corpus.scheme == "BIOES"
    assert [(s.tokens, s.tags) for s in splits["train"]] == [(["x", "Ada"], ["O", "S-PER"])]
    assert [(s.tokens, s.tags) for s in splits["test"]] == [(["Bo", "Li"], ["B-PER", "E-PER"])]


def test_a_local_folder_of_data_files(tmp_path: Path) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    for split, rows in (("train", 2), ("validation", 1), ("test", 1)):
        lines = [
            json.dumps({"tokens": [f"w{i}", "Ada"], "ner_tags": ["O", "B-PER"]})
            for i in range(rows)
        ]
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    splits = HFCorpus(str(folder)).load()
    assert [s.tokens for s in splits["train"]] == [["w0", "Ada"], ["w1", "Ada"]]
    assert [s.tags for s in splits["test"]] == [["O", "B-PER"]]


# Errors ------------------------------------------------------------------------------------------


def test_error_missing_split_names_the_available_ones(saved: Path) -> None:
    with pytest.raises(
        ValueError,
        match=r"no split 'dev' for dev \(splits: \['train', 'validation', 'test'\]\); set dev_split",
    ):
        HFCorpus(str(saved), dev_split="dev").load()


def test_error_missing_column_names_the_columns(saved: Path) -> None:
    with pytest.raises(
        ValueError,
        match=r"split 'train' has no column 'tags' \(columns: \['tokens', 'ner_tags', 'pos_tags', 'n'\]\)",
    ):
        HFCorpus(str(saved), tags_column="tags").load()


def test_error_integer_tags_without_classlabel(tmp_path: Path) -> None:
    folder = _save(tmp_path / "ints", tags=datasets.Sequence(datasets.Value("int64")))
    with pytest.raises(
        ValueError,
        match=r"split 'train': column 'ner_tags' of row 0 holds integer ids but is not a ClassLabel",
    ):
        HFCorpus(str(folder)).load()


def test_error_tag_outside_the_scheme(saved: Path) -> None:
    with pytest.raises(ValueError, match=r"split 'train' row 1: .*'B-PER'.*\(scheme IO\)"):
        HFCorpus(str(saved), scheme="IO").load()


def test_error_a_single_dataset_is_not_splits(tmp_path: Path) -> None:
    datasets.Dataset.from_dict({"tokens": [["a"]], "ner_tags": [["O"]]}).save_to_disk(
        str(tmp_path / "one")
    )
    with pytest.raises(ValueError, match="holds a single Dataset, not its splits"):
        HFCorpus(str(tmp_path / "one")).load()


def test_error_a_path_that_exists_nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setenv("CRFHEAD_DATA", str(tmp_path))
    with pytest.raises(
        FileNotFoundError, match=r"HFCorpus\('nobody/no-such-dataset'\): not a local dataset"
    ):
        HFCorpus("nobody/no-such-dataset").load()


def test_error_empty_split(tmp_path: Path) -> None:
    rows = {**ROWS, "validation": [ROWS["train"][0]]}  # only a -DOCSTART- row
    folder = _save(tmp_path / "empty", rows=rows)
    with pytest.raises(ValueError, match=r"split 'validation': the dev split has no sentences"):
        HFCorpus(str(folder)).load()


# By config ---------------------------------------------------------------------------------------


def test_train_py_trains_one_epoch_on_it_by_class_path(saved: Path, tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from train import main

    config = tmp_path / "config.yaml"
    config.write_text(
        f"""
seed_everything: 0
trainer:
  max_epochs: 1
  default_root_dir: {tmp_path}
  accelerator: cpu
  enable_progress_bar: false
  enable_model_summary: false
  logger:
    class_path: pytorch_lightning.loggers.CSVLogger
    init_args:
      save_dir: {tmp_path}/runs
      name: hf
  callbacks:
    - class_path: pytorch_lightning.callbacks.ModelCheckpoint
      init_args:
        dirpath: {tmp_path}/ckpt
        save_last: true
data:
  corpus:
    class_path: crfhead.data.hf_corpus.HFCorpus
    init_args:
      path: {saved}
  batch_size: 2
"""
    )
    cli = main(["--config", str(config)])
    corpus = cli.datamodule.corpus
    assert isinstance(corpus, HFCorpus) and corpus.path == str(saved)
    assert sorted(cli.datamodule.vocabs["labels"]["labels"]) == sorted(NAMES)
    assert (tmp_path / "ckpt" / "last.ckpt").is_file()
    report = json.loads((tmp_path / "runs" / "hf" / "version_0" / "test_report.json").read_text())
    assert "f1" in report
