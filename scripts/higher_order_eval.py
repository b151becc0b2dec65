"""A trained chain model decoded with higher-order factors over groups, beside a two-stage baseline.

    python train.py --config configs/msm2013/indicator_crf.yaml          # the chain model
    python scripts/higher_order_eval.py --checkpoint runs/msm2013_indicator_crf/version_0/checkpoints/last.ckpt
    python train.py --config configs/conll2003/indicator_crf.yaml
    python scripts/higher_order_eval.py --config configs/conll2003/indicator_crf.yaml \\
        --checkpoint runs/conll2003_indicator_crf/version_0/checkpoints/epoch=0-step=439.ckpt

The chain CRF is trained first; the non-local weight is then chosen on the dev split
(:mod:`crfhead.higher_order.evaluation`; Qian & Liu, TACL 2014, instead train everything with the
averaged perceptron). The corpus is read from the config (or ``--corpus``); its groups, factors and
dev grid are :mod:`crfhead.higher_order.corpus_setup`'s:

* ``msm2013``: each split's tweets are grouped by single linkage (more than ``--threshold`` shared
  words) and every group of two tweets or more gets
  :func:`~crfhead.higher_order.consistency_patterns`;
* ``conll2003``: the groups are the documents (``Sentence.doc_id``) and every document gets
  :func:`~crfhead.higher_order.skip_patterns` (identical capitalised tokens).

Each group is decoded jointly by every method. Beside them, the row ``two_stage`` is the baseline of
Krishnan & Manning (2006), :class:`crfhead.higher_order.two_stage_pipeline.TwoStage`: a second indicator CRF with the
first stage's (the checkpoint's) token- and entity-majority labels over the group and the split as
extra features, trained on ``--folds``-fold jackknifed first-stage tags of the training split (the
fold models trained as many epochs as the checkpoint had, with its hyper-parameters), for the
config's ``max_epochs`` with the best dev epoch kept. Its "ms / group" is the whole pipeline (first
stage, features, second stage) over the split divided by the groups; it certifies nothing.

Printed: span F1 micro and macro (seqeval strict), the fraction of groups certified optimal, mean
iterations and decode time per group. ``--max-groups`` keeps the first groups of dev and test (every
method on the same ones).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from crfhead.data.datamodule import TaggingDataModule
from crfhead.higher_order import METHODS
from crfhead.higher_order.corpus_setup import (
    CORPORA,
    GRIDS,
    corpus_of_class,
    group_sentences,
)
from crfhead.higher_order.evaluation import dev_grid, evaluate_split, select_weight
from crfhead.higher_order.two_stage_pipeline import TwoStage
from crfhead.model.checkpoints import read_checkpoint
from crfhead.training.module import TaggerModule

ROOT = Path(__file__).resolve().parents[1]


def corpus_of(config: Path) -> str:
    """The corpus of a config's ``data.corpus.class_path``."""
    return corpus_of_class(yaml.safe_load(config.read_text())["data"]["corpus"]["class_path"])


def _data(config: Path) -> tuple[TaggingDataModule, dict[str, Any]]:
    """The config's data module and its trainer section."""
    spec = yaml.safe_load(config.read_text())
    data: dict[str, Any] = dict(spec["data"])
    corpus = data.pop("corpus")
    data.pop("grouping", None)  # each split is grouped by its corpus setup (group_sentences)
    module, name = corpus["class_path"].rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    return TaggingDataModule(corpus=cls(**corpus.get("init_args", {})), **data), dict(
        spec.get("trainer", {})
    )


