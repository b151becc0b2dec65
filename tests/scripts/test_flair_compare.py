"""``scripts/flair_compare.py``: crfhead against Flair on WNUT 2017, at a tiny size.

The crfhead side runs without Flair (``--only crfhead``); the full comparison is skipped when Flair
is not installed. Both need the WNUT 2017 files (``$CRFHEAD_DATA/wnut17``).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from crfhead.data.paths import data_dir

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "flair_compare.py"
WNUT = data_dir() / "wnut17"
RUN_KEYS = {
    "library",
    "model",
    "epochs",
    "epochs_run",
    "test_f1",
    "test_precision",
    "test_recall",
    "fit_seconds",
    "seconds_per_epoch",
    "train_tokens_per_second",
    "test_seconds",
    "peak_rss_mib",
    "threads",
    "settings",
}

needs_data = pytest.mark.skipif(
    not (WNUT / "wnut17train.conll").is_file(), reason=f"WNUT 2017 not found under {WNUT}"
)

sys.path.insert(0, str(ROOT / "scripts"))
import flair_compare  # noqa: E402


def run_script(tmp_path: Path, *flags: str, timeout: int = 1800) -> dict:
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--tiny",
            "--out-dir",
            str(out),
            "--work-dir",
            str(tmp_path / "work"),
            *flags,
        ],
        cwd=tmp_path,  # from another folder: nothing may be written into the current one
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["flair_compare.json", "flair_compare.md"]
    assert not (tmp_path / "runs").exists()
    report = json.loads((out / "flair_compare.json").read_text(encoding="utf-8"))
    report["markdown"] = (out / "flair_compare.md").read_text(encoding="utf-8")
    return report


def check_run(run: dict, library: str, model: str) -> None:
    assert set(run) >= RUN_KEYS, RUN_KEYS - set(run)
    assert (run["library"], run["model"]) == (library, model)
    for key in ("test_f1", "test_precision", "test_recall"):
        assert 0.0 <= run[key] <= 1.0, (key, run[key])
    assert run["epochs"] == run["epochs_run"] == 1
    for key in ("fit_seconds", "seconds_per_epoch", "train_tokens_per_second", "peak_rss_mib"):
        assert math.isfinite(run[key]) and run[key] > 0, (key, run[key])
    assert run["peak_rss_mib"] > 50  # a Python process with torch: MiB, not KiB or bytes
    assert math.isclose(run["seconds_per_epoch"], run["fit_seconds"])


def test_first_sentences_reads_wnut_blank_lines(tmp_path: Path) -> None:
    # WNUT 2017's sentence breaks are lines holding a tab, not empty lines.
    path = tmp_path / "x.conll"
    path.write_text("a\tO\nb\tB-person\n\t\nc\tO\n\t\nd\tO\n", encoding="utf-8")
    assert flair_compare.first_sentences(path, 2) == "a\tO\nb\tB-person\n\t\nc\tO\n\t\n"
    (tmp_path / "y.conll").write_text(flair_compare.first_sentences(path, 1), encoding="utf-8")
    sentences = flair_compare.read_split(tmp_path / "y.conll")
    assert [s.tokens for s in sentences] == [["a", "b"]]
    assert sentences[0].tags == ["O", "S-person"]  # BIO in the file, BIOES for both libraries


def test_score_is_strict_seqeval() -> None:
    gold = [["B-person", "E-person", "O"], ["S-location", "O", "O"]]
    pred = [["B-person", "E-person", "O"], ["O", "O", "S-group"]]
    out = flair_compare.score(gold, pred, [["a", "b", "c"], ["d", "e", "f"]])
    assert out["precision"] == 0.5 and out["recall"] == 0.5 and out["f1"] == 0.5


@needs_data
def test_crfhead_alone_without_flair(tmp_path: Path) -> None:
    report = run_script(tmp_path, "--only", "crfhead", "--models", "bilstm_crf")
    assert report["tiny"] is True and report["complete"] is True
    assert report["data"]["counts"]["train"]["sentences"] == flair_compare.TINY["train"]
    assert report["data"]["counts"]["test"]["sentences"] == flair_compare.TINY["test"]
    assert [(r["library"], r["model"]) for r in report["runs"]] == [("crfhead", "bilstm_crf")]
    check_run(report["runs"][0], "crfhead", "bilstm_crf")
    assert "| BiLSTM-CRF | crfhead | 1 |" in report["markdown"]
    assert "char_encoder=lstm" in report["runs"][0]["command"]
    # --render writes the same report again from the JSON alone; two JSONs: their runs merged.
    written = tmp_path / "out" / "flair_compare.json"
    for n, sources in ((1, [written]), (2, [written, written])):
        again = tmp_path / f"again{n}"
        done = subprocess.run(
            [sys.executable, str(SCRIPT), "--render", *map(str, sources), "--out-dir", str(again)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        md = (again / "flair_compare.md").read_text(encoding="utf-8")
        merged = json.loads((again / "flair_compare.json").read_text(encoding="utf-8"))
        assert len(merged["runs"]) == n
        if n == 1:
            assert md == report["markdown"]
        else:
            assert md.count("| BiLSTM-CRF | crfhead | 1 |") == 2


def test_unknown_model_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--models", "hmm", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--models" in done.stderr
    assert not list(tmp_path.iterdir())


def test_flair_spans_round_trip() -> None:
    importorskip_flair()
    from crfhead.data.sentence import Sentence

    tags = ["B-person", "E-person", "O", "S-location", "B-group", "I-group", "E-group"]
    sentence = Sentence(tokens=list("abcdefg"), tags=tags)
    (flair_sentence,) = flair_compare._flair_sentences([sentence])
    assert flair_compare._flair_tags(flair_sentence, "ner") == tags


def importorskip_flair() -> None:
    flair_compare._flair_compat()  # Flair 0.15 cannot be imported on transformers 5 without it
    pytest.importorskip("flair")


@needs_data
def test_side_by_side_tiny(tmp_path: Path) -> None:
    importorskip_flair()
    report = run_script(tmp_path)
    pairs = [(r["library"], r["model"]) for r in report["runs"]]
    assert pairs == [
        ("crfhead", "bilstm_crf"),
        ("flair", "bilstm_crf"),
        ("crfhead", "transformer_crf"),
        ("flair", "transformer_crf"),
    ]
    for run in report["runs"]:
        check_run(run, run["library"], run["model"])
    for line in ("| BiLSTM-CRF | flair | 1 |", "| transformer-CRF | crfhead | 1 |"):
        assert line in report["markdown"]
