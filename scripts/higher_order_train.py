"""The seed's training: an averaged structured perceptron whose decoder is the higher-order one (seed 001).

    python scripts/higher_order_train.py                       # MSM2013, chain vs 2-slave DD, 10 epochs
    python scripts/higher_order_train.py --methods viterbi dd2slave ilp --epochs 10

For each decoder in ``--methods``: indicator features (the finance/MSM2013 templates) and a constrained
BIOES chain, plus one learned consistency weight per entity type and one for all-``O``
(:func:`~crfhead.higher_order.consistency_patterns` over groups of tweets linked by more than 4 shared
words, as the seed). Every training group is decoded with the current weights; when the labelling
differs from gold, one SGD step of rate 1 on ``full score(decoded) - full score(gold)`` is Collins'
perceptron update of every weight, chain and non-local alike; evaluation uses the weights averaged over
every step. ``viterbi`` trains and decodes the chain alone (the baseline). Printed: test span F1 micro
and macro, the fraction of test groups certified, and the time spent.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from crfhead import engine
from crfhead.data.corpora import MSM2013Corpus
from crfhead.data.datamodule import TaggingDataModule, collator_for
from crfhead.data.sentence import Sentence
from crfhead.encoders import IndicatorEncoder
from crfhead.evaluation.metrics import TaggingMetrics
from crfhead.heads import StructuredPerceptron
from crfhead.higher_order import METHODS, Pattern, consistency_patterns, decode, group_tweets
from crfhead.training.build import data_sizes


class Model(nn.Module):
    """Indicator encoder + perceptron chain + one weight per kind of consistency pattern."""

    def __init__(self, vocabs: dict, kinds: Sequence[str]) -> None:  # type: ignore[type-arg]
        super().__init__()
        sizes = data_sizes(vocabs)
        labels = vocabs["labels"]
        self.encoder = IndicatorEncoder(sizes["num_tags"], sizes["num_features"])
        nn.init.zeros_(self.encoder.weight)
        self.head = StructuredPerceptron(
            sizes["num_tags"], labels=labels["labels"], scheme=labels["scheme"]
        )
        self.kinds = list(kinds)
        self.weights = nn.Parameter(torch.zeros(len(kinds), dtype=torch.float64))


def kind_patterns(
    tokens: Sequence[Sequence[str]], labels: Sequence[str], scheme: str, kinds: Sequence[str]
) -> list[list[Pattern]]:
    """The group's consistency patterns, one list per kind (score 1 each)."""
    return [
        consistency_patterns(tokens, labels, scheme, weight={k: float(k == kind) for k in kinds})
        for kind in kinds
    ]


def counts(by_kind: list[list[Pattern]], tags: Tensor) -> Tensor:
    """How many patterns of each kind hold in ``tags`` ``(B, T)``, ``(kinds,)`` float64."""
    rows = tags.tolist()
    return torch.tensor(
        [sum(all(rows[b][t] == k for b, t, k in p.cells) for p in ps) for ps in by_kind],
        dtype=torch.float64,
    )


def run(
    model: Model,
    collate,
    batch_sentences: list[Sentence],
    by_kind,
    method: str,
    max_iterations: int,
):  # type: ignore[no-untyped-def]
    batch = collate(batch_sentences)
    emissions = model.encoder(batch)
    pot = model.head.potentials(emissions, batch.mask)
    w = model.weights.detach()
    patterns = [Pattern(p.cells, float(w[i])) for i, ps in enumerate(by_kind) for p in ps]
    if method == "viterbi":
        patterns = []
    r = decode(
        pot.emissions.detach(),
        pot.transitions.detach(),
        pot.start.detach(),
        pot.end.detach(),
        pot.mask,
        patterns,
        method=method,
        max_iterations=max_iterations,
    )
    return batch, pot, r


def chunked(groups: list[list[int]], size: int) -> list[list[int]]:
    """Groups cut into consecutive pieces of at most ``size`` tweets.

    Single linkage chains tweets through shared function words into one giant component (1,303 of
    the 2,251 training tweets at threshold 4); one perceptron update for it would be the sum of a
    thousand sentence updates made with one stale model, and would swamp the average.
    """
    return [g[i : i + size] for g in groups for i in range(0, len(g), size)]


