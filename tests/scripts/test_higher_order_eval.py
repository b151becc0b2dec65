"""``scripts/higher_order_eval.py``'s evaluation on a tiny trained chain model: every decoder runs per group."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))


def test_every_decoder_tags_every_group_and_ilp_certifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from higher_order_eval import evaluate

    from train import main

    monkeypatch.chdir(tmp_path)
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "trainer:\n  max_epochs: 1\n  enable_progress_bar: false\n  accelerator: cpu\n"
        "model:\n  encoder:\n    class_path: crfhead.encoders.IndicatorEncoder\n"
        "data:\n  corpus:\n    class_path: crfhead.data.corpora.FinanceCorpus\n"
        "    init_args: {train_docs: 3, dev_docs: 2, test_docs: 2}\n"
    )
    cli = main(["fit", "--config", str(config)])
    sentences = cli.datamodule.splits["test"]
    results = {
        m: evaluate(cli.model, sentences, 2.0, m, threshold=4, max_iterations=50)
        for m in ("viterbi", "dd2slave", "dd_factor", "ilp")
    }
    assert (
        results["viterbi"]["multi"] > 0
    )  # finance sentences share words: some groups have patterns
    assert results["ilp"]["certified"] == 1.0
    for r in results.values():
        assert r["groups"] == results["ilp"]["groups"] and 0.0 <= r["f1"] <= 1.0
    # A certified decoder found the exact optimum, so its labelling scores like the ILP's.
    if results["dd2slave"]["certified"] == 1.0:
        assert results["dd2slave"]["f1"] == pytest.approx(results["ilp"]["f1"])
