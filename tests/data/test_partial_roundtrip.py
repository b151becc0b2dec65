"""Partial gold written and read back (``*`` and ``|`` cells), and the report line that counts ignored tokens."""

from __future__ import annotations

import itertools
import random
import warnings
from pathlib import Path

import pytest

from crfhead.data.conll import read_conll, write_conll
from crfhead.evaluation.report import format_report
from crfhead.schemes import has_valid_path, is_valid, labels_for


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


def test_a_partial_sentence_with_no_valid_path_is_refused_by_its_id(tmp_path: Path) -> None:
    src = tmp_path / "bad.conll"
    src.write_text("Hi O\n\nMara I-PER\nVoss *\n", encoding="utf-8")  # I-PER cannot open BIO
    with pytest.raises(ValueError, match=r"sentence bad\.conll:3: no tag sequence valid in BIO"):
        read_conll(src)


@pytest.mark.parametrize("scheme", ["BIO", "IOB1", "BIOES", "IO"])
def test_has_valid_path_matches_enumeration(scheme: str) -> None:
    labels = labels_for(["PER", "LOC"], scheme)
    rng = random.Random(scheme)
    for _ in range(150):
        T = rng.randint(1, 4)
        sets: list[list[str] | None] = []
        for _ in range(T):
            if rng.random() < 0.2:
                sets.append(None)
            else:
                sets.append(rng.sample(labels, rng.randint(1, 2)))
        want = any(
            is_valid(list(path), scheme)
            for path in itertools.product(*[labels if s is None else s for s in sets])
        )
        assert has_valid_path(sets, scheme) == want, (sets, scheme)
