"""The results as pictures: one PNG per subcommand, in ``docs/results/`` unless ``--out-dir`` says.

    python scripts/plots.py learning-curves        # accuracy and log-loss vs training size, both worlds
    python scripts/plots.py trellis                # marginals and max-marginals with the Viterbi path
    python scripts/plots.py finance                # the finance case study per tagger, unseen words too
    python scripts/plots.py f1 runs/msm2013_indicator_crf/version_0/test_report.json [MORE ...]
    python scripts/plots.py training runs/msm2013_indicator_crf/version_0
    python scripts/plots.py all                    # the first three

The first three read the lab's payloads (``crfhead/lab/static/data/<tab>.json``, written by
``scripts/lab_payloads.py`` from :mod:`crfhead.lab.payloads`), or ``--payload FILE``;
``learning-curves --recompute`` and ``trellis --recompute`` call the payload functions instead (with
``--ns`` / ``--test-n``, a small run). ``f1`` draws per-type span F1 bars from one or more
``test_report.json`` files (the trainer's test report), ``training`` a run's losses and ``val/f1`` by
epoch from its ``metrics.csv`` (:func:`crfhead.training.plot.plot_metrics`). matplotlib is the
``plot`` extra; the figures use the Agg backend and are readable without colour (markers and dashes).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "crfhead" / "lab" / "static" / "data"
OUT = ROOT / "docs" / "results"
DPI = 110

STYLES = {
    "hmm": ("o", "-"),
    "crf_words": ("s", "--"),
    "crf_window": ("^", "-."),
    "bayes": ("", ":"),
    "bayes_viterbi": ("", (0, (1, 3))),
    "memm": ("s", "--"),
    "crf": ("^", "-."),
    "perceptron": ("D", ":"),
}
"""Tagger key → (marker, line style): the curves stay apart in grey."""

SEED_FINANCE = {
    "hmm": {"accuracy": [0.909, 0.936, 0.977], "f1": [0.618, 0.745, 0.923]},
    "memm": {"accuracy": [0.890, 0.942, 0.982], "f1": [0.517, 0.756, 0.936]},
    "crf": {"accuracy": [0.895, 0.943, 0.983], "f1": [0.556, 0.776, 0.943]},
    "perceptron": {"accuracy": [0.909, 0.960, 0.991], "f1": [0.572, 0.840, 0.964]},
}
"""Seed 000's finance table at 3 / 10 / 30 documents (its corpus); unseen-word accuracy at 30 only."""
SEED_FINANCE_DOCS = [3, 10, 30]
SEED_UNSEEN_30 = {"hmm": 0.911, "perceptron": 0.958}


