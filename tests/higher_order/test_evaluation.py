"""A tiny trained chain model decoded per group by every method, its dev weight, and the two-stage tagger.

The tweet path runs on the finance corpus, whose sentences share words, so some groups get
consistency factors (the CoNLL path end to end: ``tests/scripts/test_higher_order_eval.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crfhead.higher_order.corpus_setup import group_sentences
from crfhead.higher_order.evaluation import dev_grid, evaluate_split, select_weight
from crfhead.higher_order.two_stage import COLUMN
from crfhead.higher_order.two_stage_pipeline import TwoStage


@pytest.fixture(scope="module")
def finance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A chain CRF trained one epoch on a tiny finance corpus (``train.py``'s CLI), and that CLI."""
    from crfhead.training.cli import main

    tmp = tmp_path_factory.mktemp("finance")
    here = os.getcwd()
    os.chdir(tmp)
    try:
        config = Path(tmp) / "tiny.yaml"
        config.write_text(
            "trainer:\n  max_epochs: 1\n  enable_progress_bar: false\n  accelerator: cpu\n"
            "model:\n  encoder:\n    class_path: crfhead.encoders.IndicatorEncoder\n"
            "data:\n  corpus:\n    class_path: crfhead.data.corpora.FinanceCorpus\n"
            "    init_args: {train_docs: 3, dev_docs: 2, test_docs: 2}\n"
        )
        yield main(["fit", "--config", str(config)])
    finally:
        os.chdir(here)


def test_every_decoder_tags_every_group_and_ilp_certifies(finance: Any) -> None:
    cli = finance
    sentences = cli.datamodule.splits["test"]
    results = {
        m: evaluate_split(cli.model, sentences, 2.0, m, "msm2013", max_iterations=50)
        for m in ("viterbi", "dd2slave", "dd_factor", "ilp")
    }
    # Finance sentences share words: some groups have factors.
    assert results["viterbi"]["multi"] > 0
    assert results["ilp"]["certified"] == 1.0
    for r in results.values():
        assert r["groups"] == results["ilp"]["groups"] and 0.0 <= r["f1"] <= 1.0
        assert r["iterations"] >= 1 and r["ms_per_group"] > 0
    # A certified decoder found the exact optimum, so its labelling scores like the ILP's.
    if results["dd2slave"]["certified"] == 1.0:
        assert results["dd2slave"]["f1"] == pytest.approx(results["ilp"]["f1"])


def test_weight_zero_is_the_chain_alone(finance: Any) -> None:
    cli = finance
    sentences = cli.datamodule.splits["test"]
    chain = evaluate_split(cli.model, sentences, 0.0, "dd2slave")
    viterbi = evaluate_split(cli.model, sentences, 2.0, "viterbi")
    assert chain["multi"] == 0 and chain["certified"] == 1.0 and chain["iterations"] == 1.0
    assert (chain["f1"], chain["macro_f1"]) == (viterbi["f1"], viterbi["macro_f1"])


def test_only_the_groups_given_are_decoded(finance: Any) -> None:
    cli = finance
    sentences = cli.datamodule.splits["test"]
    groups = group_sentences(sentences, "msm2013")[:2]
    r = evaluate_split(cli.model, sentences, 1.0, "ilp", groups=groups)
    assert r["groups"] == 2


def test_a_negative_weight_and_an_unknown_method_are_refused(finance: Any) -> None:
    sentences = finance.datamodule.splits["test"]
    with pytest.raises(ValueError, match="weight must be >= 0"):
        evaluate_split(finance.model, sentences, -1.0, "ilp")
    with pytest.raises(ValueError, match="method must be one of"):
        evaluate_split(finance.model, sentences, 1.0, "beam")


def test_the_dev_grid_keeps_its_order_and_the_best_weight_is_chosen(finance: Any) -> None:
    cli = finance
    grid = dev_grid(cli.model, cli.datamodule.splits["dev"], [0.0, 2.0, 1.0], max_iterations=30)
    assert list(grid) == [0.0, 2.0, 1.0]
    best = select_weight(grid)
    assert grid[best]["f1"] == max(r["f1"] for r in grid.values())


def test_select_weight_breaks_ties_by_macro_f1_then_by_grid_order() -> None:
    def r(f1: float, macro: float) -> dict[str, float]:
        return {"f1": f1, "macro_f1": macro}

    assert select_weight({0.0: r(0.5, 0.1), 1.0: r(0.6, 0.1), 2.0: r(0.4, 0.9)}) == 1.0
    assert select_weight({0.0: r(0.5, 0.1), 1.0: r(0.5, 0.3), 2.0: r(0.5, 0.2)}) == 1.0
    assert select_weight({4.0: r(0.5, 0.2), 0.0: r(0.5, 0.2)}) == 4.0
    with pytest.raises(ValueError, match="at least one"):
        select_weight({})


def test_two_stage_fits_and_tags_every_test_sentence(finance: Any) -> None:
    cli = finance
    splits = cli.datamodule.splits
    two = TwoStage(cli.model, "msm2013")
    with pytest.raises(RuntimeError, match="fit the second stage first"):
        two.evaluate(splits["test"], [[0]])
    two.fit(splits, folds=2, first_epochs=1, second_epochs=2)
    assert len(two.history) == 2 and two.second is not None
    # The second stage has the local features plus the majority ones, and reads them.
    first_features = len(cli.model.hparams["vocabs"]["features"]["items"])
    second_features = len(two.second.hparams["vocabs"]["features"]["items"])
    assert second_features > first_features
    groups = group_sentences(splits["test"], "msm2013")
    featured = two.stage_one(splits["test"], groups)
    assert any("tm=" in cell for s in featured for cell in s.columns[COLUMN])
    r = two.evaluate(splits["test"], groups)
    assert r["groups"] == len(groups) and 0.0 < r["f1"] <= 1.0
    # The featured sentences carry extra ids beyond their local features.
    assert two.collate is not None
    plain = two.collate([splits["test"][i] for i in groups[0]])
    rich = two.collate([featured[i] for i in groups[0]])
    assert plain.features is not None and rich.features is not None
    assert rich.features.shape[2] > plain.features.shape[2]
