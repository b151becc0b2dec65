"""Smoke tests of the results scripts: each runs at a tiny setting into a temporary folder and its outputs parse.

``scripts/label_bias_table.py``, ``scripts/mistake_bound_table.py``, every subcommand of
``scripts/plots.py``, ``scripts/worlds_tables.py --quick`` and ``scripts/finance_table.py`` at one
training document. Each script runs as a user runs it (a subprocess, from another folder).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
PNG = b"\x89PNG\r\n\x1a\n"


def is_png(path: Path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == PNG and path.stat().st_size > 5000


def table_rows(markdown: str, header_start: str) -> list[list[str]]:
    """The body rows of the Markdown table whose header starts with ``header_start``."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


# ------------------------------------------------------------------------------------ label bias
def test_label_bias_table_tiny(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_script(
        "label_bias_table.py",
        *("--train-docs", "3", "--ending", "first", "quarter", "--ending", "fiscal", "year"),
        *("--polyseme", "drovine", "--out-dir", str(out)),
        cwd=tmp_path,
    )
    result: dict[str, Any] = json.loads((out / "label_bias.json").read_text())
    assert result["command"].startswith("python scripts/label_bias_table.py --train-docs 3")
    conts = result["continuations"]
    assert [c["ending"] for c in conts] == ["first quarter", "fiscal year"]
    memm = [float(c["memm"]["p_focus_exact"]) for c in conts]
    assert max(memm) - min(memm) < 1e-12  # Proposition 2
    assert result["summary"]["memm_identical_printed"] is True
    for c in conts:
        for model in ("crf", "memm", "hmm"):
            assert 0.0 <= c[model]["p_focus"] <= 1.0
            assert c[model]["viterbi_opens_date"] == (c[model]["viterbi_from_focus"][0] == "B-DATE")
    poly = result["polyseme"]
    assert poly["word"] == "drovine"
    assert poly["training_tags"] == {"B-ORG": 5, "I-PRODUCT": 4}
    assert [c["context"] for c in poly["contexts"]][:2] == ["company", "product"]
    assert result["training"]["hmm"]["alpha"] in (1.0, 0.1, 0.01)
    text = (out / "label_bias.md").read_text()
    rows = table_rows(text, "| continuation |")
    assert [r[0] for r in rows] == ["the first quarter", "the fiscal year"]
    assert len({r[3] for r in rows}) == 1  # the MEMM's column: one printed value
    assert len(table_rows(text, "| context |")) == 3


# ---------------------------------------------------------------------------------- mistake bound
def test_mistake_bound_table_tiny(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_script(
        "mistake_bound_table.py", "--seeds", "2", "--n", "20", "--out-dir", str(out), cwd=tmp_path
    )
    result = json.loads((out / "mistake_bound.json").read_text())
    assert len(result["setup"]["seeds"]) == 2
    assert len(result["runs"]) == 2
    assert all(len(run_) == 6 for run_ in result["runs"])
    assert result["checks"]["bound_holds_everywhere"] is True
    for row in result["main"]:
        assert row["mistakes"] <= row["bound"]
        assert row["gamma"] >= row["target_gamma"]
        assert row["converged"] is True
    text = (out / "mistake_bound.md").read_text()
    assert len(table_rows(text, "| target gamma | gamma |")) == 6
    assert len(table_rows(text, "| target gamma | mistakes")) == 6


# ------------------------------------------------------------------------------------------ plots
def test_plots_all_from_the_lab_payloads(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    printed = run_script("plots.py", "all", "--out-dir", str(out), cwd=tmp_path)
    names = ["learning_curves.png", "trellis.png", "finance.png"]
    assert printed.split() == [str(out / n) for n in names]
    assert all(is_png(out / n) for n in names)


def test_plots_recompute_tiny(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    run_script(
        "plots.py",
        *("learning-curves", "--recompute", "--ns", "10", "20", "--test-n", "50"),
        *("--out-dir", str(out)),
        cwd=tmp_path,
    )
    run_script("plots.py", "trellis", "--recompute", "--out-dir", str(out), cwd=tmp_path)
    assert is_png(out / "learning_curves.png")
    assert is_png(out / "trellis.png")


def write_report(path: Path, f1: dict[str, float]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    report: dict[str, float] = {"f1": sum(f1.values()) / len(f1), "accuracy": 0.9}
    for kind, value in f1.items():
        report[f"{kind}/f1"] = value
        report[f"{kind}/support"] = 10.0
    path.write_text(json.dumps(report))
    return path


def test_plots_f1_bars_from_test_reports(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    a = write_report(tmp_path / "runs/msm_a/version_0/test_report.json", {"PER": 0.8, "LOC": 0.6})
    b = write_report(tmp_path / "runs/msm_b/version_3/test_report.json", {"PER": 0.7, "ORG": 0.5})
    run_script("plots.py", "f1", str(a), "--out-dir", str(out), cwd=tmp_path)
    assert is_png(out / "f1_msm_a.png")  # named after the run
    run_script(
        "plots.py",
        *("f1", str(a), str(b), "--label", "A", "--label", "B", "--name", "both"),
        *("--out-dir", str(out)),
        cwd=tmp_path,
    )
    assert is_png(out / "f1_both.png")


def test_plots_f1_refuses_a_file_without_per_type_f1(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    bad = tmp_path / "report.json"
    bad.write_text(json.dumps({"f1": 0.5}))
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "plots.py"), "f1", str(bad), "--out-dir", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "no '<TYPE>/f1' key" in done.stderr


def test_plots_training_curve_from_metrics_csv(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    run_dir = tmp_path / "runs" / "finance_indicator_crf" / "version_0"
    run_dir.mkdir(parents=True)
    with (run_dir / "metrics.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["epoch", "step", "train/loss", "val/loss", "val/f1"])
        for epoch in range(3):
            writer.writerow([epoch, 2 * epoch, 3.0 / (epoch + 1), "", ""])
            writer.writerow([epoch, 2 * epoch + 1, "", 2.5 / (epoch + 1), 0.5 + 0.1 * epoch])
    out = tmp_path / "out"
    run_script("plots.py", "training", str(run_dir), "--out-dir", str(out), cwd=tmp_path)
    assert is_png(out / "training_finance_indicator_crf.png")


# ------------------------------------------------------------------------ the seed's other tables
def test_worlds_tables_quick(tmp_path: Path) -> None:
    out = tmp_path / "worlds.json"
    printed = run_script(
        "worlds_tables.py",
        *("--quick", "--test-n", "100", "--memm-n", "50", "--out", str(out)),
        cwd=tmp_path,
    )
    assert "Test token accuracy (100 test sequences" in printed
    result = json.loads(out.read_text())
    assert {r["n"] for r in result["learning_curves"]} == {10, 100}
    assert len(result["memm_ceilings"]) == 4  # two worlds x two lookaheads


def test_finance_table_two_runs_tuned(tmp_path: Path) -> None:
    """Two corpus runs at one document, the MEMM tuned on dev: the tables, the JSON, the claims."""
    args = ("--docs", "1", "--runs", "2", "--test-docs", "2", "--max-epochs", "1")
    printed = run_script(
        "finance_table.py", *args, "--out-dir", str(tmp_path), cwd=tmp_path, timeout=900
    )
    assert "| 1 |" in printed and "± " in printed
    result = json.loads((tmp_path / "finance.json").read_text())
    assert result["profile"] == "seed" and result["runs"] == 2
    assert set(result["cells"]) == {"hmm", "memm", "crf", "perceptron"}
    for cells in result["cells"].values():
        (cell,) = cells
        assert len(cell["runs"]) == 2
        accs = [r["accuracy"] for r in cell["runs"]]
        assert cell["accuracy"] == pytest.approx(sum(accs) / 2)
        assert cell["sd"]["accuracy"] == pytest.approx(abs(accs[0] - accs[1]) / 2**0.5)
    # the two runs are different corpora: their test sets differ
    assert len({r["tokens"] for r in result["cells"]["hmm"][0]["runs"]}) == 2
    tuning = result["tuning"]["memm"]["1"]
    assert set(tuning["dev_f1"]) == {"--model.lr=0.01", "--model.lr=0.05", "--model.lr=0.2"}
    best = max(tuning["dev_f1"], key=tuning["dev_f1"].get)
    assert tuning["chosen"] == [best] and result["cells"]["memm"][0]["overrides"] == [best]
    assert {o["claim"] for o in result["orderings"]} and (tmp_path / "finance.md").is_file()
    comp = result["composition"]["1"]
    assert sum(comp["by_tag"].values()) == pytest.approx(1.0) and 0 < comp["unseen_rate"] < 1
