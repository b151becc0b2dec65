"""A tiny finance model for the lab's tests, trained once per session (seconds, on the CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _train(folder: Path) -> Path:
    """Train a tiny CRF on 8 finance documents for 3 epochs; the model saved as a folder."""
    from helpers import train_tiny_finance

    import crfhead

    saved = folder / "model"
    crfhead.load(train_tiny_finance(folder)).save(saved)
    return saved


@pytest.fixture(scope="session")
def lab_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny model (a folder ``crfhead.load`` reads without Lightning)."""
    return _train(tmp_path_factory.mktemp("lab_model"))
