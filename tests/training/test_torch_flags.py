"""The torch flags a ``train.py`` run sets: deterministic algorithms on, their NaN fill of new tensors off.

``deterministic: true`` (``configs/base.yaml``) makes Lightning call
``torch.use_deterministic_algorithms(True)``, which by default also fills every new tensor with NaN;
the CLI keeps the algorithms and turns the fill off (:meth:`crfhead.training.cli.TaggerCLI._instantiate_trainer`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from crfhead.training.cli import main

TINY = [
    "--data.corpus.init_args.train_docs=2",
    "--data.corpus.init_args.dev_docs=2",
    "--data.corpus.init_args.test_docs=2",
]


def test_a_run_keeps_deterministic_algorithms_without_the_nan_fill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    was = torch.are_deterministic_algorithms_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
    torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
    try:
        main(
            ["--config", "crfhead:finance/indicator_crf.yaml", "--trainer.fast_dev_run=true", *TINY]
        )
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.utils.deterministic.fill_uninitialized_memory is False  # type: ignore[attr-defined]
    finally:
        torch.use_deterministic_algorithms(was)
        torch.utils.deterministic.fill_uninitialized_memory = fill  # type: ignore[attr-defined]
