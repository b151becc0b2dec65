"""The seed's finance case study, repeated over corpus runs: four taggers at 3 / 10 / 30 documents.

*Sequence Labeling: From HMMs to Linear-Chain CRFs*, "Finance case study": an HMM, a causal MEMM, a CRF and an averaged
perceptron, trained on the first ``n`` documents of one corpus run and tested on 200 documents of
another. Each cell here trains the shipped config (``configs/finance/{hmm,memm,indicator_crf,
perceptron}.yaml``) through :func:`crfhead.training.cli.main`, on corpus run ``2r`` (train and dev)
and ``2r + 1`` (test) for ``r < runs``, with the model seed ``r``, and reports the mean and standard
deviation over the runs.

Tuning uses the dev split only (the 20 documents after the training ones, of the training run): a
tagger with a grid (:data:`TUNING`) is trained once per grid point on run 0 at each size, and the
point with the best dev span F1 is used for every run at that size. Epochs are chosen on dev for
every tagger: the checkpoint with the best dev F1 is the one tested. The perceptron has no grid:
from zero weights, without a prior, every update is the learning rate times an integer vector, so
the averaged weights at any learning rate are a multiple of those at 1 and decode the same paths.

:func:`orderings` checks the seed's claims on the result (which tagger leads at which size), and
:func:`markdown` writes the tables. ``scripts/finance_table.py`` is the command.
"""

from __future__ import annotations

import hashlib
import math
import os
import statistics
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "SEED_TABLE",
    "SEED_UNSEEN_30",
    "TAGGERS",
    "TUNING",
    "composition",
    "markdown",
    "orderings",
    "study",
]

TAGGERS: dict[str, tuple[str, str]] = {
    "hmm": ("HMM", "hmm"),
    "memm": ("causal MEMM", "memm"),
    "crf": ("CRF", "indicator_crf"),
    "perceptron": ("averaged perceptron", "perceptron"),
}
"""Tagger key → (label, config name under ``configs/finance``)."""

TUNING: dict[str, tuple[tuple[str, ...], ...]] = {
    "memm": (("--model.lr=0.01",), ("--model.lr=0.05",), ("--model.lr=0.2",)),
}
"""Tagger key → the grid of overrides tried on dev (the MEMM's Adam learning rate)."""

SEED_TABLE: dict[str, dict[int, tuple[float, float]]] = {
    "hmm": {3: (0.909, 0.618), 10: (0.936, 0.745), 30: (0.977, 0.923)},
    "memm": {3: (0.890, 0.517), 10: (0.942, 0.756), 30: (0.982, 0.936)},
    "crf": {3: (0.895, 0.556), 10: (0.943, 0.776), 30: (0.983, 0.943)},
    "perceptron": {3: (0.909, 0.572), 10: (0.960, 0.840), 30: (0.991, 0.964)},
}
"""The seed's table: tagger → docs → (token accuracy, span F1), on its own corpus."""

SEED_UNSEEN_30: dict[str, float] = {"hmm": 0.911, "perceptron": 0.958}
"""The seed's accuracy on unseen tokens at 30 documents: the two ends of its range."""

_METRICS = ("accuracy", "f1", "unseen_accuracy", "unseen_rate")
_ROOT = Path(__file__).resolve().parents[2]


def _config(name: str) -> str:
    """The path of ``configs/finance/<name>.yaml``: the checkout's, else the packaged one."""
    local = _ROOT / "configs" / "finance" / f"{name}.yaml"
    return str(local) if local.exists() else f"crfhead:finance/{name}.yaml"


@contextmanager
def _inside(folder: Path) -> Iterator[None]:
    """Run with ``folder`` as the working directory: the configs' relative ``runs/`` land there."""
    here = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


