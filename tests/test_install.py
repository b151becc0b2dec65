"""The package as a user installs it: ``pip install .`` (not editable) into a fresh folder, then its
``crfhead`` console script, ``python -m crfhead``, the packaged configs and the kernel source, run from
an empty folder far from the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("build")
    source = (
        build / "crfhead-src"
    )  # a copy: setuptools builds in the source tree (build/, egg-info)
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "crfhead", source / "crfhead", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
            "--no-index", "--target", str(target), str(source),
        ],
        capture_output=True, text=True, cwd=build, check=False,
        env={**os.environ, "PIP_NO_WARN_SCRIPT_LOCATION": "1"},
    )  # fmt: skip
    if out.returncode != 0:
        pytest.skip(f"pip cannot build the package here: {out.stderr[-500:]}")
    return target


def _run(installed: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(installed)}
    return subprocess.run(
        list(args), capture_output=True, text=True, cwd=cwd, env=env, check=False, timeout=600
    )


def test_the_installed_package_is_the_one_imported_and_carries_its_data(
    installed: Path, tmp_path: Path
) -> None:
    code = (
        "import crfhead, pathlib; p = pathlib.Path(crfhead.__file__).parent; "
        "print(p); print((p / 'configs' / 'base.yaml').is_file(), (p / 'py.typed').is_file(), "
        "(p / 'engine' / 'backends' / 'csrc' / 'chain_cpu.cpp').is_file(), "
        "(p / 'engine' / 'backends' / 'csrc' / 'chain_ops.cpp').is_file(), crfhead.__version__)"
    )
    out = _run(installed, sys.executable, "-c", code, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    where, flags = out.stdout.splitlines()
    assert Path(where).is_relative_to(installed)
    assert flags.split()[:4] == ["True", "True", "True", "True"]


def test_the_console_script_and_python_m_crfhead(installed: Path, tmp_path: Path) -> None:
    script = installed / "bin" / "crfhead"
    assert script.is_file()
    for cmd in ([str(script), "--help"], [sys.executable, "-m", "crfhead", "--help"]):
        out = _run(installed, *cmd, cwd=tmp_path)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "predict" in out.stdout and "evaluate" in out.stdout
    out = _run(installed, str(script), "configs", cwd=tmp_path)
    assert out.returncode == 0 and "finance/indicator_crf.yaml" in out.stdout


def test_a_packaged_config_trains_from_an_empty_folder_and_writes_nothing_there(
    installed: Path, tmp_path: Path
) -> None:
    out = _run(
        installed,
        str(installed / "bin" / "crfhead"),
        "train",
        "--config",
        "crfhead:finance/indicator_crf.yaml",
        "--trainer.fast_dev_run=true",
        "--data.corpus.init_args.train_docs=2",
        "--data.corpus.init_args.dev_docs=1",
        "--data.corpus.init_args.test_docs=1",
        cwd=tmp_path,
    )
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-2000:])
    assert list(tmp_path.iterdir()) == []
