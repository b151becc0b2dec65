"""The CSV logger's ``hparams.yaml``: libyaml's safe dumper, Lightning's writer for the rest."""

from __future__ import annotations

from pathlib import Path

import yaml

from crfhead.training.loggers import CSVLogger, save_hparams


def test_hparams_yaml_round_trips_and_merges(tmp_path: Path) -> None:
    logger = CSVLogger(save_dir=str(tmp_path), name="run")
    vocab = {"itos": [f"w{i}" for i in range(5000)], "lower": False}
    logger.log_hyperparams({"lr": 0.005, "encoder": {"class_path": "x.Y"}, "vocabs": vocab})
    logger.log_hyperparams({"seed": 3, "none": None})
    path = Path(logger.log_dir) / "hparams.yaml"
    assert yaml.safe_load(path.read_text(encoding="utf-8")) == {
        "lr": 0.005,
        "encoder": {"class_path": "x.Y"},
        "vocabs": vocab,
        "seed": 3,
        "none": None,
    }


def test_values_the_safe_dumper_cannot_write_go_through_lightning(tmp_path: Path) -> None:
    path = tmp_path / "hparams.yaml"
    save_hparams(path, {"shape": (3, 4), "name": "x"})
    loaded = yaml.full_load(path.read_text(encoding="utf-8"))
    assert loaded["name"] == "x" and list(loaded["shape"]) == [3, 4]
