"""Paired bootstrap of span F1 differences: the data's difference is TaggingMetrics', every draw is too."""

from __future__ import annotations

import random

import numpy as np
import pytest

from crfhead.evaluation.bootstrap import paired_bootstrap
from crfhead.evaluation.metrics import TaggingMetrics

LABELS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC"]


def _random_tags(rng: random.Random, n: int) -> list[list[str]]:
    return [[rng.choice(LABELS) for _ in range(rng.randint(1, 7))] for _ in range(n)]


def _f1s(gold: list[list[str]], pred: list[list[str]]) -> tuple[float, float]:
    m = TaggingMetrics("BIO")
    m.update(gold, pred)
    out = m.compute()
    return out["f1"], out["macro_f1"]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("grouped", [False, True])
def test_each_draw_is_the_metrics_of_the_resampled_units(grouped: bool) -> None:
    rng = random.Random(3)
    gold = _random_tags(rng, 12)
    pred_a = [[t if rng.random() < 0.6 else rng.choice(LABELS) for t in g] for g in gold]
    pred_b = [[t if rng.random() < 0.8 else rng.choice(LABELS) for t in g] for g in gold]
    units = [[0, 1, 2], [3], [4, 5], [6, 7, 8, 9], [10, 11]] if grouped else None
    got = paired_bootstrap(gold, pred_a, pred_b, "BIO", units=units, samples=40, seed=5)
    rows = units or [[i] for i in range(12)]
    fa, fb = _f1s(gold, pred_a), _f1s(gold, pred_b)
    assert got.micro == pytest.approx(fb[0] - fa[0], abs=1e-12)
    assert got.macro == pytest.approx(fb[1] - fa[1], abs=1e-12)
    draws = np.random.default_rng(5).integers(0, len(rows), size=(40, len(rows)))
    micro, macro = [], []
    for draw in draws:
        idx = [i for u in draw for i in rows[u]]
        sa = _f1s([gold[i] for i in idx], [pred_a[i] for i in idx])
        sb = _f1s([gold[i] for i in idx], [pred_b[i] for i in idx])
        micro.append(sb[0] - sa[0])
        macro.append(sb[1] - sa[1])
    assert got.micro_interval == pytest.approx(tuple(np.percentile(micro, (2.5, 97.5))), abs=1e-12)
    assert got.macro_interval == pytest.approx(tuple(np.percentile(macro, (2.5, 97.5))), abs=1e-12)
    assert got.units == len(rows) and got.samples == 40


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_identical_systems_differ_by_exactly_zero() -> None:
    rng = random.Random(0)
    gold = _random_tags(rng, 8)
    got = paired_bootstrap(gold, gold, gold, "BIO", samples=20)
    assert got.micro == got.macro == 0.0
    assert got.micro_interval == got.macro_interval == (0.0, 0.0)


def test_bad_input_is_named() -> None:
    gold = [["O", "B-PER"]]
    with pytest.raises(ValueError, match="1 gold sentences but 0 and 1 predicted"):
        paired_bootstrap(gold, [], gold, "BIO")
    with pytest.raises(ValueError, match="exactly once"):
        paired_bootstrap(gold * 2, gold * 2, gold * 2, "BIO", units=[[0]])
    with pytest.raises(ValueError, match="samples >= 1"):
        paired_bootstrap(gold, gold, gold, "BIO", samples=0)
