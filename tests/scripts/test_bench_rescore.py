"""Smoke test of ``scripts/bench_rescore.py``: a tiny run prints one row of six timings per run."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import run_script


def test_a_tiny_run_prints_its_table(tmp_path: Path) -> None:
    out = run_script(
        "bench_rescore.py", "--sizes", "2,3,2", "--k", "3", "--runs", "2", cwd=tmp_path
    )
    lines = out.splitlines()
    assert lines[0].startswith("| code | B,T,K | topk us | topk + backward us |")
    rows = [line.split("|")[1:-1] for line in lines[2:]]
    assert len(rows) == 2
    for row in rows:
        assert row[0].strip() == "this checkout" and row[1].strip() == "2,3,2"
        assert all(float(cell) > 0 for cell in row[2:]) and len(row) == 8
