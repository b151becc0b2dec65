"""Partial gold written and read back (``*`` and ``|`` cells), and the report line that counts ignored tokens."""

from __future__ import annotations

import warnings
from pathlib import Path

from crfhead.data.conll import read_conll, write_conll
from crfhead.evaluation.report import format_report


def test_partial_cells_round_trip_through_write_conll(tmp_path: Path) -> None:
    src = tmp_path / "in.conll"
    src.write_text("Mara *\nVoss B-PER|B-ORG\nsaid O\n\nHi O\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first, _ = read_conll(src)
        write_conll(first, tmp_path / "out.conll", docstart=False)
        again, _ = read_conll(tmp_path / "out.conll")
    lines = (tmp_path / "out.conll").read_text(encoding="utf-8").splitlines()
    assert lines[:3] == ["Mara *", "Voss B-PER|B-ORG", "said O"]
    assert [s.allowed for s in again] == [s.allowed for s in first]
    assert [s.tags for s in again] == [s.tags for s in first]


def test_report_counts_ignored_tokens() -> None:
    metrics = {
        "precision": 1.0,
        "recall": 1.0,
        "f1": 1.0,
        "macro_precision": 1.0,
        "macro_recall": 1.0,
        "macro_f1": 1.0,
        "accuracy": 1.0,
        "tokens": 10.0,
        "ignored_tokens": 3.0,
    }
    text = format_report(metrics)
    assert "3 tokens ignored: their gold is not a single label" in text
    assert "ignored" not in format_report({**metrics, "ignored_tokens": 0.0})
