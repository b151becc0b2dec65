"""Training from partial annotation (issue 29): remove entity spans, train with them unknown or read as ``O``.

    python scripts/partial_labels.py run                         # everything (below), into docs/partial_labels
    python scripts/partial_labels.py run --methods full as_o     # only the runs that need no partial labels
    python scripts/partial_labels.py run --resume                # skip the runs whose JSON is already written
    python scripts/partial_labels.py report                      # tables from the runs written so far
    python scripts/partial_labels.py corrupt TRAIN --fraction 0.25 0.5 --seed 0 1 --out-dir DIR

On CoNLL-2003 (``$CRFHEAD_DATA/conll2003``) and the synthetic finance corpus (the default
``FinanceCorpus()`` of ``configs/finance/indicator_crf.yaml``: 30 training, 20 dev and 200 test
documents), a fraction ``f`` of the training split's entity spans is removed (whole spans, the same
seeded shuffle of every span of the split for every ``f``, so the spans removed at 25 % are among
those removed at 50 %; ``round(f * spans)`` of them, halves rounded up), and the indicator CRF of
each corpus's config is trained three ways:

* ``unknown`` (a): the removed spans' tokens are ``*`` cells (any label), so the loss is the
  partial-label likelihood ``log Z - log Z_allowed`` (Tsuboi et al. 2008); every other token keeps
  its gold tag (``O`` outside the kept spans is still known to be ``O``);
* ``as_o`` (b): the usual practice, the removed spans' tokens read as ``O``;
* ``full``: every span kept (the upper bound).

The seed drives both the removal and the training (``seed_everything`` and the data module's
shuffling seed). Dev stays **fully annotated** and chooses the checkpoint (the epoch of best dev
span F1, as every config does); test is fully annotated and scored with
:class:`~crfhead.evaluation.metrics.TaggingMetrics` (seqeval, strict, micro span F1, in the model's
scheme). Each split is written as a CoNLL file under ``--work-dir`` and read by a ``CoNLLCorpus``.

Every run trains in this process through ``train.py``'s command line
(:func:`crfhead.training.cli.main`) and writes ``runs/<corpus>/<run>.json`` (scores, dev F1 per
epoch, best epoch, seconds, load average) and ``<run>.pred.json`` (test gold and predicted tags), so
a crash loses only the run in progress; ``--resume`` skips the runs whose JSON exists (without it
every run asked for is trained again). Checkpoints are deleted once a run is scored.

``report`` (and the end of ``run``) writes ``results.json`` and ``results.md`` into ``--out-dir``:
test F1 mean and sample standard deviation over seeds for each corpus, method and fraction, and
for (a) - (b) at each fraction the mean difference over seeds with a 95 % paired bootstrap interval
over **test sentences** (:func:`crfhead.evaluation.bootstrap.unit_counts`: the same draws of
sentences for every seed, the statistic the mean over seeds of micro F1(a) - F1(b); so the interval
is over the test sample given these seeds' models, not over training seeds), and each seed's own
:func:`~crfhead.evaluation.bootstrap.paired_bootstrap` interval.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    "conll2003": ROOT / "configs" / "conll2003" / "indicator_crf.yaml",
    "finance": ROOT / "configs" / "finance" / "indicator_crf.yaml",
}
CORPORA = tuple(CONFIGS)
METHODS = ("full", "unknown", "as_o")
FILL = {"unknown": "*", "as_o": "O"}
"""The cell a removed span's tokens get, per method."""
METHOD_NAMES = {
    "full": "full annotation",
    "unknown": "(a) removed spans unknown (`*`)",
    "as_o": "(b) removed spans read as `O`",
}
FRACTIONS = (0.25, 0.5, 0.75)
SEEDS = (0, 1, 2)
EPOCHS = {"conll2003": 3, "finance": 20}
"""Default epochs: CoNLL-2003 at 3 (a previous 8-epoch run had its best dev epoch at 3), finance
at its config's 20."""
FINANCE_DOCS = (30, 20, 200)
"""``FinanceCorpus()``'s defaults: training, dev and test documents."""
SCHEME = "BIO"
"""The scheme of every file written (CoNLL-2003's IOB2 and the finance corpus's BIO)."""