def train_and_test(
    dm: TaggingDataModule,
    method: str,
    epochs: int,
    threshold: int,
    max_iterations: int,
    seed: int,
    max_group: int = 16,
) -> dict[str, float]:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    vocabs = dm.vocabs
    labels = vocabs["labels"]["labels"]
    scheme = vocabs["labels"]["scheme"]
    kinds = [*sorted({lab.split("-", 1)[1] for lab in labels if "-" in lab}), "O"]
    model = Model(vocabs, kinds).double()
    collate = collator_for(vocabs, {"features"})
    sgd = torch.optim.SGD(model.parameters(), lr=1.0)
    # Collins' average: the mean of the weights after every training group.
    sums = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
    steps = 0
    train = dm.splits["train"]
    groups = chunked(group_tweets([s.tokens for s in train], threshold=threshold), max_group)
    prepared = [
        ([train[i] for i in g], kind_patterns([train[i].tokens for i in g], labels, scheme, kinds))
        for g in groups
    ]
    began = time.perf_counter()
    for _ in range(epochs):
        rng.shuffle(prepared)
        for sentences, by_kind in prepared:
            batch, pot, r = run(model, collate, sentences, by_kind, method, max_iterations)
            gold = batch.tags
            assert gold is not None
            gold = torch.where(batch.mask, gold, torch.full_like(gold, -1))
            if not torch.equal(r.tags, gold):
                sgd.zero_grad()
                loss = engine.score(pot, r.tags).sum() - engine.score(pot, gold).sum()
                if method != "viterbi":
                    loss = loss + model.weights @ (counts(by_kind, r.tags) - counts(by_kind, gold))
                loss.backward()
                sgd.step()
            for name, p in model.named_parameters():
                sums[name] += p.detach()
            steps += 1
    train_s = time.perf_counter() - began
    final = model
    with torch.no_grad():
        for name, p in final.named_parameters():
            p.copy_(sums[name] / max(steps, 1))
    test = dm.splits["test"]
    metrics = TaggingMetrics(scheme)
    certified, n, decode_s = 0, 0, 0.0
    with torch.no_grad():
        for g in chunked(group_tweets([s.tokens for s in test], threshold=threshold), max_group):
            sentences = [test[i] for i in g]
            by_kind = kind_patterns([s.tokens for s in sentences], labels, scheme, kinds)
            _, _, r = run(final, collate, sentences, by_kind, method, max_iterations)
            certified += r.certified
            n += 1
            decode_s += r.seconds
            pred = [[labels[k] for k in row if k >= 0] for row in r.tags.tolist()]
            metrics.update([s.tags or [] for s in sentences], pred)
    out = metrics.compute()
    return {
        "f1": out["f1"],
        "macro_f1": out["macro_f1"],
        "certified": certified / max(n, 1),
        "train_s": train_s,
        "decode_ms": 1e3 * decode_s / max(n, 1),
        "weights": dict(zip(kinds, final.weights.tolist(), strict=True)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=["viterbi", "dd2slave"])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--threshold", type=int, default=4)
    parser.add_argument("--max-iterations", type=int, default=100)
    parser.add_argument("--split-seed", type=int, default=13)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--max-group", type=int, default=16, help="tweets per decoded group, at most"
    )
    parser.add_argument("--msm2013", type=Path, default=None, help="the training file")
    args = parser.parse_args(argv)
    corpus = MSM2013Corpus(args.split_seed, None if args.msm2013 is None else str(args.msm2013))
    dm = TaggingDataModule(corpus=corpus, scheme="BIOES")
    print(f"## averaged perceptron, {args.epochs} epochs, MSM2013 seeded split {args.split_seed}\n")
    print(
        "| decoder (train and test) | F1 micro | F1 macro | test groups certified "
        "| train s | decode ms / group | learned consistency weights |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    for method in args.methods:
        r = train_and_test(
            dm, method, args.epochs, args.threshold, args.max_iterations, args.seed, args.max_group
        )
        weights = ", ".join(f"{k} {v:.1f}" for k, v in r["weights"].items())  # type: ignore[attr-defined]
        print(
            f"| {method} | {r['f1']:.4f} | {r['macro_f1']:.4f} | {r['certified']:.3f} "
            f"| {r['train_s']:.0f} | {r['decode_ms']:.1f} | {weights if method != 'viterbi' else '—'} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
