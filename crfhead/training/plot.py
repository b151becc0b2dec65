"""Learning curves of a run, from its ``metrics.csv`` to a PNG: ``python -m crfhead.training.plot DIR``.

``DIR`` is a run's version folder (``runs/finance_indicator_crf/version_0``, as ``train.py`` prints
it) or its ``metrics.csv``. Two panels, by epoch: the losses (``train/loss``, the mean of the epoch's
logged steps, and ``val/loss``; ``val/log_loss`` per token when the run has no ``val/loss``) and
``val/f1`` with its best epoch marked. The PNG goes beside the CSV (``learning_curves.png``) unless
another path is given.

matplotlib is the ``plot`` extra (``pip install 'crfhead[plot]'``), imported on use; the figure is
drawn with matplotlib's object API (no ``pyplot``, no backend switch), so calling
:func:`plot_metrics` from a notebook or a server changes nothing else.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections import defaultdict
from pathlib import Path

__all__ = ["METRICS_FILE", "OUTPUT_FILE", "main", "plot_metrics", "read_curves"]

METRICS_FILE = "metrics.csv"
OUTPUT_FILE = "learning_curves.png"

_LOSSES = ("train/loss", "val/loss")
_F1 = "val/f1"


def _metrics_file(version_dir: str | Path) -> Path:
    path = Path(version_dir)
    csv_path = path if path.suffix == ".csv" else path / METRICS_FILE
    if not csv_path.is_file():
        raise FileNotFoundError(
            f"{csv_path} does not exist: give a run's version folder as train.py prints it "
            "(runs/<name>/version_<n>, logged with the CSV logger) or its metrics.csv"
        )
    return csv_path


def read_curves(version_dir: str | Path) -> dict[str, list[tuple[int, float]]]:
    """``{metric: [(epoch, value), ...]}`` from a run's ``metrics.csv``, one value per epoch.

    ``train/loss`` is averaged over the epoch's logged steps (a logged ``train/loss_epoch`` is used
    as it is); ``val/loss`` falls back to ``val/log_loss``; ``val/f1`` as logged. Metrics the run
    never logged are left out.

    Raises:
        FileNotFoundError: when there is no ``metrics.csv``.
    """
    values: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    with _metrics_file(version_dir).open(newline="", encoding="utf-8") as file:
        for row in csv.DictReader(file):
            try:
                epoch = int(float(row.get("epoch") or "nan"))
            except ValueError:
                continue
            for key, text in row.items():
                if key and text not in (None, ""):
                    try:
                        value = float(text)
                    except ValueError:
                        continue
                    if math.isfinite(value):
                        values[key][epoch].append(value)

    def per_epoch(key: str) -> list[tuple[int, float]]:
        return [(e, sum(v) / len(v)) for e, v in sorted(values.get(key, {}).items())]

    curves: dict[str, list[tuple[int, float]]] = {}
    train = per_epoch("train/loss_epoch") or per_epoch("train/loss")
    if train:
        curves["train/loss"] = train
    val = per_epoch("val/loss")
    if val:
        curves["val/loss"] = val
    elif per_epoch("val/log_loss"):
        curves["val/log_loss"] = per_epoch("val/log_loss")
    if per_epoch(_F1):
        curves[_F1] = per_epoch(_F1)
    return curves


def plot_metrics(version_dir: str | Path, output_png: str | Path | None = None) -> Path:
    """Draw a run's learning curves (losses and ``val/f1`` by epoch) to a PNG; its path.

    Args:
        version_dir: the run's version folder (``runs/<name>/version_<n>``) or its ``metrics.csv``.
        output_png: where the PNG goes; default ``learning_curves.png`` beside ``metrics.csv``.

    Raises:
        ModuleNotFoundError: without matplotlib (the ``plot`` extra), saying how to install it.
        FileNotFoundError: when there is no ``metrics.csv``.
        ValueError: when it holds none of ``train/loss``, ``val/loss``, ``val/f1``.
    """
    csv_path = _metrics_file(version_dir)
    curves = read_curves(csv_path)
    if not curves:
        raise ValueError(
            f"{csv_path} has no train/loss, val/loss or val/f1 rows to plot (an empty or unfinished run?)"
        )
    try:
        from matplotlib.figure import Figure
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            "plotting needs matplotlib, which is not installed: pip install 'crfhead[plot]'",
            name="matplotlib",
        ) from error

    out = Path(output_png) if output_png is not None else csv_path.parent / OUTPUT_FILE
    figure = Figure(figsize=(10, 4), layout="constrained")
    losses, f1 = figure.subplots(1, 2)
    for key, points in curves.items():
        if key == _F1:
            continue
        epochs, ys = zip(*points, strict=True)
        losses.plot(epochs, ys, marker="o", markersize=3, label=key)
    losses.set(title="loss", xlabel="epoch", ylabel="loss")
    if any(k != _F1 for k in curves):
        losses.legend()
    if _F1 in curves:
        epochs, ys = zip(*curves[_F1], strict=True)
        f1.plot(epochs, ys, marker="o", markersize=3, color="tab:green", label=_F1)
        best = max(range(len(ys)), key=lambda i: (ys[i], -i))
        f1.scatter([epochs[best]], [ys[best]], s=60, color="tab:red", zorder=3)
        f1.annotate(
            f"best {ys[best]:.4f} (epoch {epochs[best]})",
            (epochs[best], ys[best]),
            textcoords="offset points",
            xytext=(0, -14),
            ha="center",
        )
        f1.legend()
    f1.set(title="val/f1", xlabel="epoch", ylabel="span F1")
    for axes in (losses, f1):
        axes.grid(alpha=0.3)
        axes.xaxis.get_major_locator().set_params(integer=True)
    figure.suptitle(str(csv_path.parent))
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=100)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m crfhead.training.plot runs/<name>/version_<n> [-o curves.png]``; prints the PNG's path."""
    parser = argparse.ArgumentParser(
        prog="python -m crfhead.training.plot",
        description="Draw a run's learning curves (losses and val/f1 by epoch) from its metrics.csv.",
    )
    parser.add_argument("version_dir", help="a run's version folder, or its metrics.csv")
    parser.add_argument("-o", "--output", help=f"the PNG (default: {OUTPUT_FILE} beside the CSV)")
    args = parser.parse_args(argv)
    try:
        out = plot_metrics(args.version_dir, args.output)
    except (ModuleNotFoundError, FileNotFoundError, ValueError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