# ----------------------------------------------------------------------------- corruption
def removal_count(fraction: float, spans: int) -> int:
    """How many of ``spans`` spans a fraction removes: ``round(fraction * spans)``, halves up."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"the fraction of spans to remove must be in [0, 1], got {fraction}")
    return math.floor(fraction * spans + 0.5)


def corrupt(
    sentences: Sequence[Any], fraction: float, seed: int, fill: str
) -> tuple[list[Any], dict[str, int]]:
    """Copies of ``sentences`` with ``removal_count(fraction, spans)`` entity spans' tokens set to ``fill``.

    The spans are every BIO entity of the split (:func:`crfhead.schemes.tags_to_spans`), in
    sentence order, shuffled by ``random.Random(seed)``; the first ones are removed, so for one seed a
    larger fraction removes a superset of a smaller one's spans.

    Args:
        sentences: the training split (BIO tags, repaired by the reader).
        fraction: the share of spans to remove, in ``[0, 1]``.
        seed: the shuffle's seed.
        fill: what the removed tokens' cells become: ``"*"`` (any label) or ``"O"``.

    Returns:
        ``(sentences, counts)``: new sentences (the input is left as it is) and
        ``{"spans", "removed", "removed_tokens", "sentences_touched"}``.
    """
    from crfhead.data.sentence import Sentence
    from crfhead.schemes import tags_to_spans

    spans = [
        (i, span) for i, s in enumerate(sentences) for span in tags_to_spans(s.tags or [], SCHEME)
    ]
    order = list(range(len(spans)))
    random.Random(seed).shuffle(order)
    removed = [spans[j] for j in order[: removal_count(fraction, len(spans))]]
    tags = [list(s.tags or []) for s in sentences]
    for i, span in removed:
        tags[i][span.start : span.end + 1] = [fill] * (span.end - span.start + 1)
    out = [
        Sentence(tokens=list(s.tokens), tags=t, doc_id=s.doc_id, id=s.id)
        for s, t in zip(sentences, tags, strict=True)
    ]
    counts = {
        "spans": len(spans),
        "removed": len(removed),
        "removed_tokens": sum(span.end - span.start + 1 for _, span in removed),
        "sentences_touched": len({i for i, _ in removed}),
    }
    return out, counts


def read_split(path: Path) -> list[Any]:
    """A BIO column file read by crfhead's reader (repaired, no warning)."""
    from crfhead.data.conll import read_conll

    sentences, _ = read_conll(path, scheme=SCHEME, warn=False)
    return sentences


def write_split(sentences: Sequence[Any], path: Path) -> Path:
    """Write ``token tag`` lines (``-DOCSTART-`` between documents); returns ``path``."""
    from crfhead.data.conll import write_conll

    write_conll(sentences, path)
    return path


# ----------------------------------------------------------------------------- data
def prepare_corpus(corpus: str, args: argparse.Namespace) -> dict[str, Any]:
    """Write the corpus's dev, test and full training files under ``work/data/<corpus>``.

    Returns:
        ``{"dev": path, "test": path, "train": sentences, "source": what was read}``.
    """
    folder = args.work_dir / "data" / corpus
    folder.mkdir(parents=True, exist_ok=True)
    if corpus == "conll2003":
        source = args.conll_dir
        files = {s: source / f"{n}.txt" for s, n in (("train", "train"), ("dev", "valid"))}
        files["test"] = source / "test.txt"
        for split, path in files.items():
            if not path.is_file():
                raise SystemExit(f"partial_labels: CoNLL-2003 {split} file not found: {path}")
        return {
            "train": read_split(files["train"]),
            "dev": files["dev"],
            "test": files["test"],
            "source": str(source),
        }
    from crfhead.data.corpora import FinanceCorpus

    train_docs, dev_docs, test_docs = args.finance_docs
    splits = FinanceCorpus(train_docs=train_docs, dev_docs=dev_docs, test_docs=test_docs).load()
    return {
        "train": splits["train"],
        "dev": write_split(splits["dev"], folder / "dev.txt"),
        "test": write_split(splits["test"], folder / "test.txt"),
        "source": f"FinanceCorpus(train_docs={train_docs}, dev_docs={dev_docs}, "
        f"test_docs={test_docs})",
    }


