"""A trained chain model, decoded with higher-order consistency factors over tweet groups (seed 001).

    python train.py --config configs/msm2013/indicator_crf.yaml          # the chain model
    python scripts/higher_order_eval.py --checkpoint runs/msm2013_indicator_crf/version_0/checkpoints/last.ckpt

The chain CRF is trained first; the non-local weight is then chosen on the dev split (the "chain first,
then the non-local weights" route of the higher-order issue; the seed instead trains everything with the
averaged perceptron). Each split's tweets are grouped by single linkage (more than ``--threshold``
shared words, as the seed), every group gets :func:`~crfhead.higher_order.consistency_patterns` with
the weight, and each group is decoded jointly by every method. Printed: span F1 micro and macro
(seqeval strict), the fraction of groups certified optimal, mean iterations and decode time per group.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import yaml

from crfhead.data.corpora import MSM2013Corpus
from crfhead.data.datamodule import TaggingDataModule, collator_for
from crfhead.data.sentence import Sentence
from crfhead.evaluation.metrics import TaggingMetrics
from crfhead.higher_order import METHODS, consistency_patterns, decode, group_tweets
from crfhead.training.module import TaggerModule

ROOT = Path(__file__).resolve().parents[1]


def evaluate(
    model: TaggerModule,
    sentences: list[Sentence],
    weight: float,
    method: str,
    threshold: int,
    max_iterations: int,
) -> dict[str, float]:
    """F1 micro/macro, certified fraction, iterations and seconds per group of one split."""
    labels = model.tagger.labels
    collate = collator_for(model.hparams["vocabs"], model.tagger.needs)
    metrics = TaggingMetrics(labels.scheme)
    certified, iterations, seconds, multi = 0, [], [], 0
    groups = group_tweets([s.tokens for s in sentences], threshold=threshold)
    for group in groups:
        batch = collate([sentences[i] for i in group])
        with torch.inference_mode():
            emissions = model.tagger(batch)
            pot = model.tagger.head.potentials(emissions, batch.mask)
        patterns = []
        if len(group) > 1 and weight != 0.0:
            multi += 1
            patterns = consistency_patterns(
                [s.tokens for s in batch.sentences], labels.labels, labels.scheme, weight=weight
            )
        r = decode(
            pot.emissions,
            pot.transitions,
            pot.start,
            pot.end,
            pot.mask,
            patterns,
            method=method,
            max_iterations=max_iterations,
        )
        certified += r.certified
        iterations.append(r.iterations)
        seconds.append(r.seconds)
        pred = [[labels.labels[k] for k in row if k >= 0] for row in r.tags.tolist()]
        metrics.update([s.tags or [] for s in batch.sentences], pred)
    out = metrics.compute()
    return {
        "f1": out["f1"],
        "macro_f1": out["macro_f1"],
        "groups": len(groups),
        "multi": multi,
        "certified": certified / max(len(groups), 1),
        "iterations": statistics.mean(iterations) if iterations else 0.0,
        "ms_per_group": 1e3 * statistics.mean(seconds) if seconds else 0.0,
    }


def _data(config: Path) -> TaggingDataModule:
    data: dict[str, Any] = dict(yaml.safe_load(config.read_text())["data"])
    corpus = data.pop("corpus")
    return TaggingDataModule(corpus=MSM2013Corpus(**corpus.get("init_args", {})), **data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--config", type=Path, default=ROOT / "configs/msm2013/indicator_crf.yaml")
    parser.add_argument("--threshold", type=int, default=4)
    parser.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.5, 1.0, 2.0, 4.0, 8.0])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--max-iterations", type=int, default=300)
    args = parser.parse_args(argv)
    if not args.checkpoint.is_file():
        parser.error(f"checkpoint not found: {args.checkpoint}")
    model = TaggerModule.load_from_checkpoint(args.checkpoint, map_location="cpu").eval()
    splits = _data(args.config).splits
    began = time.perf_counter()
    dev = {
        w: evaluate(model, splits["dev"], w, "dd2slave", args.threshold, args.max_iterations)
        for w in args.weights
    }
    best = max(dev, key=lambda w: (dev[w]["f1"], dev[w]["macro_f1"]))
    print("## dev: the consistency weight (2-slave DD)\n")
    print("| weight | F1 micro | F1 macro | certified |")
    print("|---:|---:|---:|---:|")
    for w, r in dev.items():
        print(f"| {w:g} | {r['f1']:.4f} | {r['macro_f1']:.4f} | {r['certified']:.3f} |")
    print(f"\n## test, weight {best:g} (chosen on dev)\n")
    print(
        "| decoder | F1 micro | F1 macro | groups (with patterns) | certified | iterations | ms / group |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for method in args.methods:
        r = evaluate(model, splits["test"], best, method, args.threshold, args.max_iterations)
        print(
            f"| {method} | {r['f1']:.4f} | {r['macro_f1']:.4f} | {r['groups']} ({r['multi']}) "
            f"| {r['certified']:.3f} | {r['iterations']:.1f} | {r['ms_per_group']:.1f} |"
        )
    print(f"\nTotal {time.perf_counter() - began:.0f} s.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
