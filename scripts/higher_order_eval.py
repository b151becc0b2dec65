"""A trained chain model decoded with higher-order factors over groups, beside a two-stage baseline (seed 001).

    python train.py --config configs/msm2013/indicator_crf.yaml          # the chain model
    python scripts/higher_order_eval.py --checkpoint runs/msm2013_indicator_crf/version_0/checkpoints/last.ckpt
    python train.py --config configs/conll2003/indicator_crf.yaml
    python scripts/higher_order_eval.py --config configs/conll2003/indicator_crf.yaml \\
        --checkpoint runs/conll2003_indicator_crf/version_0/checkpoints/epoch=0-step=439.ckpt

The chain CRF is trained first; the non-local weight is then chosen on the dev split (the "chain first,
then the non-local weights" route of the higher-order issue; the seed instead trains everything with the
averaged perceptron). The corpus is read from the config (or ``--corpus``):

* ``msm2013``: each split's tweets are grouped by single linkage (more than ``--threshold`` shared
  words, as the seed) and every group gets :func:`~crfhead.higher_order.consistency_patterns`;
* ``conll2003``: the groups are the documents (``Sentence.doc_id``) and every document gets
  :func:`~crfhead.higher_order.skip_patterns` (identical capitalised tokens).

Each group is decoded jointly by every method. Beside them, the row ``two_stage`` is the baseline of
Krishnan & Manning (2006), :mod:`crfhead.higher_order.two_stage`: a second indicator CRF with the
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
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import yaml

from crfhead.data.datamodule import TaggingDataModule, collator_for
from crfhead.data.grouping import DocumentGroups, TweetGroups
from crfhead.data.sentence import LabelVocab, Sentence
from crfhead.evaluation.metrics import TaggingMetrics
from crfhead.higher_order import (
    METHODS,
    Pattern,
    consistency_patterns,
    decode,
    skip_patterns,
)
from crfhead.higher_order.two_stage import (
    TwoStageCollator,
    extend_vocabs,
    jackknife_tags,
    majority_features,
    predict_tags,
    train_tagger,
    with_features,
)
from crfhead.training.module import TaggerModule

ROOT = Path(__file__).resolve().parents[1]

CORPORA = ("msm2013", "conll2003")
GRIDS = {"msm2013": [0.0, 0.5, 1.0, 2.0, 4.0, 8.0], "conll2003": [0.0, 0.25, 0.5, 1.0, 2.0, 4.0]}
_CLASSES = {"MSM2013Corpus": "msm2013", "CoNLLCorpus": "conll2003"}


def group_sentences(sentences: list[Sentence], corpus: str, threshold: int = 4) -> list[list[int]]:
    """The groups decoded jointly: tweet groups (``msm2013``) or documents (``conll2003``).

    Documents are the runs of one ``doc_id`` in order of first appearance; a sentence without one
    is a group of its own.
    """
    if corpus == "msm2013":
        return TweetGroups(threshold=threshold).groups(sentences)
    if corpus != "conll2003":
        raise ValueError(f"corpus must be one of {CORPORA}, got {corpus!r}")
    return DocumentGroups().groups(sentences)


def patterns_for(
    tokens: list[list[str]], labels: LabelVocab, corpus: str, weight: float
) -> list[Pattern]:
    """The group's non-local patterns: consistency (``msm2013``) or skip-chain (``conll2003``)."""
    if weight == 0.0:
        return []
    if corpus == "conll2003":
        return skip_patterns(tokens, labels.labels, weight=weight)
    if len(tokens) < 2:
        return []
    return consistency_patterns(tokens, labels.labels, labels.scheme, weight=weight)


def evaluate(
    model: TaggerModule,
    sentences: list[Sentence],
    weight: float,
    method: str,
    threshold: int = 4,
    max_iterations: int = 300,
    corpus: str = "msm2013",
    groups: list[list[int]] | None = None,
) -> dict[str, float]:
    """F1 micro/macro, certified fraction, iterations and seconds per group of one split."""
    labels = model.tagger.labels
    collate = collator_for(model.hparams["vocabs"], model.tagger.needs)
    metrics = TaggingMetrics(labels.scheme)
    certified, iterations, seconds, multi = 0, [], [], 0
    if groups is None:
        groups = group_sentences(sentences, corpus, threshold)
    for group in groups:
        batch = collate([sentences[i] for i in group])
        with torch.inference_mode():
            emissions = model.tagger(batch)
            pot = model.tagger.head.potentials(emissions, batch.mask)
        patterns = patterns_for([s.tokens for s in batch.sentences], labels, corpus, weight)
        multi += bool(patterns)
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