def _cell(
    config: str,
    docs: int,
    run: int,
    profile: str,
    overrides: Sequence[str],
    root: Path,
) -> dict[str, float]:
    """Train one config on ``docs`` documents of corpus run ``2 * run``; its test report and dev F1."""
    from crfhead.training.cli import main

    tag = hashlib.sha256("\0".join(overrides).encode()).hexdigest()[:8]
    out = root / f"{config}_{docs}_{run}_{tag}"
    cli = main(
        [
            "--config",
            _config(config),
            f"--data.corpus.init_args.train_docs={docs}",
            f"--data.corpus.init_args.seed={2 * run}",
            f"--data.corpus.init_args.test_seed={2 * run + 1}",
            f"--data.corpus.init_args.profile={profile}",
            f"--seed_everything={run}",
            f"--trainer.default_root_dir={out}",
            f"--trainer.logger.init_args.save_dir={out}",
            "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false",
            *overrides,
        ]
    )
    report = {k: float(v) for k, v in cli.model.test_report.items() if isinstance(v, (int, float))}
    best = cli.trainer.checkpoint_callback.best_model_score  # type: ignore[union-attr]
    report["dev_f1"] = float(best) if best is not None else math.nan
    return report


def _summary(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample standard deviation (0 for one value)."""
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


def study(
    docs: Sequence[int] = (3, 10, 30),
    taggers: Sequence[str] = tuple(TAGGERS),
    runs: int = 5,
    profile: str = "seed",
    tune: bool = True,
    overrides: Sequence[str] = (),
    log: Any = None,
) -> dict[str, Any]:
    """Train every (tagger, size, run) cell; means, spreads, the runs and the tuning.

    Args:
        docs: training sizes in documents.
        taggers: keys of :data:`TAGGERS`.
        runs: corpus runs per cell (run ``r``: train and dev on run ``2r``, test on ``2r + 1``).
        profile: the generator's profile (:mod:`crfhead.data.finance.profile`).
        tune: choose each grid of :data:`TUNING` on dev (run 0, each size); else the configs'.
        overrides: extra command-line overrides for every cell (e.g. ``--trainer.max_epochs=1``).
        log: called with one line of progress per cell (e.g. ``print``), or ``None``.

    Returns:
        ``{"docs", "runs", "profile", "taggers": [{key, label, config}], "tuning": {key: {docs:
        {"chosen": [...], "dev_f1": {override: f1}}}}, "cells": {key: [{"docs", "accuracy",
        "f1", "unseen_accuracy", "unseen_rate" (means), "sd": {metric: sd}, "runs": [report],
        "overrides": [...]}]}}``.

    Raises:
        ValueError: an unknown tagger, or ``runs < 1``.
    """
    unknown = [t for t in taggers if t not in TAGGERS]
    if unknown:
        raise ValueError(f"unknown taggers {unknown}: choose among {list(TAGGERS)}")
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    say = log or (lambda line: None)
    tuning: dict[str, dict[int, dict[str, Any]]] = {}
    cells: dict[str, list[dict[str, Any]]] = {t: [] for t in taggers}
    with tempfile.TemporaryDirectory() as tmp, _inside(Path(tmp)):
        root = Path(tmp)
        for d in docs:
            for t in taggers:
                config = TAGGERS[t][1]
                chosen: tuple[str, ...] = ()
                if tune and t in TUNING:
                    scores = {}
                    for point in TUNING[t]:
                        trial = _cell(config, d, 0, profile, [*overrides, *point], root)
                        scores[" ".join(point)] = trial["dev_f1"]
                        say(f"tune {t} docs={d} {' '.join(point)}: dev F1 {trial['dev_f1']:.4f}")
                    best = max(TUNING[t], key=lambda p: scores[" ".join(p)])
                    chosen = best
                    tuning.setdefault(t, {})[d] = {"chosen": list(best), "dev_f1": scores}
                reports = []
                for r in range(runs):
                    rep = _cell(config, d, r, profile, [*overrides, *chosen], root)
                    reports.append(rep)
                    say(
                        f"{t} docs={d} run={r}: acc {rep['accuracy']:.4f} F1 {rep['f1']:.4f} "
                        f"unseen {rep.get('unseen_accuracy', math.nan):.4f}"
                    )
                cell: dict[str, Any] = {"docs": d, "overrides": list(chosen), "sd": {}}
                for m in _METRICS:
                    s = _summary([rep.get(m, math.nan) for rep in reports])
                    cell[m], cell["sd"][m] = s["mean"], s["sd"]
                cell["runs"] = reports
                cells[t].append(cell)
    return {
        "docs": list(docs),
        "runs": runs,
        "profile": profile,
        "composition": composition(docs, profile),
        "taggers": [
            {"key": t, "label": TAGGERS[t][0], "config": f"configs/finance/{TAGGERS[t][1]}.yaml"}
            for t in taggers
        ],
        "tuning": {t: {str(d): v for d, v in per.items()} for t, per in tuning.items()},
        "cells": cells,
    }


def composition(docs: Sequence[int], profile: str, test_docs: int = 200) -> dict[str, Any]:
    """Run 0 against run 1: the unseen rate at each size and the gold tags of the unseen tokens.

    Returns:
        ``{str(docs): {"unseen_rate": r, "by_tag": {"O": f, "PERSON": f, ...}}}``.
    """
    from crfhead.data.finance.generator import generate_corpus, generate_documents
    from crfhead.data.finance.stats import unseen_composition, unseen_rate

    train = generate_documents(0, max(docs, default=0), profile)
    test = generate_corpus(1, test_docs, profile)
    return {
        str(d): {
            "unseen_rate": unseen_rate(train[:d], test),
            "by_tag": unseen_composition(train[:d], test),
        }
        for d in docs
    }


def _mean(result: Mapping[str, Any], tagger: str, docs: int, metric: str) -> float:
    for cell in result["cells"].get(tagger, []):
        if cell["docs"] == docs:
            return float(cell[metric])
    return math.nan


def orderings(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The seed's claims, each checked on the means of ``result``.

    Returns:
        ``[{"claim": str, "holds": bool | None, "detail": str}]``; ``holds`` is ``None`` where the
        result lacks a tagger or size the claim needs.
    """

    def m(tagger: str, docs: int, metric: str) -> float:
        return _mean(result, tagger, docs, metric)

    small, large = min(result["docs"]), max(result["docs"])
    disc = ("memm", "crf", "perceptron")
    out: list[dict[str, Any]] = []

    def claim(text: str, holds: bool | None, detail: str) -> None:
        out.append({"claim": text, "holds": holds, "detail": detail})

    def known(*values: float) -> bool:
        return all(not math.isnan(v) for v in values)

    a, b = m("hmm", small, "accuracy"), m("crf", small, "accuracy")
    f, g = m("hmm", small, "f1"), m("crf", small, "f1")
    claim(
        f"at {small} documents the HMM leads the CRF in accuracy and span F1",
        (a > b and f > g) if known(a, b, f, g) else None,
        f"HMM {a:.3f} / {f:.3f}, CRF {b:.3f} / {g:.3f}",
    )
    hmm_f = m("hmm", large, "f1")
    rest = {t: m(t, large, "f1") for t in disc}
    claim(
        f"at {large} documents every discriminative tagger passes the HMM in span F1",
        all(v > hmm_f for v in rest.values()) if known(hmm_f, *rest.values()) else None,
        f"HMM {hmm_f:.3f}; " + ", ".join(f"{t} {v:.3f}" for t, v in rest.items()),
    )
    everyone = {t: m(t, large, "f1") for t in ("hmm", *disc)}
    leader = max(everyone, key=lambda t: everyone[t])
    claim(
        f"at {large} documents the averaged perceptron leads in span F1",
        leader == "perceptron" if known(*everyone.values()) else None,
        f"leader: {leader} ({everyone[leader]:.3f})",
    )
    crf_f = m("crf", large, "f1")
    claim(
        f"the CRF's span F1 at {large} documents is near the seed's 0.943 (within 0.02)",
        abs(crf_f - 0.943) <= 0.02 if known(crf_f) else None,
        f"CRF {crf_f:.3f}",
    )
    unseen = {t: m(t, large, "unseen_accuracy") for t in ("hmm", *disc)}
    lo, hi = min(unseen.values()), max(unseen.values())
    claim(
        f"at {large} documents accuracy on unseen tokens spans about the seed's 0.911 to 0.958",
        (lo >= 0.88 and hi <= 0.99) if known(*unseen.values()) else None,
        ", ".join(f"{t} {v:.3f}" for t, v in unseen.items()),
    )
    return out


def markdown(result: Mapping[str, Any], command: str = "") -> str:
    """The result as Markdown: the table with the seed's beside it, the tuning and the orderings."""
    keys = [t["key"] for t in result["taggers"]]
    labels = {t["key"]: t["label"] for t in result["taggers"]}
    lines = []
    if command:
        lines += [f"`{command}`", ""]
    lines += [
        f"Profile `{result['profile']}`, {result['runs']} corpus runs per cell: mean ± standard "
        "deviation of token accuracy / span F1 (accuracy on unseen tokens); the seed's "
        "accuracy / F1 below each size.",
        "",
        "| docs | unseen rate | " + " | ".join(labels[k] for k in keys) + " |",
        "|---|---|" + "---|" * len(keys),
    ]
    for d in result["docs"]:
        cells = []
        rate = math.nan
        for k in keys:
            c = next(c for c in result["cells"][k] if c["docs"] == d)
            sd = c["sd"]
            rate = c["unseen_rate"]
            cells.append(
                f"{c['accuracy']:.3f} ± {sd['accuracy']:.3f} / {c['f1']:.3f} ± {sd['f1']:.3f} "
                f"({c['unseen_accuracy']:.3f} ± {sd['unseen_accuracy']:.3f})"
            )
        lines.append(f"| {d} | {rate:.3f} | " + " | ".join(cells) + " |")
        seed = [SEED_TABLE.get(k, {}).get(d) for k in keys]
        if any(seed):
            row = [f"{s[0]:.3f} / {s[1]:.3f}" if s else "" for s in seed]
            if d == 30:
                row = [
                    f"{r} ({SEED_UNSEEN_30[k]:.3f})" if k in SEED_UNSEEN_30 else r
                    for r, k in zip(row, keys, strict=True)
                ]
            rate_text = {3: "0.369", 30: "0.138"}.get(d, "")
            lines.append(f"| seed {d} | {rate_text} | " + " | ".join(row) + " |")
    if result.get("composition"):
        lines += [
            "",
            "What the unseen test tokens are (run 0 against run 1; share of unseen tokens by gold type):",
            "",
            "| docs | unseen rate | by gold type |",
            "|---|---|---|",
        ]
        for d, c in result["composition"].items():
            parts = ", ".join(f"{k} {v:.2f}" for k, v in c["by_tag"].items() if v >= 0.01)
            lines.append(f"| {d} | {c['unseen_rate']:.3f} | {parts} |")
    if result.get("tuning"):
        lines += ["", "Chosen on dev (run 0's 20 dev documents; dev span F1 per grid point):", ""]
        for t, per in result["tuning"].items():
            for d, v in per.items():
                grid = ", ".join(f"`{p}` {f:.3f}" for p, f in v["dev_f1"].items())
                lines.append(
                    f"* {labels.get(t, t)}, {d} documents: {grid} → `{' '.join(v['chosen'])}`"
                )
    lines += ["", "| the seed's claim | holds here | means |", "|---|---|---|"]
    for o in orderings(result):
        mark = {True: "yes", False: "no", None: "—"}[o["holds"]]
        lines.append(f"| {o['claim']} | {mark} | {o['detail']} |")
    return "\n".join(lines) + "\n"
