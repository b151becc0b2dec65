"""The prepared first-device check runs: its agreement part through Triton's interpreter on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1",
    reason="needs TRITON_INTERPRET=1 (test.sh's triton pass)",
)
def test_gpu_check_agreement_runs_on_the_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--device", "cpu", "--quick"],
        capture_output=True, text=True, cwd=tmp_path, timeout=900, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "agreement, triton vs portable: OK" in out.stdout