def run_id(method: str, fraction: float, seed: int) -> str:
    """``full-s0``, ``unknown-f0.25-s0``, ``as_o-f0.5-s1``."""
    return f"full-s{seed}" if method == "full" else f"{method}-f{fraction:g}-s{seed}"


def training_file(
    corpus: str, data: dict[str, Any], method: str, fraction: float, seed: int, work: Path
) -> tuple[Path, dict[str, int]]:
    """Write the run's training file (the full split for ``full``); its path and removal counts."""
    path = work / "data" / corpus / f"train-{run_id(method, fraction, seed)}.txt"
    if method == "full":
        sentences, counts = corrupt(data["train"], 0.0, seed, "O")
    else:
        sentences, counts = corrupt(data["train"], fraction, seed, FILL[method])
    return write_split(sentences, path), counts


# ----------------------------------------------------------------------------- one run
def code_version() -> str:
    """The commit of the code that ran: ``ROOT/COMMIT`` (a ``git archive`` snapshot), else git's."""
    import subprocess

    stamp = ROOT / "COMMIT"
    if stamp.is_file():
        return stamp.read_text(encoding="utf-8").strip() + " (snapshot)"
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "crfhead"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return f"{head}{' + uncommitted changes in crfhead/' if dirty else ''}" or "unknown"


