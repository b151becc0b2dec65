"""Nested cross-validation of joint decoding against the chain, the seed's Table 2 with 95% intervals.

    python scripts/higher_order_cv.py                                   # MSM2013, pipeline, 5 folds
    python scripts/higher_order_cv.py --context                         # + official test tweets
    python scripts/higher_order_cv.py --protocol perceptron \\
        --config configs/msm2013/higher_order_perceptron.yaml --readings all   # the seed's training
    python scripts/higher_order_cv.py --config configs/conll2003/indicator_crf.yaml --fixed-split

Everything is :mod:`crfhead.higher_order.cross_validation`'s; this script reads a config (the model,
the scheme, the epochs), pools the corpus's labelled sentences, groups them, runs the protocol on
every fold and prints the table: per system the pooled out-of-fold F1 (micro, macro), the paired
bootstrap 95% interval of its difference to the chain (whole groups resampled), the mean and range
over folds, the certified fraction of the groups with patterns, and the mean train + test seconds a
fold. ``--fixed-split`` runs one fold: the corpus's own train / dev / test (CoNLL-2003).
``--out`` writes every number (and each fold's choices) as JSON.

Grouping (``--grouping``): ``clean`` (tweets linked by more than ``--threshold`` shared words,
placeholders and stopwords not counted; the default), ``seed`` (every word counted, the seed's),
``documents`` (``-DOCSTART-`` documents; the default for CoNLL-2003).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from crfhead.data.datamodule import TaggingDataModule
from crfhead.data.grouping import DocumentGroups, Grouping, TweetGroups, group_statistics
from crfhead.data.msm2013 import read_msm2013_test
from crfhead.higher_order.builders import READINGS
from crfhead.higher_order.corpus_setup import CORPUS_CLASSES, GRIDS, factors_for
from crfhead.higher_order.cross_validation import (
    Fold,
    FoldOutcome,
    Perceptron,
    Pipeline,
    Protocol,
    Setup,
    compare,
    cross_validate,
    joint_groups,
    linked_phrases,
    usable_context,
)
from crfhead.higher_order.factors import Consistency

ROOT = Path(__file__).resolve().parents[1]


def _grouping(name: str, threshold: int) -> Grouping:
    if name == "documents":
        return DocumentGroups()
    ignore = ["placeholders", "stopwords"] if name == "clean" else []
    return TweetGroups(threshold=threshold, ignore=ignore)


def _load(config: dict[str, Any]) -> tuple[TaggingDataModule, str]:
    data = dict(config["data"])
    spec = data.pop("corpus")
    module, name = spec["class_path"].rsplit(".", 1)
    corpus = getattr(importlib.import_module(module), name)(**spec.get("init_args", {}))
    keep = ("scheme",)
    return TaggingDataModule(corpus, **{k: data[k] for k in keep if k in data}), CORPUS_CLASSES[
        name
    ]


def _interval(r: Any, which: str) -> str:
    d, (lo, hi) = getattr(r, which), getattr(r, f"{which}_interval")
    return f"{100 * d:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs/msm2013/indicator_crf.yaml")
    parser.add_argument("--protocol", choices=("pipeline", "perceptron"), default="pipeline")
    parser.add_argument("--grouping", choices=("clean", "seed", "documents"), default=None)
    parser.add_argument("--threshold", type=int, default=4)
    parser.add_argument("--readings", choices=READINGS, default="entities")
    parser.add_argument("--context", action="store_true", help="official MSM2013 test tweets")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--only", type=int, nargs="+", default=None, help="run these folds")
    parser.add_argument("--fixed-split", action="store_true", help="the corpus's own splits")
    parser.add_argument("--epochs", type=int, default=None, help="default: the config's")
    parser.add_argument("--weights", type=float, nargs="+", default=None, help="the dev grid")
    parser.add_argument("--methods", nargs="+", default=["dd_factor", "dd2slave", "ilp"])
    parser.add_argument("--max-iterations", type=int, default=300)
    parser.add_argument(
        "--two-stage", type=int, default=None, metavar="FOLDS", help="K&M baseline, jackknife folds"
    )
    parser.add_argument("--samples", type=int, default=1000, help="bootstrap draws")
    parser.add_argument("--seed", type=int, default=13, help="the folds' seed")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    args = parser.parse_args(argv)
    if args.out is not None and args.out.exists():
        parser.error(f"{args.out} exists: choose another --out (results are never overwritten)")
    began = time.perf_counter()
    config = yaml.safe_load(args.config.read_text())
    datamodule, corpus = _load(config)
    splits = datamodule.splits
    pool = [s for name in ("train", "dev", "test") for s in splits[name]]
    grouping = _grouping(
        args.grouping or ("documents" if corpus == "conll2003" else "clean"), args.threshold
    )
    setup = Setup.from_config(config, datamodule.corpus.tokenizer)
    if args.epochs is not None:
        setup = dataclasses.replace(setup, epochs=args.epochs)
    factors = factors_for(corpus)
    if isinstance(factors, Consistency):
        factors = Consistency(min_sentences=2, readings=args.readings)
    protocol: Protocol
    if args.protocol == "perceptron":
        spec = config["model"].get("decoder")
        if spec is None:
            parser.error(f"{args.config} has no model.decoder for the perceptron protocol")
        spec = {
            **spec,
            "init_args": {
                **spec.get("init_args", {}),
                "factors": {
                    "class_path": f"crfhead.higher_order.{type(factors).__name__}",
                    "init_args": vars(factors),
                },
            },
        }
        protocol = Perceptron(setup, spec)
    else:
        setup = dataclasses.replace(setup, hparams={**setup.hparams, "decoder": None})
        grid = args.weights if args.weights is not None else GRIDS[corpus]
        protocol = Pipeline(
            setup,
            factors,
            grid,
            args.methods,
            max_iterations=args.max_iterations,
            two_stage=args.two_stage,
            corpus=corpus,
        )
    context = read_msm2013_test(warn=False)[0] if args.context else []
    context = usable_context(pool, context)
    labels = sorted({t for s in pool for t in s.tags or []})
    scheme = setup.scheme
    groups = grouping(pool)
    stats = group_statistics(groups)
    pairs = linked_phrases(pool, groups, factors, labels, scheme)
    multi = [p for g, p in zip(groups, pairs, strict=True) if len(g) > 1]
    if context:
        _, joint = joint_groups(pool, context, grouping)
        linked = sum(sum(1 for i in g if i < len(pool)) for g in joint if len(g) > 1)
        mixed = sum(1 for g in joint if len(g) > 1)
        density = f" ({linked} labelled sentences in {mixed} multi-sentence groups with it)"
    else:
        density = ""
    print(
        f"pool: {len(pool)} sentences in {int(stats['groups'])} groups ({grouping!r}); "
        f"{int(stats['in_multi'])} in {sum(1 for g in groups if len(g) > 1)} multi-sentence "
        f"groups (largest {int(stats['largest'])}, mean {stats['mean_multi_size']:.1f}); "
        f"linked phrase pairs per multi-sentence group: mean "
        f"{statistics.mean(multi) if multi else 0:.1f}, {sum(1 for p in pairs if p)} groups with "
        f"any; context: {len(context)} unlabelled sentences{density}",
        flush=True,
    )

    done: list[FoldOutcome] = []

    def report(o: FoldOutcome) -> None:
        chosen = {n: r.weight for n, r in o.systems.items() if r.weight is not None}
        done.append(o)
        so_far = compare(pool, done, grouping, scheme, context=context, samples=200)
        pooled = ", ".join(
            f"{n} {100 * r['f1']:.2f}"
            + (f" ({_interval(r['delta'], 'micro')})" if r["delta"] else "")
            for n, r in so_far.items()
        )
        print(
            f"[{time.perf_counter() - began:.0f} s] fold {o.fold.index}: train {len(o.fold.train)}"
            f" dev {len(o.fold.dev)} test {len(o.fold.test)}; weight {chosen or 'learned'}; "
            f"pooled so far (200 draws): {pooled}",
            file=sys.stderr,
            flush=True,
        )

    if args.fixed_split:
        n_train, n_dev = len(splits["train"]), len(splits["dev"])
        fold = Fold(
            0,
            list(range(n_train)),
            list(range(n_train, n_train + n_dev)),
            list(range(n_train + n_dev, len(pool))),
        )
        outcomes = [protocol.run(pool, fold, grouping, context)]
        report(outcomes[0])
    else:
        outcomes = cross_validate(
            pool,
            protocol,
            grouping,
            k=args.folds,
            seed=args.seed,
            context=context,
            folds=args.only,
            progress=report,
        )
    table = compare(pool, outcomes, grouping, scheme, context=context, samples=args.samples)
    how = "fixed split" if args.fixed_split else f"{len(outcomes)} of {args.folds} folds"
    print(f"\n## {corpus}, {args.protocol}, {how}, {grouping!r}, readings {args.readings}\n")
    print(
        "| system | F micro | Δ micro [95%] | F macro | Δ macro [95%] | folds: micro (min to max) "
        "| certified | train + test s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in table.items():
        delta = r["delta"]
        folds = r["fold_f1"]
        cert = "—" if r["certified"] is None else f"{r['certified']:.3f}"
        print(
            f"| {name} | {100 * r['f1']:.2f} | {_interval(delta, 'micro') if delta else '—'} "
            f"| {100 * r['macro_f1']:.2f} | {_interval(delta, 'macro') if delta else '—'} "
            f"| {100 * r['mean_f1']:.2f} ({100 * min(folds):.2f} to {100 * max(folds):.2f}) "
            f"| {cert} | {r['seconds']:.0f} |"
        )
    names = list(table)
    print(f"\n| fold | {' | '.join(names)} | weight (chosen on the fold's dev) |")
    print("|---:|" + "---:|" * len(names) + "---|")
    for j, o in enumerate(outcomes):
        cells = [
            f"{100 * table[n]['fold_f1'][j]:.2f} / {100 * table[n]['fold_macro_f1'][j]:.2f}"
            for n in names
        ]
        chosen = sorted({f"{r.weight:g}" for r in o.systems.values() if r.weight is not None})
        for run in o.systems.values():
            learned = run.dev.get("weights")
            if learned:
                chosen.append("learned " + ", ".join(f"{k} {v:.2f}" for k, v in learned.items()))
        print(f"| {o.fold.index} | {' | '.join(cells)} | {'; '.join(chosen) or '—'} |")
    if args.out is not None:
        payload = {
            "command": sys.argv,
            "pool": len(pool),
            "groups": stats,
            "context": len(context),
            "table": {
                n: {**r, "delta": None if r["delta"] is None else vars(r["delta"])}
                for n, r in table.items()
            },
            "folds": [
                {
                    "fold": o.fold.index,
                    "sizes": [len(o.fold.train), len(o.fold.dev), len(o.fold.test)],
                    "systems": {
                        n: {"weight": r.weight, "dev": r.dev, "seconds": r.seconds}
                        for n, r in o.systems.items()
                    },
                }
                for o in outcomes
            ],
        }
        with open(args.out, "x") as f:
            json.dump(payload, f, indent=1, default=str)
    print(f"\nTotal {time.perf_counter() - began:.0f} s.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
