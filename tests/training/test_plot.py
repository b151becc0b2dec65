"""``crfhead.training.plot``: a run's learning curves from its ``metrics.csv`` to a PNG (the ``plot``
extra), as a function and as ``python -m crfhead.training.plot``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from crfhead.training.plot import main, plot_metrics, read_curves

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


def _run(tmp_path: Path, header: str = "epoch,step,train/loss,val/f1,val/loss") -> Path:
    """A version folder whose metrics.csv looks like a CSVLogger's: steps, then the epoch's val row."""
    version = tmp_path / "runs" / "tiny" / "version_0"
    version.mkdir(parents=True)
    rows = [
        "0,0,4.0,,",
        "0,1,2.0,,",
        "0,1,,0.5,2.5",
        "1,2,1.0,,",
        "1,3,1.0,,",
        "1,3,,0.75,1.5",
        "2,4,0.5,,",
        "2,4,,0.7,1.25",
        "3,4,,,",  # the test row's epoch: nothing to plot
    ]
    (version / "metrics.csv").write_text("\n".join([header, *rows]) + "\n")
    return version


def test_curves_are_one_value_per_epoch(tmp_path: Path) -> None:
    curves = read_curves(_run(tmp_path))
    assert curves == {
        "train/loss": [(0, 3.0), (1, 1.0), (2, 0.5)],
        "val/loss": [(0, 2.5), (1, 1.5), (2, 1.25)],
        "val/f1": [(0, 0.5), (1, 0.75), (2, 0.7)],
    }


def test_a_run_without_val_loss_plots_the_per_token_log_loss(tmp_path: Path) -> None:
    curves = read_curves(_run(tmp_path, header="epoch,step,train/loss,val/f1,val/log_loss"))
    assert curves["val/log_loss"][0] == (0, 2.5) and "val/loss" not in curves


def test_plot_metrics_writes_a_png_beside_the_csv_or_where_asked(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    version = _run(tmp_path)
    out = plot_metrics(version)
    assert out == version / "learning_curves.png" and out.read_bytes().startswith(PNG)
    elsewhere = plot_metrics(version / "metrics.csv", tmp_path / "figures" / "curves.png")
    assert elsewhere == tmp_path / "figures" / "curves.png" and elsewhere.stat().st_size > 1000


def test_python_m_crfhead_training_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    version = _run(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "crfhead.training.plot", str(version), "-o", "c.png"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "c.png" and (tmp_path / "c.png").read_bytes().startswith(PNG)


def test_error_without_matplotlib_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'crfhead\[plot\]'"):
        plot_metrics(_run(tmp_path))


def test_error_a_folder_without_metrics_csv_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(
        FileNotFoundError, match=r"metrics.csv does not exist: give a run's version"
    ):
        plot_metrics(tmp_path)
    assert main([str(tmp_path)]) == 2
    assert "error:" in capsys.readouterr().err


def test_error_a_csv_without_curves(tmp_path: Path) -> None:
    (tmp_path / "metrics.csv").write_text("epoch,step,test/f1\n0,0,0.5\n")
    with pytest.raises(ValueError, match="no train/loss, val/loss or val/f1 rows"):
        plot_metrics(tmp_path)
