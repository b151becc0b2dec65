"""``scripts/higher_order_eval.py`` on tiny trained chain models: every decoder per group, the two-stage row.

The tweet path runs on the finance corpus (whose sentences share words, so some groups get
consistency patterns); the CoNLL path end to end on a tiny CoNLL-format corpus written from the
finance documents (documents of four sentences: skip-chain patterns between repeated names).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="module")
def finance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A chain CRF trained one epoch on a tiny finance corpus (train.py), and its CLI."""
    from train import main

    tmp = tmp_path_factory.mktemp("finance")
    here = os.getcwd()
    os.chdir(tmp)
    try:
        config = tmp / "tiny.yaml"
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
    from higher_order_eval import evaluate

    cli = finance
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


def test_two_stage_fits_and_tags_every_test_sentence(finance: Any) -> None:
    from higher_order_eval import TwoStage, group_sentences

    from crfhead.higher_order.two_stage import COLUMN

    cli = finance
    splits = cli.datamodule.splits
    two = TwoStage(cli.model, "msm2013")
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


def _write_conll(path: Path, sentences: list[Any], per_doc: int) -> int:
    """Sentences as a two-column BIO file with a ``-DOCSTART-`` every ``per_doc``; returns the docs."""
    from crfhead.schemes import convert_tags

    lines: list[str] = []
    docs = 0
    for i, s in enumerate(sentences):
        if i % per_doc == 0:
            lines += ["-DOCSTART- O", ""]
            docs += 1
        tags = convert_tags(s.tags, "BIOES", "BIO")
        lines += [f"{w} {t}" for w, t in zip(s.tokens, tags, strict=True)] + [""]
    path.write_text("\n".join(lines) + "\n")
    return docs


def test_groups_of_conll_are_documents() -> None:
    from higher_order_eval import group_sentences

    from crfhead.data.sentence import Sentence

    s = [
        Sentence(["a"], doc_id="d0"),
        Sentence(["b"], doc_id="d0"),
        Sentence(["c"], doc_id="d1"),
        Sentence(["d"]),
        Sentence(["e"], doc_id="d1"),
    ]
    assert group_sentences(s, "conll2003") == [[0, 1], [2, 4], [3]]
    with pytest.raises(ValueError, match="corpus"):
        group_sentences(s, "wnut")


def test_the_conll_path_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from higher_order_eval import main as evaluate_main

    from crfhead.data.corpora import FinanceCorpus
    from crfhead.data.datamodule import TaggingDataModule
    from train import main

    source = TaggingDataModule(
        corpus=FinanceCorpus(train_docs=3, dev_docs=2, test_docs=2), scheme="BIOES"
    ).splits
    docs = {
        split: _write_conll(tmp_path / f"{split}.txt", source[split], per_doc=4)
        for split in ("train", "dev", "test")
    }
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "conll_tiny.yaml"
    config.write_text(
        "trainer:\n  max_epochs: 1\n  enable_progress_bar: false\n  accelerator: cpu\n"
        "  gradient_clip_val: 5.0\n"
        "model:\n  encoder:\n    class_path: crfhead.encoders.IndicatorEncoder\n"
        "data:\n  scheme: BIOES\n  corpus:\n    class_path: crfhead.data.corpora.CoNLLCorpus\n"
        f"    init_args: {{train: {tmp_path}/train.txt, dev: {tmp_path}/dev.txt, "
        f"test: {tmp_path}/test.txt}}\n"
    )
    main(["fit", "--config", str(config)])
    (checkpoint,) = tmp_path.glob("runs/**/epoch=*.ckpt")
    capsys.readouterr()
    rc = evaluate_main(
        [
            "--checkpoint",
            str(checkpoint),
            "--config",
            str(config),
            "--weights",
            "0",
            "1",
            "--folds",
            "2",
            "--max-iterations",
            "30",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "## conll2003 dev: the skip-chain weight" in out
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in out.splitlines()
        if line.startswith("| ")
        and line.split("|")[1].strip() in ("viterbi", "two_stage", "dd2slave", "dd_factor", "ilp")
    }
    assert list(rows) == ["viterbi", "two_stage", "dd2slave", "dd_factor", "ilp"]
    for name, cells in rows.items():
        assert 0.0 <= float(cells[0]) <= 1.0 and 0.0 <= float(cells[1]) <= 1.0, name
        assert cells[2].startswith(f"{docs['test']} ("), (name, cells)  # one group per document
    assert float(rows["ilp"][3]) == 1.0
    assert rows["two_stage"][3] == "n/a"
    assert "2-fold jackknifing" in out
