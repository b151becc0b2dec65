"""Training on partial labels end to end (issue 29): a tiny CoNLL corpus with ``|`` and ``*`` cells,
the indicator CRF on CPU: the loss of the allowed paths is finite and falls, and the test report
counts the positions whose gold was not a single label."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from crfhead.data.corpora import CoNLLCorpus, InMemoryCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.data.partial import ANY
from crfhead.data.sentence import Sentence
from crfhead.model.tagger import Tagger
from train import main

__all__: list[str] = []

PEOPLE = ["Ada", "Bob", "Cy", "Dee"]
PLACES = ["Paris", "Rome", "Oslo"]


def _sentences(n: int, seed: int) -> list[Sentence]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        who, where = rng.choice(PEOPLE), rng.choice(PLACES)
        out.append(Sentence([who, "went", "to", where], ["B-PER", "O", "O", "B-LOC"]))
    return out


def _write(path: Path, sentences: list[Sentence], partial: bool) -> None:
    lines = []
    for i, s in enumerate(sentences):
        assert s.tags is not None
        for j, (w, t) in enumerate(zip(s.tokens, s.tags, strict=True)):
            cell = t
            if partial and i % 2 == 0 and j == 3:
                cell = "*"  # an entity span removed
            elif partial and i % 3 == 0 and j == 0:
                cell = "B-PER|B-LOC"
            lines.append(f"{w} {cell}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_partial_loss_is_finite_and_falls() -> None:
    train = _sentences(12, 0)
    for i, s in enumerate(train):
        s.allowed = [None, None, None, ANY] if i % 2 else [("B-PER", "B-LOC"), None, None, None]
        assert s.tags is not None
        s.tags[3 if i % 2 else 0] = "O"
    corpus = InMemoryCorpus({"train": train, "dev": train, "test": train})
    data = TaggingDataModule(corpus=corpus, batch_size=12)
    batch = next(iter(data.train_dataloader()))
    assert batch.allowed is not None
    torch.manual_seed(0)
    model = Tagger.build(data.vocabs)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = model.loss(batch)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert all(math.isfinite(v) for v in losses), losses
    assert losses[-1] < losses[0] - 0.1, losses
    pred, nll = model.decode_with_loss(batch)
    assert math.isfinite(nll) and len(pred) == 12


def _config(tmp_path: Path) -> Path:
    """A train.py config on three tiny CoNLL files with partial cells (written here)."""
    files = {}
    for split, seed in (("train", 1), ("dev", 2), ("test", 3)):
        files[split] = tmp_path / f"{split}.txt"
        _write(files[split], _sentences(10, seed), partial=True)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"""
seed_everything: 0
trainer:
  max_epochs: 3
  default_root_dir: {tmp_path}
  accelerator: cpu
  deterministic: true
  enable_progress_bar: false
  enable_model_summary: false
  logger:
    class_path: pytorch_lightning.loggers.CSVLogger
    init_args:
      save_dir: {tmp_path}/runs
      name: partial
model:
  encoder:
    class_path: crfhead.encoders.IndicatorEncoder
data:
  corpus:
    class_path: crfhead.data.corpora.CoNLLCorpus
    init_args:
      train: {files["train"]}
      dev: {files["dev"]}
      test: {files["test"]}
  batch_size: 4
"""
    )
    return config


def test_train_py_on_partial_conll_reports_ignored_positions(tmp_path: Path) -> None:
    config = _config(tmp_path)
    with pytest.warns(UserWarning, match="partial sentences"):
        cli = main(["--config", str(config)])
    report = cli.model.test_report
    # 10 test sentences: 5 with a * cell, 4 with a set cell (i = 0, 3, 6, 9).
    assert report["ignored_tokens"] == 9.0, report
    assert report["tokens"] == 31.0
    assert math.isfinite(report["log_loss"])


def test_hmm_refuses_partial_training_with_its_reason(tmp_path: Path) -> None:
    config = _config(tmp_path)
    with (
        pytest.warns(UserWarning),
        pytest.raises(ValueError, match="cannot train from partial labels"),
    ):
        main(["--config", str(config), "--model.head.class_path=crfhead.heads.hmm.HMM"])


def test_unknown_tags_by_corpus_option(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    _write(path, _sentences(3, 0), partial=False)
    corpus = CoNLLCorpus(str(path), str(path), str(path), unknown_tags=["O"])
    with pytest.warns(UserWarning):
        data = TaggingDataModule(corpus=corpus, scheme="BIOES")
    batch = next(iter(data.train_dataloader()))
    assert batch.allowed is not None and batch.tags is not None
    assert (batch.tags[:, 1:3] == -100).all()