def _atomic_json(data: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _dev_f1_by_epoch(log_dir: Path) -> list[float]:
    """``val/f1`` of each validation in the run's ``metrics.csv`` (in order)."""
    import csv

    path = log_dir / "metrics.csv"
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as f:
        return [float(r["val/f1"]) for r in csv.DictReader(f) if r.get("val/f1")]


def train_run(
    corpus: str,
    method: str,
    fraction: float,
    seed: int,
    epochs: int,
    data: dict[str, Any],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Train and score one model; writes ``<run>.json`` and ``<run>.pred.json``; returns the record."""
    import torch

    from crfhead.evaluation.metrics import TaggingMetrics
    from crfhead.training.cli import main

    name = run_id(method, fraction, seed)
    runs = args.work_dir / "runs" / corpus
    run_dir = runs / name
    shutil.rmtree(run_dir, ignore_errors=True)  # a crashed attempt's files
    train, counts = training_file(corpus, data, method, fraction, seed, args.work_dir)
    corpus_spec = {
        "class_path": "crfhead.data.corpora.CoNLLCorpus",
        "init_args": {"train": str(train), "dev": str(data["dev"]), "test": str(data["test"])},
    }
    argv = [
        "--config",
        str(CONFIGS[corpus]),
        f"--seed_everything={seed}",
        f"--data.seed={seed}",
        f"--data.corpus={json.dumps(corpus_spec)}",
        f"--trainer.max_epochs={epochs}",
        "--trainer.accelerator=cpu",
        "--trainer.enable_progress_bar=false",
        f"--trainer.logger.init_args.save_dir={run_dir}",
        "--trainer.logger.init_args.name=log",
        f"--model.report_dir={run_dir}",
    ]
    load_before = os.getloadavg()
    start = time.perf_counter()
    cli = main(argv)
    seconds = time.perf_counter() - start
    # trainer.test(ckpt_path="best") left the dev-best weights in the model: decode test with them.
    model = cli.model.eval()
    gold: list[list[str]] = []
    pred: list[list[str]] = []
    with torch.no_grad():
        for batch in cli.datamodule.test_dataloader():
            pred.extend(model.tagger.predict(batch))
            gold.extend(list(s.tags) for s in batch.sentences)
    scheme = cli.datamodule.scheme
    metrics = TaggingMetrics(scheme)
    metrics.update(gold, pred)
    scores = metrics.compute()
    report = json.loads((run_dir / "test_report.json").read_text(encoding="utf-8"))
    # The test pass's own figure and ours must agree: the predictions saved are the ones scored.
    if abs(float(report["f1"]) - scores["f1"]) > 1e-9:
        raise AssertionError(
            f"{corpus} {name}: test F1 {scores['f1']} from the saved predictions, "
            f"{report['f1']} in the test report"
        )
    checkpoint = cli.trainer.checkpoint_callback
    best_path = str(getattr(checkpoint, "best_model_path", "") or "")
    best_epoch = None
    if "epoch=" in best_path:
        best_epoch = int(best_path.split("epoch=")[1].split("-")[0].split(".")[0])
    log_dir = Path(str(cli.trainer.logger.log_dir)) if cli.trainer.logger else run_dir
    record = {
        "corpus": corpus,
        "method": method,
        "fraction": 0.0 if method == "full" else fraction,
        "seed": seed,
        "run": name,
        "scheme": scheme,
        "removal": counts,
        "max_epochs": epochs,
        "epochs_run": int(cli.trainer.current_epoch),
        "best_epoch": best_epoch,
        "dev_f1_by_epoch": _dev_f1_by_epoch(log_dir),
        "test": {k: float(scores[k]) for k in ("f1", "precision", "recall", "macro_f1")},
        "test_report_f1": float(report["f1"]),
        "seconds": seconds,
        "load_average_before": list(load_before),
        "load_average_after": list(os.getloadavg()),
        "threads": torch.get_num_threads(),
        "train_file": str(train),
        "train_argv": argv,
        "invocation": args.invocation,
        "code": code_version(),
    }
    _atomic_json({"scheme": scheme, "gold": gold, "pred": pred}, runs / f"{name}.pred.json")
    _atomic_json(record, runs / f"{name}.json")
    for ckpt in run_dir.rglob("*.ckpt"):  # ~100 MB a CoNLL run; the scores are kept
        ckpt.unlink()
    print(
        f"partial_labels: {corpus} {name}: test F1 {scores['f1']:.4f}, best epoch {best_epoch}, "
        f"{seconds:.0f} s, load {load_before[0]:.2f}",
        flush=True,
    )
    return record


def command_run(args: argparse.Namespace) -> int:
    """Train every run asked for (seed by seed, so a cut-short invocation has whole seeds), then report."""
    epochs = dict(EPOCHS)
    for item in args.epochs:
        corpus, _, value = item.partition("=")
        if corpus not in CONFIGS or not value.isdigit() or int(value) < 1:
            raise SystemExit(f"partial_labels: --epochs takes CORPUS=N (N >= 1), got {item!r}")
        epochs[corpus] = int(value)
    for corpus in args.corpus:
        data = prepare_corpus(corpus, args)
        for seed in args.seeds:
            for method in args.methods:
                for fraction in [0.0] if method == "full" else args.fractions:
                    done = (
                        args.work_dir / "runs" / corpus / f"{run_id(method, fraction, seed)}.json"
                    )
                    if args.resume and done.is_file():
                        print(f"partial_labels: {corpus} {done.stem}: done, skipped", flush=True)
                        continue
                    train_run(corpus, method, fraction, seed, epochs[corpus], data, args)
    return command_report(args)


# ----------------------------------------------------------------------------- report
def _micro_f1(counts: Any) -> Any:
    """Micro span F1 of ``[tp, predicted, gold]`` counts summed over types ``(..., types, 3)``."""
    import numpy as np

    tp, pr, go = (counts[..., j].sum(-1) for j in range(3))
    denominator = pr + go
    return np.where(denominator > 0, 2.0 * tp / np.maximum(denominator, 1), 0.0)


def bootstrap_difference(
    pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]], samples: int, seed: int = 0
) -> dict[str, Any]:
    """Paired bootstrap over test sentences of the mean over seeds of F1(a) - F1(b).

    Args:
        pairs: per seed, the ``.pred.json`` contents of (a) and (b) (the same gold).
        samples: bootstrap draws.
        seed: the draws' seed.

    Returns:
        ``{"mean", "interval", "per_seed"}``: the difference on the test set, its 95 % interval
        (the same draws of sentences for every seed), and each seed's own
        :func:`~crfhead.evaluation.bootstrap.paired_bootstrap` (micro F1).
    """
    import numpy as np

    from crfhead.evaluation.bootstrap import paired_bootstrap, unit_counts
    from crfhead.evaluation.metrics import TaggingMetrics

    scheme = pairs[0][0]["scheme"]
    gold = pairs[0][0]["gold"]
    everything = TaggingMetrics(scheme)
    for a, b in pairs:
        if a["gold"] != gold or b["gold"] != gold:
            raise ValueError("the runs compared were scored on different test gold")
        everything.update(gold, a["pred"])
        everything.update(gold, b["pred"])
    types = sorted(everything.state_dict()["entities"])
    units = [[i] for i in range(len(gold))]
    draws = np.random.default_rng(seed).integers(0, len(units), size=(samples, len(units)))
    on_data, on_draws, per_seed = [], [], []
    for a, b in pairs:
        ca = unit_counts(gold, a["pred"], scheme, units, types)  # (U, types, 3)
        cb = unit_counts(gold, b["pred"], scheme, units, types)
        on_data.append(_micro_f1(ca.sum(0)) - _micro_f1(cb.sum(0)))
        on_draws.append(_micro_f1(ca[draws].sum(1)) - _micro_f1(cb[draws].sum(1)))
        # paired_bootstrap's difference is F1(second) - F1(first): (b) first.
        one = paired_bootstrap(gold, b["pred"], a["pred"], scheme, samples=samples, seed=seed)
        per_seed.append({"difference": one.micro, "interval": list(one.micro_interval)})
    mean_draws = np.mean(np.stack(on_draws), axis=0)
    low, high = np.percentile(mean_draws, (2.5, 97.5))
    return {
        "mean": float(np.mean(on_data)),
        "interval": [float(low), float(high)],
        "per_seed": per_seed,
        "samples": samples,
        "units": "test sentences",
    }


def _summary(values: list[float]) -> dict[str, Any]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else None,
        "n": len(values),
        "values": values,
    }


def collect(work: Path, samples: int) -> dict[str, Any]:
    """Every run JSON under ``work/runs``, summarised per corpus, method and fraction."""
    out: dict[str, Any] = {"corpora": {}}
    for corpus in CORPORA:
        folder = work / "runs" / corpus
        records = [
            json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(folder.glob("*.json"))
            if not p.name.endswith(".pred.json")
        ]
        if not records:
            continue
        rows: dict[str, dict[str, Any]] = {}
        for r in sorted(records, key=lambda r: (r["method"], r["fraction"], r["seed"])):
            key = f"{r['method']}@{r['fraction']:g}"
            row = rows.setdefault(
                key, {"method": r["method"], "fraction": r["fraction"], "runs": []}
            )
            row["runs"].append(
                {
                    "seed": r["seed"],
                    "f1": r["test"]["f1"],
                    "best_epoch": r["best_epoch"],
                    "epochs_run": r["epochs_run"],
                    "seconds": r["seconds"],
                    "removal": r["removal"],
                }
            )
        for row in rows.values():
            row["f1"] = _summary([run["f1"] for run in row["runs"]])
            row["seeds"] = [run["seed"] for run in row["runs"]]
        differences = {}
        fractions = sorted({r["fraction"] for r in records if r["method"] != "full"})
        for fraction in fractions:
            by_seed = {
                m: {r["seed"]: r for r in records if r["method"] == m and r["fraction"] == fraction}
                for m in ("unknown", "as_o")
            }
            seeds = sorted(set(by_seed["unknown"]) & set(by_seed["as_o"]))
            if not seeds:
                continue
            pairs = []
            for seed in seeds:
                pair = tuple(
                    json.loads(
                        (folder / f"{by_seed[m][seed]['run']}.pred.json").read_text(
                            encoding="utf-8"
                        )
                    )
                    for m in ("unknown", "as_o")
                )
                pairs.append(pair)
            result = bootstrap_difference(pairs, samples)  # type: ignore[arg-type]
            result["seeds"] = seeds
            differences[f"{fraction:g}"] = result
        loads = [r["load_average_before"][0] for r in records] + [
            r["load_average_after"][0] for r in records
        ]
        out["corpora"][corpus] = {
            "rows": list(rows.values()),
            "unknown_minus_as_o": differences,
            "max_epochs": sorted({r["max_epochs"] for r in records}),
            "best_epochs": sorted(
                {r["best_epoch"] for r in records if r["best_epoch"] is not None}
            ),
            "seconds_per_run": _summary([r["seconds"] for r in records]),
            "load_average_1min": {
                "min": min(loads),
                "max": max(loads),
                "mean": statistics.fmean(loads),
            },
            "threads": sorted({r["threads"] for r in records}),
            "scheme": records[0]["scheme"],
            "train_spans": records[0]["removal"]["spans"],
            "invocations": sorted({r["invocation"] for r in records}),
            "code": sorted({r.get("code", "unknown") for r in records}),
        }
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}"


def markdown(results: dict[str, Any]) -> str:
    """The results as Markdown: one table per corpus, then how the runs were made."""
    lines = [
        "# Training from partial annotation (issue 29)",
        "",
        "Test span F1 (seqeval strict, micro, %) of the indicator CRF, mean ± sample std over "
        "seeds. A fraction of the training split's entity spans is removed (the same seeded "
        "shuffle for every fraction); (a) marks the removed spans' tokens unknown (`*`, loss "
        "log Z - log Z_allowed), (b) reads them as `O`. Dev stays fully annotated and chooses "
        "the epoch (best dev F1). (a) - (b): mean difference over seeds, in F1 points, with a 95 % "
        "paired bootstrap interval over test sentences (the same draws for every seed: the "
        "interval is over the test sample, not over training seeds).",
        "",
    ]
    for corpus, res in results["corpora"].items():
        rows = {(r["method"], r["fraction"]): r for r in res["rows"]}
        lines += [f"## {corpus}", ""]
        lines.append(
            "| spans removed | full | (a) unknown `*` | (b) read as `O` | (a) - (b) [95 % CI] | seeds paired |"
        )
        lines.append("|---|---|---|---|---|---|")
        full = rows.get(("full", 0.0))
        fractions = sorted({f for m, f in rows if m != "full"})

        most = max(len(r["seeds"]) for r in rows.values())

        def cell(row: dict[str, Any] | None, most: int = most) -> str:
            if row is None:
                return "not run"
            f1 = row["f1"]
            std = "" if f1["std"] is None else f" ± {_pct(f1['std'])}"
            # A row with fewer seeds than the others says so (a cut-short or running experiment).
            fewer = "" if f1["n"] == most else f" (seeds {', '.join(map(str, row['seeds']))})"
            return f"{_pct(f1['mean'])}{std}{fewer}"

        for fraction in fractions:
            a, b = rows.get(("unknown", fraction)), rows.get(("as_o", fraction))
            diff = res["unknown_minus_as_o"].get(f"{fraction:g}")
            d = (
                "-"
                if diff is None
                else f"{_pct(diff['mean'])} [{_pct(diff['interval'][0])}, {_pct(diff['interval'][1])}]"
            )
            seeds = diff["seeds"] if diff is not None else []
            lines.append(
                f"| {100 * fraction:g} % | {cell(full)} | {cell(a)} | {cell(b)} | {d} | "
                f"{', '.join(map(str, seeds))} |"
            )
        if full is not None and not fractions:
            lines.append(
                f"| 0 % | {cell(full)} | - | - | - | {', '.join(map(str, full['seeds']))} |"
            )
        load = res["load_average_1min"]
        secs = res["seconds_per_run"]
        lines += [
            "",
            f"Scheme {res['scheme']}; {res['train_spans']} entity spans in the training split; "
            f"max epochs {res['max_epochs']}, best dev epochs met {res['best_epochs']} "
            f"(epochs counted from 0); {secs['mean']:.0f} s a run on average "
            f"(training, dev each epoch, test); torch threads {res['threads']}; 1-minute load "
            f"average {load['min']:.2f}-{load['max']:.2f} (mean {load['mean']:.2f}) around the runs.",
            "",
            "Per seed (a) - (b), paired bootstrap over test sentences:",
            "",
        ]
        for fraction, diff in res["unknown_minus_as_o"].items():
            parts = [
                f"seed {s}: {_pct(p['difference'])} [{_pct(p['interval'][0])}, {_pct(p['interval'][1])}]"
                for s, p in zip(diff["seeds"], diff["per_seed"], strict=True)
            ]
            lines.append(f"- {100 * float(fraction):g} %: " + "; ".join(parts))
        lines += ["", "Commands:", ""]
        lines += [f"    {c}" for c in res["invocations"]]
        lines += ["", f"Code: {', '.join(res['code'])}.", ""]
    for note in results.get("notes", []):
        lines += [note, ""]
    return "\n".join(lines)


def command_report(args: argparse.Namespace) -> int:
    """Write ``results.json`` and ``results.md`` from every run written so far."""
    results = collect(args.work_dir, args.bootstrap_samples)
    if not results["corpora"]:
        print(f"partial_labels: no runs under {args.work_dir / 'runs'}", file=sys.stderr)
        return 1
    results["work_dir"] = str(args.work_dir)
    results["notes"] = list(args.note)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    _atomic_json(results, args.out_dir / "results.json")
    (args.out_dir / "results.md").write_text(markdown(results), encoding="utf-8")
    print(f"partial_labels: wrote {args.out_dir / 'results.json'} and results.md", flush=True)
    return 0


def command_corrupt(args: argparse.Namespace) -> int:
    """For each fraction and seed write ``<stem>-unknown-f<f>-s<seed>.txt`` and ``<stem>-as_o-...``.

    Prints ``{"runs": [{"fraction", "seed", <counts>, "files": {method: path}}, ...]}`` as JSON.
    """
    sentences = read_split(args.train)
    runs = []
    for fraction in args.fraction:
        for seed in args.seed:
            written: dict[str, Any] = {}
            for method, fill in FILL.items():
                out, counts = corrupt(sentences, fraction, seed, fill)
                path = args.out_dir / f"{args.train.stem}-{run_id(method, fraction, seed)}.txt"
                written[method] = str(write_split(out, path))
            runs.append({"fraction": fraction, "seed": seed, **counts, "files": written})
    print(json.dumps({"runs": runs}))
    return 0


# ----------------------------------------------------------------------------- command line
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    from crfhead.data.paths import data_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--work-dir", type=Path, default=Path("/tmp/partial_labels"))
    common.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "partial_labels")
    common.add_argument("--bootstrap-samples", type=int, default=1000)
    common.add_argument(
        "--note", action="append", default=[], help="a paragraph added to results.md (repeatable)"
    )
    run = sub.add_parser("run", parents=[common], help="train the runs, then report")
    run.add_argument("--corpus", nargs="+", choices=CORPORA, default=list(CORPORA))
    run.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    run.add_argument("--fractions", nargs="+", type=float, default=list(FRACTIONS))
    run.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    run.add_argument(
        "--epochs", nargs="*", default=[], metavar="CORPUS=N", help=f"default {EPOCHS}"
    )
    run.add_argument("--resume", action="store_true", help="skip the runs already written")
    run.add_argument("--conll-dir", type=Path, default=data_dir() / "conll2003")
    run.add_argument(
        "--finance-docs",
        nargs=3,
        type=int,
        default=list(FINANCE_DOCS),
        metavar=("TRAIN", "DEV", "TEST"),
    )
    sub.add_parser("report", parents=[common], help="tables from the runs written so far")
    corrupt_parser = sub.add_parser("corrupt", help="write a training file's two corruptions")
    corrupt_parser.add_argument("train", type=Path)
    corrupt_parser.add_argument("--fraction", nargs="+", type=float, required=True)
    corrupt_parser.add_argument("--seed", nargs="+", type=int, required=True)
    corrupt_parser.add_argument("--out-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    for value in [*getattr(args, "fractions", ()), *getattr(args, "fraction", ())]:
        if not 0.0 <= value <= 1.0:
            parser.error(f"a fraction of spans to remove must be in [0, 1], got {value}")
    args.invocation = "python scripts/partial_labels.py " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand."""
    args = parse_args(argv)
    if args.command == "run":
        return command_run(args)
    if args.command == "report":
        return command_report(args)
    return command_corrupt(args)


if __name__ == "__main__":
    raise SystemExit(main())