def _checkpoint_epochs(path: Path) -> int:
    """How many epochs the checkpoint's weights were trained (its ``epoch`` + 1)."""
    state = read_checkpoint(path)
    return int(state.get("epoch", 0)) + 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--config", type=Path, default=ROOT / "configs/msm2013/indicator_crf.yaml")
    parser.add_argument("--corpus", choices=CORPORA, default=None, help="default: the config's")
    parser.add_argument("--threshold", type=int, default=4)
    parser.add_argument("--weights", type=float, nargs="+", default=None, help="the dev grid")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--max-iterations", type=int, default=300)
    parser.add_argument("--max-groups", type=int, default=None, help="first groups of dev/test")
    parser.add_argument("--folds", type=int, default=10, help="jackknife folds (K&M: 10)")
    parser.add_argument("--no-two-stage", action="store_true", help="skip the two-stage row")
    parser.add_argument("--second-epochs", type=int, default=None, help="default: max_epochs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.checkpoint.is_file():
        parser.error(f"checkpoint not found: {args.checkpoint}")
    corpus = args.corpus or corpus_of(args.config)
    weights = args.weights if args.weights is not None else list(GRIDS[corpus])
    model = TaggerModule.load_from_checkpoint(args.checkpoint, map_location="cpu").eval()
    datamodule, trainer = _data(args.config)
    splits = datamodule.splits
    began = time.perf_counter()
    groups = {
        split: group_sentences(splits[split], corpus, args.threshold)[: args.max_groups]
        for split in ("dev", "test")
    }
    kind = "consistency" if corpus == "msm2013" else "skip-chain"
    dev = dev_grid(
        model,
        splits["dev"],
        weights,
        corpus,
        threshold=args.threshold,
        max_iterations=args.max_iterations,
        groups=groups["dev"],
    )
    best = select_weight(dev)
    print(f"## {corpus} dev: the {kind} weight (2-slave DD)\n")
    print("| weight | F1 micro | F1 macro | certified |")
    print("|---:|---:|---:|---:|")
    for w, r in dev.items():
        print(f"| {w:g} | {r['f1']:.4f} | {r['macro_f1']:.4f} | {r['certified']:.3f} |")
    rows: list[str] = []
    for method in args.methods:
        r = evaluate_split(
            model,
            splits["test"],
            best,
            method,
            corpus,
            threshold=args.threshold,
            max_iterations=args.max_iterations,
            groups=groups["test"],
        )
        rows.append(
            f"| {method} | {r['f1']:.4f} | {r['macro_f1']:.4f} | {r['groups']} ({r['multi']}) "
            f"| {r['certified']:.3f} | {r['iterations']:.1f} | {r['ms_per_group']:.1f} |"
        )
        print(f"[{time.perf_counter() - began:.0f} s] test {method} done", file=sys.stderr)
    two: TwoStage | None = None
    if not args.no_two_stage:
        two = TwoStage(model, corpus, args.threshold)
        first_epochs = _checkpoint_epochs(args.checkpoint)
        second_epochs = args.second_epochs or int(trainer.get("max_epochs", first_epochs))
        two.fit(
            splits,
            args.folds,
            first_epochs,
            second_epochs,
            min_feature_count=int(_min_feature_count(args.config)),
            batch_size=datamodule.batch_size,
            clip=float(trainer.get("gradient_clip_val") or 0.0) or float("inf"),
            seed=args.seed,
        )
        r = two.evaluate(splits["test"], groups["test"])
        rows.insert(
            1 if args.methods and args.methods[0] == "viterbi" else 0,
            f"| two_stage | {r['f1']:.4f} | {r['macro_f1']:.4f} | {r['groups']} (n/a) | n/a | n/a "
            f"| {r['ms_per_group']:.1f} |",
        )
        print(
            f"[{time.perf_counter() - began:.0f} s] two-stage done: {args.folds} folds x "
            f"{first_epochs} epochs, second stage {second_epochs} epochs (dev F1 per epoch "
            f"{[round(f, 4) for f in two.history]}), fit {two.fit_seconds:.0f} s",
            file=sys.stderr,
        )
    print(f"\n## {corpus} test, weight {best:g} (chosen on dev)\n")
    print(
        "| decoder | F1 micro | F1 macro | groups (with patterns) | certified | iterations | ms / group |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(row)
    if two is not None:
        best_epoch = 1 + max(range(len(two.history)), key=lambda i: two.history[i])
        print(
            f"\ntwo_stage: Krishnan & Manning features (tm, em, ctm, cem); training tags from "
            f"{args.folds}-fold jackknifing ({first_epochs} epoch(s) per fold, as the checkpoint); "
            f"second stage {len(two.history)} epochs, best dev epoch {best_epoch} "
            f"(dev F1 {max(two.history):.4f}); fitted in {two.fit_seconds:.0f} s."
        )
    print(f"\nTotal {time.perf_counter() - began:.0f} s.", file=sys.stderr)
    return 0


def _min_feature_count(config: Path) -> int:
    """The config's ``data.min_feature_count`` (default 1): the fold models' feature cut-off."""
    return int(yaml.safe_load(config.read_text())["data"].get("min_feature_count", 1))


if __name__ == "__main__":
    sys.exit(main())
