"""Smoke test of ``scripts/bench_chain.py``: a tiny run of the CLI exits 0 and prints its tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torchcrf")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_chain.py"
TINY = ["--sizes", "2,5,3", "--repeats", "1", "--warmup", "1", "--skip-struct"]
HEADER = (
    "B  T  K  lengths  crfhead ms  crfhead-portable ms  crfhead-kernel ms  pytorch-crf ms  "
    "torch-struct ms"
)
MD_HEADER = "| B | T | K | lengths | crfhead ms | crfhead-portable ms | crfhead-kernel ms | pytorch-crf ms |"


def number(cell: str) -> float:
    """A timing or ratio cell as a float, without its marks (``*``, ``**``, and ``†`` under load)."""
    return float(cell.rstrip("*†"))


def bench(tmp_path: Path, *flags: str) -> str:
    # From another folder: the script must find its ``bench`` package next to itself.
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *TINY, *flags],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_text_report_without_memory(tmp_path: Path) -> None:
    out = bench(tmp_path, "--no-memory")
    assert out.count(HEADER) == 8  # loss, decode, marginals and the five ops added after them
    assert "== agreement" in out
    assert "All libraries agree on every case." in out
    assert " n/a " in out  # no peak memory measured


def test_markdown_report_with_memory(tmp_path: Path) -> None:
    out = bench(tmp_path, "--markdown")
    assert out.startswith("# crfhead CRF vs pytorch-crf vs torch-struct")
    assert out.count(MD_HEADER) == 8
    assert "## agreement (max errors; paths: identical / total)" in out
    assert "| 2 | 5 | 3 | var |" in out
    assert "All libraries agree on every case." in out
    # The kernel's own time: loss and decode only, each with its crfhead / kernel ratio.
    for section in out.split("\n## ")[1:3]:  # loss, decode
        head, _, first = section.splitlines()[2:5]
        cells = dict(zip(head.split(" | "), first.split(" | "), strict=True))
        assert number(cells["crfhead-kernel ms"]) > 0
        assert number(cells["crfhead / kernel"]) > 0
    marginals = out.split("\n## ")[3].splitlines()
    cells = dict(zip(marginals[2].split(" | "), marginals[4].split(" | "), strict=True))
    assert cells["crfhead-kernel ms"] == "—"


def test_contention_report(tmp_path: Path) -> None:
    """``--contention 1``: the idle and loaded phases are timed and reported side by side."""
    out = bench(tmp_path, "--contention", "1", "--contention-threads", "1", "--lengths", "full")
    assert "contention: 1 background process" in out
    for phase in ("idle, 1 thread", "loaded, default", "loaded, 1 thread"):
        assert phase in out, phase
    assert "pytorch-crf / crfhead" in out