def _load(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist (python scripts/lab_payloads.py writes it)")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _save(figure: Figure, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=DPI)
    print(out)
    return out


# ------------------------------------------------------------------------------- learning curves
def learning_curves(payload: dict[str, Any], out: Path) -> Path:
    """Accuracy and log-loss against training size, one row per world (the learning_curves payload)."""
    labels = {t["key"]: t["label"] for t in payload["taggers"]}
    worlds = payload["worlds"]
    figure = Figure(figsize=(11, 4.2 * len(worlds)), layout="constrained")
    axes = figure.subplots(len(worlds), 2, squeeze=False)
    for row, world in zip(axes, worlds, strict=True):
        for ax, metric, ylabel in (
            (row[0], "acc", "test token accuracy"),
            (row[1], "loss", "conditional log-loss (nats/token)"),
        ):
            for key, values in world[metric].items():
                marker, line = STYLES.get(key, ("x", "-"))
                ax.plot(
                    world["n"], values, marker=marker, linestyle=line, label=labels.get(key, key)
                )
            ax.set_xscale("log")
            ax.set(xlabel="training sequences", ylabel=ylabel, title=f"{world['label']}: {ylabel}")
            ax.grid(alpha=0.3)
        row[0].legend(fontsize=8)
    figure.suptitle(f"Learning curves ({worlds[0]['test_n']} test sequences per point)")
    return _save(figure, out)


# --------------------------------------------------------------------------------------- trellis
def trellis(payload: dict[str, Any], out: Path) -> Path:
    """Marginals (+, x) and max-marginals (max, x) of one draw, with the Viterbi, posterior and gold paths."""
    T, K = payload["length"], payload["num_states"]
    t = list(range(T))
    figure = Figure(figsize=(13, 6.5), layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True)
    for ax, key, title in (
        (top, "marginals", "(+, \u00d7): marginals \u03b3_t(k)"),
        (bottom, "max_marginals_relative", "(max, \u00d7): best path through (t, k) / best path"),
    ):
        grid = [[payload[key][i][k] for i in t] for k in range(K)]  # (K, T)
        image = ax.imshow(grid, origin="lower", aspect="auto", cmap="Greys", vmin=0, vmax=1)
        ax.plot(t, payload["viterbi"], "-", color="tab:red", lw=2, label="Viterbi")
        ax.plot(
            t,
            payload["posterior"],
            "o",
            mfc="none",
            mec="tab:blue",
            ms=10,
            mew=2,
            label="posterior argmax",
        )
        ax.plot(t, payload["gold"], "x", color="tab:green", ms=8, mew=2, label="gold")
        for i in payload["disagree_at"]:
            ax.axvspan(i - 0.5, i + 0.5, fill=False, hatch="//", ec="tab:orange", lw=0, alpha=0.6)
        ax.set(ylabel="state", title=title, yticks=range(K))
        figure.colorbar(image, ax=ax, fraction=0.02)
    handles, names = top.get_legend_handles_labels()
    figure.legend(handles, names, loc="outside lower center", ncol=3, fontsize=9)
    bottom.set(xlabel="position t", xticks=t)
    figure.suptitle(
        f"One draw of the {payload['world'].replace('_', '-')} world: Viterbi "
        f"{payload['correct_viterbi']}/{T} right, posterior {payload['correct_posterior']}/{T} "
        f"(expected {payload['expected_correct_viterbi']:.3f} vs "
        f"{payload['expected_correct_posterior']:.3f}); hatched: the two disagree"
    )
    return _save(figure, out)


# --------------------------------------------------------------------------------------- finance
def finance(payload: dict[str, Any], out: Path, seed: bool = True) -> Path:
    """Token accuracy, span F1 and unseen-word accuracy per tagger against training documents."""
    figure = Figure(figsize=(14, 4.4), layout="constrained")
    axes = figure.subplots(1, 3)
    docs = payload["docs"]
    for tagger in payload["taggers"]:
        key, label = tagger["key"], tagger["label"]
        cells = payload["cells"][key]
        marker, line = STYLES.get(key, ("x", "-"))
        for ax, metric in zip(axes, ("accuracy", "f1", "unseen_accuracy"), strict=True):
            ys = [c[metric] for c in cells]
            # Error bars: the standard deviation over corpus runs, where there were several.
            errors = [c.get("sd", {}).get(metric, 0.0) for c in cells]
            lines = ax.errorbar(
                [c["docs"] for c in cells],
                ys,
                yerr=errors if any(errors) else None,
                marker=marker,
                linestyle=line,
                label=label,
                capsize=3,
            ).lines
            if seed and key in SEED_FINANCE and metric in SEED_FINANCE[key]:
                ax.plot(
                    SEED_FINANCE_DOCS,
                    SEED_FINANCE[key][metric],
                    marker=marker,
                    mfc="none",
                    linestyle="none",
                    color=lines[0].get_color(),
                    ms=9,
                )
            if seed and metric == "unseen_accuracy" and key in SEED_UNSEEN_30:
                ax.plot(
                    [30],
                    [SEED_UNSEEN_30[key]],
                    marker=marker,
                    mfc="none",
                    linestyle="none",
                    color=lines[0].get_color(),
                    ms=9,
                )
    rates = {c["docs"]: c.get("unseen_rate") for cells in payload["cells"].values() for c in cells}
    for ax, title in zip(
        axes,
        ("token accuracy", "span F1 (seqeval strict)", "accuracy on unseen words"),
        strict=True,
    ):
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(docs)
        ax.set_xticklabels([str(d) for d in docs])
        ax.set(xlabel="training documents", title=title)
        ax.grid(alpha=0.3)
    axes[2].set_xticklabels(
        [f"{d}\n({rates[d]:.2f} unseen)" if rates.get(d) is not None else str(d) for d in docs]
    )
    axes[0].legend(fontsize=8, title="filled: ours; hollow: the seed's", title_fontsize=8)
    if seed:
        axes[2].annotate(
            "the seed reports unseen-word\naccuracy at 30 documents only",
            (0.03, 0.03),
            xycoords="axes fraction",
            fontsize=8,
        )
    figure.suptitle(f"Finance case study: {payload.get('test', 'test documents')}")
    return _save(figure, out)


# -------------------------------------------------------------------------------------- F1 bars
def _types(report: dict[str, Any]) -> list[str]:
    return sorted(k[: -len("/f1")] for k in report if k.endswith("/f1"))


def f1_bars(reports: Sequence[Path], labels: Sequence[str], title: str, out: Path) -> Path:
    """Per-type span F1 bars from ``test_report.json`` files, one group per entity type."""
    data = [_load(p) for p in reports]
    types = sorted({t for r in data for t in _types(r)})
    if not types:
        raise ValueError(f"no '<TYPE>/f1' key in {[str(p) for p in reports]}: not a test report?")
    width = 0.8 / len(data)
    figure = Figure(
        figsize=(max(6.0, 1.4 * len(types) * len(data) ** 0.5 + 2), 4.4), layout="constrained"
    )
    ax = figure.subplots()
    hatches = ("", "//", "..", "xx", "\\\\", "oo")
    for j, (report, label) in enumerate(zip(data, labels, strict=True)):
        xs = [i + (j - (len(data) - 1) / 2) * width for i in range(len(types))]
        ys = [report.get(f"{t}/f1", 0.0) for t in types]
        bars = ax.bar(
            xs,
            ys,
            width,
            label=f"{label}: micro F1 {report.get('f1', float('nan')):.3f}",
            hatch=hatches[j % len(hatches)],
            edgecolor="black",
        )
        ax.bar_label(bars, labels=[f"{y:.2f}" for y in ys], fontsize=7, padding=1)
    support = data[0]
    ax.set_xticks(range(len(types)))
    ax.set_xticklabels(
        [
            f"{t}\n(n={int(support.get(f'{t}/support', 0))})" for t in types
        ]  # gold spans, first report
    )
    ax.set(ylabel="span F1 (seqeval strict)", ylim=(0, 1.08), title=title)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8, loc="upper left")
    return _save(figure, out)


