"""TaggingMetrics with partial gold (issue 29): positions whose gold is None are dropped from gold
and prediction before spans and accuracy are read, and counted as ``ignored_tokens``."""

from __future__ import annotations

import pytest

from crfhead.evaluation.metrics import TaggingMetrics

__all__: list[str] = []


def test_none_positions_are_dropped_and_counted() -> None:
    m = TaggingMetrics("BIO")
    gold = [["B-PER", "I-PER", None, "O", "B-LOC"], ["O", None]]
    pred = [["B-PER", "I-PER", "B-ORG", "O", "B-LOC"], ["O", "B-PER"]]
    m.update(gold, pred, tokens=[["a"] * 5, ["b"] * 2])
    out = m.compute()
    assert out["ignored_tokens"] == 2.0
    assert out["tokens"] == 5.0 and out["accuracy"] == 1.0
    # The predicted ORG at the dropped position is not a false positive.
    assert (out["precision"], out["recall"], out["f1"]) == (1.0, 1.0, 1.0)
    assert out["support"] == 2.0


def test_dropping_equals_scoring_the_kept_positions() -> None:
    gold = [["B-PER", None, "I-PER", "O"]]
    pred = [["B-PER", "O", "I-PER", "B-ORG"]]
    a, b = TaggingMetrics("BIO"), TaggingMetrics("BIO")
    a.update(gold, pred)
    b.update([["B-PER", "I-PER", "O"]], [["B-PER", "I-PER", "B-ORG"]])
    got, want = a.compute(), b.compute()
    assert got.pop("ignored_tokens") == 1.0
    assert got == want and "ignored_tokens" not in want
    assert want["precision"] == pytest.approx(0.5)


def test_ignored_tokens_survive_state_dict_and_merge() -> None:
    m = TaggingMetrics("BIO")
    m.update([[None, "O"]], [["O", "O"]])
    other = TaggingMetrics("BIO").merge(m.state_dict())
    assert other.compute()["ignored_tokens"] == 1.0
