"""``scripts/higher_order_eval.py`` end to end, as a command, on a tiny CoNLL-format corpus.

The corpus is written from the finance documents (documents of four sentences); the chain model is
trained one epoch by ``train.py``'s CLI. The library it calls is tested in
``tests/higher_order/test_evaluation.py`` and ``tests/higher_order/test_corpus_setup.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "higher_order_eval.py"


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


def test_the_conll_path_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from crfhead.data.corpora import FinanceCorpus
    from crfhead.data.datamodule import TaggingDataModule
    from crfhead.training.cli import main

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
    argv = ["--checkpoint", str(checkpoint), "--config", str(config), "--weights", "0", "1"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *argv, "--folds", "2", "--max-iterations", "30"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
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


def test_a_missing_checkpoint_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--checkpoint", str(tmp_path / "none.ckpt")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "checkpoint not found" in done.stderr