class TwoStage:
    """Krishnan & Manning's two-stage tagger: the first-stage checkpoint, then a second CRF.

    Args:
        first: the trained chain model (the first stage).
        corpus: ``msm2013`` or ``conll2003`` (tokens are compared lowercased on tweets, exactly on
            CoNLL, as the corpus's patterns compare them).
        threshold: the tweet-grouping threshold.
    """

    def __init__(self, first: TaggerModule, corpus: str, threshold: int = 4) -> None:
        self.first, self.corpus, self.threshold = first.eval(), corpus, threshold
        self.lowercase = corpus == "msm2013"
        self.scheme = first.tagger.labels.scheme
        self.first_collate = collator_for(first.hparams["vocabs"], first.tagger.needs)
        self.second: TaggerModule | None = None
        self.collate: TwoStageCollator | None = None
        self.history: list[float] = []
        self.fit_seconds = 0.0

    def featurise(
        self, sentences: list[Sentence], tags: list[list[str]], groups: list[list[int]]
    ) -> list[Sentence]:
        """Copies of ``sentences`` carrying the majority features of ``tags`` over ``groups``."""
        feats = majority_features(
            [s.tokens for s in sentences], tags, groups, self.scheme, lowercase=self.lowercase
        )
        return with_features(sentences, feats)

    def stage_one(self, sentences: list[Sentence], groups: list[list[int]]) -> list[Sentence]:
        """The sentences with features from the first stage's own tags (dev, test)."""
        return self.featurise(
            sentences, predict_tags(self.first, self.first_collate, sentences), groups
        )

    def fit(
        self,
        splits: dict[str, list[Sentence]],
        folds: int,
        first_epochs: int,
        second_epochs: int,
        min_feature_count: int = 1,
        batch_size: int = 32,
        clip: float = 5.0,
        seed: int = 0,
    ) -> None:
        """Jackknife the training tags, featurise train and dev, train the second stage."""
        began = time.perf_counter()
        hparams = dict(self.first.hparams)
        vocabs = hparams["vocabs"]
        train = splits["train"]
        groups = group_sentences(train, self.corpus, self.threshold)
        tags = jackknife_tags(
            hparams,
            vocabs,
            train,
            groups,
            folds,
            first_epochs,
            min_feature_count=min_feature_count,
            batch_size=batch_size,
            clip=clip,
            seed=seed,
        )
        train2 = self.featurise(train, tags, groups)
        dev = splits["dev"]
        dev2 = self.stage_one(dev, group_sentences(dev, self.corpus, self.threshold))
        vocabs2 = extend_vocabs(vocabs, train2)
        self.collate = TwoStageCollator(vocabs2)
        self.second, self.history = train_tagger(
            hparams,
            vocabs2,
            self.collate,
            train2,
            second_epochs,
            dev=dev2,
            batch_size=batch_size,
            clip=clip,
            seed=seed,
        )
        self.fit_seconds = time.perf_counter() - began

    def evaluate(self, sentences: list[Sentence], groups: list[list[int]]) -> dict[str, float]:
        """F1 micro/macro and the pipeline's milliseconds per group on ``sentences``."""
        if self.second is None or self.collate is None:
            raise RuntimeError("fit the second stage first")
        picked = sorted(i for g in groups for i in g)
        where = {i: j for j, i in enumerate(picked)}
        subset = [sentences[i] for i in picked]
        local = [[where[i] for i in g] for g in groups]
        began = time.perf_counter()
        pred = predict_tags(self.second, self.collate, self.stage_one(subset, local))
        seconds = time.perf_counter() - began
        metrics = TaggingMetrics(self.scheme)
        metrics.update([s.tags or [] for s in subset], pred)
        out = metrics.compute()
        return {
            "f1": out["f1"],
            "macro_f1": out["macro_f1"],
            "groups": len(groups),
            "ms_per_group": 1e3 * seconds / max(len(groups), 1),
        }


def corpus_of(config: Path) -> str:
    """The corpus name of a config's ``data.corpus.class_path``."""
    cls = yaml.safe_load(config.read_text())["data"]["corpus"]["class_path"].rsplit(".", 1)[-1]
    if cls not in _CLASSES:
        raise ValueError(
            f"no higher-order evaluation for corpus class {cls}; known {list(_CLASSES)}"
        )
    return _CLASSES[cls]


def _data(config: Path) -> tuple[TaggingDataModule, dict[str, Any]]:
    """The config's data module and its trainer section."""
    spec = yaml.safe_load(config.read_text())
    data: dict[str, Any] = dict(spec["data"])
    corpus = data.pop("corpus")
    data.pop("grouping", None)  # this script groups each split itself (group_sentences)
    module, name = corpus["class_path"].rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    return TaggingDataModule(corpus=cls(**corpus.get("init_args", {})), **data), dict(
        spec.get("trainer", {})
    )


def _checkpoint_epochs(path: Path) -> int:
    """How many epochs the checkpoint's weights were trained (its ``epoch`` + 1)."""
    state = torch.load(path, map_location="cpu", weights_only=False)
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
    weights = args.weights if args.weights is not None else GRIDS[corpus]
    model = TaggerModule.load_from_checkpoint(args.checkpoint, map_location="cpu").eval()
    datamodule, trainer = _data(args.config)
    splits = datamodule.splits
    began = time.perf_counter()
    groups = {
        split: group_sentences(splits[split], corpus, args.threshold)[: args.max_groups]
        for split in ("dev", "test")
    }
    kind = "consistency" if corpus == "msm2013" else "skip-chain"
    dev = {
        w: evaluate(
            model,
            splits["dev"],
            w,
            "dd2slave",
            args.threshold,
            args.max_iterations,
            corpus,
            groups["dev"],
        )
        for w in weights
    }
    best = max(dev, key=lambda w: (dev[w]["f1"], dev[w]["macro_f1"]))
    print(f"## {corpus} dev: the {kind} weight (2-slave DD)\n")
    print("| weight | F1 micro | F1 macro | certified |")
    print("|---:|---:|---:|---:|")
    for w, r in dev.items():
        print(f"| {w:g} | {r['f1']:.4f} | {r['macro_f1']:.4f} | {r['certified']:.3f} |")
    rows: list[str] = []
    for method in args.methods:
        r = evaluate(
            model,
            splits["test"],
            best,
            method,
            args.threshold,
            args.max_iterations,
            corpus,
            groups["test"],
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
