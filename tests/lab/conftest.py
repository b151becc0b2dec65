"""Tiny models for the lab's tests, trained once per session (seconds, on the CPU).

``lab_model_path``: a chain CRF on finance documents. ``lab_higher_order_path``: the same kind of
CRF with a higher-order decoder (``model.decoder: crfhead.higher_order.FactorDecoder``, consistency
factors at a fixed scale) and a saved grouping (tweets sharing more than one word), as
``tests/training/test_higher_order_model.py`` trains one: ``train.py`` on a base config plus an
override file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HIGHER_ORDER = """
model:
  decoder:
    class_path: crfhead.higher_order.FactorDecoder
    init_args:
      factors:
        class_path: crfhead.higher_order.Consistency
      method: dd2slave
      max_iterations: 30
      grid: [3.0]
data:
  batch_size: 2
  grouping:
    class_path: crfhead.data.grouping.TweetGroups
    init_args:
      threshold: 1
      max_size: 4
"""
"""The override: a single-value grid fixes the scale that dev would choose, so the test's model
always weighs its factors (a scale of 0 would decode as the chain does)."""


def _train(folder: Path) -> Path:
    """Train a tiny CRF on 8 finance documents for 3 epochs; the model saved as a folder."""
    from helpers import train_tiny_finance

    import crfhead

    saved = folder / "model"
    crfhead.load(train_tiny_finance(folder)).save(saved)
    return saved


def _train_higher_order(folder: Path) -> Path:
    """The tiny finance CRF with :data:`HIGHER_ORDER` on top; saved as a folder."""
    import sys

    from helpers import TINY_FINANCE

    import crfhead

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from train import main

    folder.mkdir(parents=True, exist_ok=True)
    base, extra = folder / "config.yaml", folder / "higher_order.yaml"
    base.write_text(TINY_FINANCE.format(folder=folder, head="crfhead.heads.CRF", encoder=""))
    extra.write_text(HIGHER_ORDER)
    main(["--config", str(base), "--config", str(extra)])
    saved = folder / "model"
    crfhead.load(folder / "ckpt" / "last.ckpt").save(saved)
    return saved


@pytest.fixture(scope="session")
def lab_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny model (a folder ``crfhead.load`` reads without Lightning)."""
    return _train(tmp_path_factory.mktemp("lab_model"))


@pytest.fixture(scope="session")
def lab_higher_order_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny higher-order model: a group decoder and a saved grouping."""
    return _train_higher_order(tmp_path_factory.mktemp("lab_higher_order"))
