"""A higher-order model through the public API: trained from a config, loaded, a group tagged, saved, reloaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_training import _args, _higher_order_config

import crfhead
from crfhead.higher_order import Consistency, FactorDecoder
from crfhead.training.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("higher_order")
    extra = _higher_order_config(tmp, "      grid: [0.0, 1.0, 3.0]")
    cli = main([*_args(tmp), "--config", str(extra), "--trainer.max_epochs=2"])
    return Path(cli.trainer.checkpoint_callback.best_model_path)


def test_a_higher_order_checkpoint_loads_tags_a_group_saves_and_reloads(
    checkpoint: Path, tmp_path: Path
) -> None:
    tagger = crfhead.load(checkpoint)
    decoder = tagger.model.decoder
    assert isinstance(decoder, FactorDecoder) and isinstance(decoder.factors, Consistency)
    texts = [
        "aiko ridora said the gruler platform was launched",
        "the gruler platform grew, said aiko ridora",
        "nothing to see",
    ]
    alone = tagger.annotate(texts)
    joint = tagger.annotate(texts, group=True)
    assert [t.certified for t in alone] == [None] * 3
    assert all(isinstance(t.certified, bool) for t in joint)
    assert all(len(t.tags) == len(t.tokens) for t in joint)
    # At scale 0 the group decoder is the chain: joint decoding changes nothing.
    kept = decoder.value
    decoder.use(0.0)
    assert [t.tags for t in tagger.annotate(texts, group=True)] == [t.tags for t in alone]
    decoder.use(kept)

    folder = tagger.save(tmp_path / "saved")
    config = json.loads((folder / "config.json").read_text())
    assert config["decoder"]["init_args"]["factors"] == {
        "class_path": "crfhead.higher_order.Consistency"
    }
    again = crfhead.load(folder)
    assert again.model.decoder is not None and again.model.decoder.value == kept
    assert [t.to_dict() for t in again.annotate(texts, group=[[0, 1], [2]])] == [
        t.to_dict() for t in tagger.annotate(texts, group=[[0, 1], [2]])
    ]
    assert [t.to_dict() for t in again.annotate(texts)] == [t.to_dict() for t in alone]

    # The grouping it was trained with travels with it: DocumentGroups, so texts without a
    # document id are each their own group.
    assert config["grouping"]["class_path"] == "crfhead.data.grouping.DocumentGroups"
    auto = again.annotate(texts, group="auto")
    assert [t.certified is not None for t in auto] == [True] * 3
    assert [t.tags for t in auto] == [t.tags for t in again.annotate(texts, group=[[0], [1], [2]])]

    out = subprocess.run(
        [sys.executable, "-m", "crfhead", "predict", "--model", str(folder), "--group", "all"],
        input="\n".join(texts[:2]) + "\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["tags"] for r in records] == [t.tags for t in tagger.annotate(texts[:2], group=True)]
    assert all(isinstance(r["certified"], bool) for r in records)


def test_evaluate_decodes_documents_jointly_and_reports_certificates(
    checkpoint: Path, tmp_path: Path
) -> None:
    from crfhead.data.conll import read_conll
    from crfhead.inference.scoring import score_sentences

    conll = tmp_path / "test.conll"
    conll.write_text(
        "-DOCSTART- O\n\naiko O\nridora O\nsaid O\n\nridora O\nsaid O\nso O\n\n"
        "-DOCSTART- O\n\nthe O\nplatform O\n\n",
        encoding="utf-8",
    )
    tagger = crfhead.load(checkpoint)
    sentences, _ = read_conll(conll, scheme=tagger.scheme, out_scheme=tagger.scheme)
    alone = score_sentences(tagger, sentences).report
    joint = score_sentences(tagger, sentences, group="document").report
    assert "certified" not in alone
    assert 0.0 <= joint["certified"] <= 1.0 and joint["decoder_iterations"] >= 1.0
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "crfhead",
            "evaluate",
            "--model",
            str(checkpoint),
            "--input",
            str(conll),
            "--group",
            "document",
            "--output-json",
            str(tmp_path / "r.json"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert json.loads((tmp_path / "r.json").read_text())["certified"] == joint["certified"], (
        out.stderr
    )


def test_group_is_refused_clearly(checkpoint: Path) -> None:
    tagger = crfhead.load(checkpoint)
    with pytest.raises(ValueError, match=r"exactly once, got \[\[0\]\]"):
        tagger.annotate(["a b", "c d"], group=[[0]])
    with pytest.raises(ValueError, match="group must be one of"):
        tagger.annotate(["a b"], group="tweets")
    tagger.grouping = None  # a model saved before groupings were
    with pytest.raises(ValueError, match="this model saved no grouping"):
        tagger.annotate(["a b"], group="auto")


def test_a_chain_model_refuses_a_group(tmp_path: Path) -> None:
    cli = main([*_args(tmp_path), "--trainer.max_epochs=1"])
    tagger = crfhead.load(cli.trainer.checkpoint_callback.best_model_path)
    with pytest.raises(ValueError, match="this model has no group decoder"):
        tagger.tag(["a b", "c d"], group=True)
    assert tagger.annotate(["a b"], group=False)[0].certified is None
