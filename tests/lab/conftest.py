"""A tiny finance model for the lab's tests, trained once per session (seconds, on the CPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _train(folder: Path) -> Path:
    """Train a tiny CRF on 8 finance documents for 3 epochs; the model saved as a folder."""
    sys.path.insert(0, str(ROOT))
    import crfhead
    from train import main

    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.yaml"
    config.write_text(
        f"""
seed_everything: 0
trainer:
  max_epochs: 3
  default_root_dir: {folder}
  accelerator: cpu
  enable_progress_bar: false
  enable_model_summary: false
  logger:
    class_path: pytorch_lightning.loggers.CSVLogger
    init_args:
      save_dir: {folder}/runs
      name: tiny
  callbacks:
    - class_path: pytorch_lightning.callbacks.ModelCheckpoint
      init_args:
        dirpath: {folder}/ckpt
        save_last: true
model:
  head:
    class_path: crfhead.heads.CRF
  lr: 0.1
data:
  corpus:
    class_path: crfhead.data.corpora.FinanceCorpus
    init_args:
      train_docs: 8
      dev_docs: 2
      test_docs: 2
  batch_size: 8
"""
    )
    main(["--config", str(config)])
    saved = folder / "model"
    crfhead.load(folder / "ckpt" / "last.ckpt").save(saved)
    return saved


@pytest.fixture(scope="session")
def lab_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny model (a folder ``crfhead.load`` reads without Lightning)."""
    return _train(tmp_path_factory.mktemp("lab_model"))
