"""Smoke test of ``scripts/bench_higher_order.py``: a tiny run prints one row per suite and method."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import run_script

SUITES = ("chain", "cliques", "mixed", "potts", "rowcliques")  # the script's default: every suite


def test_a_tiny_run_prints_every_suite_and_method(tmp_path: Path) -> None:
    out = run_script(
        "bench_higher_order.py",
        *("--groups", "1", "--size", "2,3,2", "--max-iterations", "20"),
        cwd=tmp_path,
        timeout=120,
    )
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + len(SUITES) * 4  # the header, then every suite x 4 methods
    assert all(row.count("|") == rows[0].count("|") for row in rows)
    assert {row.split("|")[1].strip() for row in rows[1:]} == set(SUITES)
    # ILP always certifies
    assert sum("| ilp |" in row and "| 1/1 |" in row for row in rows) == len(SUITES)
