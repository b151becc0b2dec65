"""The prepared first-device check: its shell driver and its three parts, rehearsed on the CPU.

``scripts/gpu_check.sh --rehearse`` runs what a GPU machine runs (the environment, the timing, the bf16
step, the Triton agreement, the benchmark table) at toy sizes, the agreement through Triton's
interpreter; the wheels it unpacks are a hand-built one here, so nothing is fetched.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def _wheel(folder: Path) -> Path:
    """A pure-Python wheel of a module ``crfhead_probe`` 0.1, built by hand (no index, no build tool)."""
    folder.mkdir()
    path = folder / "crfhead_probe-0.1-py3-none-any.whl"
    info = "crfhead_probe-0.1.dist-info"
    files = {
        "crfhead_probe/__init__.py": '__version__ = "0.1"\n',
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: crfhead-probe\nVersion: 0.1\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as z:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            z.writestr(name, text)
    return folder


def _run(
    *args: str, tmp_path: Path, env: dict[str, str], timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=timeout,
        env={**os.environ, "PYTHON": sys.executable, **env},
        check=False,
    )


@pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1",
    reason="needs TRITON_INTERPRET=1 (test.sh's triton pass)",
)
def test_the_device_run_rehearses_on_the_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    out = tmp_path / "out"
    env = {"OUT": str(out), "GPU_CHECK_WHEELS": str(_wheel(tmp_path / "wheels"))}
    done = _run("--rehearse", tmp_path=tmp_path, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = (out / "gpu_check.log").read_text(encoding="utf-8")
    for line in (
        "from the wheels: crfhead_probe-0.1.dist-info",
        "crfhead loss (64, 128, 17) on cpu",
        "bf16 transformer-CRF step: emissions torch.bfloat16",
        "agreement, triton vs portable: OK on 24 of 88 cases (budget 0 s spent)",
        "gpu_check: every step ok",
    ):
        assert line in log, line
    table = (out / "bench_cpu.md").read_text(encoding="utf-8")
    assert "## loss: NLL forward + backward" in table
    assert "All libraries agree on every case." in table


def test_a_failed_step_is_reported_and_the_later_ones_still_run(tmp_path: Path) -> None:
    """The checks' Python fails (a stand-in interpreter); the benchmark table still comes, exit 1."""
    fake = tmp_path / "python"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'case "$*" in *gpu_check.py*) echo "checks broke" >&2; exit 3 ;; esac\n'
        f'exec {sys.executable} "$@"\n',
        encoding="utf-8",
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    out = tmp_path / "out"
    done = _run("--rehearse", tmp_path=tmp_path, env={"OUT": str(out), "PYTHON": str(fake)})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    log = (out / "gpu_check.log").read_text(encoding="utf-8")
    assert "checks broke" in log
    assert "== checks (cpu): timing, bf16 step, agreement: FAILED (exit 3)" in log
    assert "== benchmark table (cpu): ok" in log
    assert "gpu_check: FAILED: checks (cpu)" in log
    assert (out / "bench_cpu.md").stat().st_size > 0


def test_without_cuda_the_device_run_refuses_and_says_what_to_do(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the device run would start")
    done = _run(tmp_path=tmp_path, env={})
    assert done.returncode == 2
    assert "has no torch that sees a CUDA device" in done.stderr
    assert "--rehearse" in done.stderr


def test_an_unknown_argument_gets_the_usage(tmp_path: Path) -> None:
    done = _run("--fast", tmp_path=tmp_path, env={})
    assert done.returncode == 2
    assert "usage: bash scripts/gpu_check.sh [--prepare | --rehearse]" in done.stderr