def _run_name(path: Path) -> str:
    """``runs/<name>/version_<n>/test_report.json`` → ``<name>``; else the file's folder name."""
    folder = path.parent if path.suffix else path
    if folder.name.startswith("version_"):
        return folder.parent.name
    return folder.name


# --------------------------------------------------------------------------------------- command
def main(argv: list[str] | None = None) -> int:
    """Parse the subcommand and draw its PNG."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_)
        p.add_argument("--out-dir", type=Path, default=OUT, help="where the PNG goes")
        return p

    lc = add("learning-curves", "accuracy and log-loss vs training size, both worlds")
    lc.add_argument("--payload", type=Path, default=DATA / "learning_curves.json")
    lc.add_argument("--recompute", action="store_true", help="call the payload function instead")
    lc.add_argument("--ns", type=int, nargs="+", default=[10, 30, 100, 300, 1000])
    lc.add_argument("--test-n", type=int, default=2000)
    tr = add("trellis", "marginals and max-marginals with the Viterbi path")
    tr.add_argument("--payload", type=Path, default=DATA / "trellis.json")
    tr.add_argument("--recompute", action="store_true", help="call the payload function instead")
    fi = add("finance", "the finance case study per tagger")
    fi.add_argument("--payload", type=Path, default=DATA / "finance.json")
    fi.add_argument("--no-seed", action="store_true", help="leave out the seed's numbers")
    f1 = add("f1", "per-type F1 bars from test_report.json files")
    f1.add_argument("reports", type=Path, nargs="+", help="test_report.json files")
    f1.add_argument("--label", action="append", help="one per report (default: the run's name)")
    f1.add_argument("--name", help="the PNG is f1_<name>.png (default: the first run's name)")
    f1.add_argument("--title", default=None)
    tc = add("training", "a run's losses and val/f1 by epoch, from its metrics.csv")
    tc.add_argument("run", type=Path, help="the run's version folder or its metrics.csv")
    tc.add_argument("--name", help="the PNG is training_<name>.png (default: the run's name)")
    add("all", "learning-curves, trellis and finance from the lab's payloads")
    args = parser.parse_args(argv)

    out_dir: Path = args.out_dir
    try:
        if args.command in ("learning-curves", "all"):
            if getattr(args, "recompute", False):
                from crfhead.lab.payloads import learning_curves_payload

                payload = learning_curves_payload(ns=args.ns, test_n=args.test_n)
            else:
                payload = _load(getattr(args, "payload", DATA / "learning_curves.json"))
            learning_curves(payload, out_dir / "learning_curves.png")
        if args.command in ("trellis", "all"):
            if getattr(args, "recompute", False):
                from crfhead.lab.payloads import trellis_payload

                payload = trellis_payload()
            else:
                payload = _load(getattr(args, "payload", DATA / "trellis.json"))
            trellis(payload, out_dir / "trellis.png")
        if args.command in ("finance", "all"):
            payload = _load(getattr(args, "payload", DATA / "finance.json"))
            finance(payload, out_dir / "finance.png", seed=not getattr(args, "no_seed", False))
        if args.command == "f1":
            labels = args.label or [_run_name(p) for p in args.reports]
            if len(labels) != len(args.reports):
                parser.error(f"{len(labels)} --label for {len(args.reports)} reports")
            name = args.name or _run_name(args.reports[0])
            title = args.title or f"per-type test F1: {name}"
            f1_bars(args.reports, labels, title, out_dir / f"f1_{name}.png")
        if args.command == "training":
            from crfhead.training.plot import plot_metrics

            name = args.name or _run_name(args.run)
            print(plot_metrics(args.run, out_dir / f"training_{name}.png"))
    except (FileNotFoundError, ValueError) as error:
        print(f"plots.py {args.command}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
