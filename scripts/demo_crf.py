"""Layer demo: the classic indicator-feature linear CRF on the synthetic finance corpus.

Trains on the first ``--train-docs`` documents of finance run ``--seed`` and tests on ``--test-docs``
documents of run ``--test-seed`` (the seed's finance case study), with the seed's templates (word,
3-letter prefix and suffix, two words each side, plus shape and bias), a constrained BIO CRF, and prints
seqeval's strict span F1 table, token accuracy (overall and on words unseen in training), and the
marginals and top-3 paths of one sentence.

This stands in for the main job until ``train.py`` (Lightning, every encoder and head) lands.

    python scripts/demo_crf.py [--train-docs 30] [--epochs 30]
"""

from __future__ import annotations

import argparse
import time

import torch
from seqeval.metrics import classification_report, f1_score
from seqeval.scheme import IOB2
from torch import nn

from crfhead import CRF
from crfhead.data import (
    FINANCE_LABELS,
    Collator,
    FeatureTemplates,
    LabelVocab,
    Sentence,
    generate_corpus,
)


class IndicatorCRF(nn.Module):
    """Emissions = the sum of one learned weight vector per active feature; a constrained CRF on top."""

    def __init__(self, num_features: int, labels: list[str]) -> None:
        super().__init__()
        self.weights = nn.Embedding(num_features, len(labels), padding_idx=0)
        nn.init.zeros_(self.weights.weight)
        self.crf = CRF(len(labels), labels=labels, scheme="BIO")

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.weights(features).sum(dim=2)  # (B, T, F, K) -> emissions (B, T, K)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--test-seed", type=int, default=1)
    parser.add_argument("--train-docs", type=int, default=30)
    parser.add_argument("--test-docs", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(args.seed)

    train = generate_corpus(args.seed, args.train_docs)
    test = generate_corpus(args.test_seed, args.test_docs)
    labels = LabelVocab(FINANCE_LABELS, "BIO")
    templates = FeatureTemplates()
    collate = Collator(labels, features=(templates, templates.build_vocab(train)))
    print(
        f"train: {len(train)} sentences of run {args.seed}; test: {len(test)} of run {args.test_seed}"
    )

    model = IndicatorCRF(len(collate.features[1]) if collate.features else 1, labels.labels)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    started = time.perf_counter()
    batches = [collate(train[i : i + 32]) for i in range(0, len(train), 32)]
    for epoch in range(args.epochs):
        total = 0.0
        for batch in batches:
            assert batch.features is not None and batch.tags is not None
            emissions = model(batch.features)
            loss = model.crf.nll(emissions, batch.tags, batch.mask, reduction="token_mean")
            loss = loss + 1e-4 * model.weights.weight.pow(2).sum()  # a weak Gaussian prior
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        if (epoch + 1) % 10 == 0:
            print(f"epoch {epoch + 1}: loss/token {total / len(batches):.4f}")
    print(f"trained in {time.perf_counter() - started:.1f} s")

    model.eval()
    seen = {w for s in train for w in s.tokens}
    pred: list[list[str]] = []
    with torch.inference_mode():
        for i in range(0, len(test), 256):
            batch = collate(test[i : i + 256])
            assert batch.features is not None
            pred += model.crf.decode_labels(model(batch.features), batch.mask)
    gold = [s.tags or [] for s in test]
    pairs = [
        (p, g, w)
        for ps, s in zip(pred, test, strict=True)
        for p, g, w in zip(ps, s.tags or [], s.tokens, strict=True)
    ]
    accuracy = sum(p == g for p, g, _ in pairs) / len(pairs)
    unseen = [(p, g) for p, g, w in pairs if w not in seen]
    print(classification_report(gold, pred, mode="strict", scheme=IOB2, digits=3))
    print(
        f"token accuracy {accuracy:.4f}; on the {len(unseen) / len(pairs):.3f} of test tokens unseen in training: "
        f"{sum(p == g for p, g in unseen) / max(len(unseen), 1):.4f}"
    )
    print(f"span F1 (seqeval, strict BIO): {f1_score(gold, pred, mode='strict', scheme=IOB2):.4f}")

    example: Sentence = next(s for s in test if "the" in s.tokens and len(s) <= 14)
    batch = collate([example])
    assert batch.features is not None
    with torch.inference_mode():
        emissions = model(batch.features)
        marginals = model.crf.marginals(emissions, batch.mask)[0]
        scores, paths = model.crf.topk(emissions, 3, batch.mask)
    print("\nsentence:", " ".join(example.tokens))
    print("gold:    ", " ".join(example.tags or []))
    for r in range(3):
        print(
            f"top-{r + 1} ({float(scores[0, r]):7.2f}):",
            " ".join(labels.decode(paths[0, r].tolist())),
        )
    conf = marginals.max(-1).values.tolist()
    print("marginal of each top-1 tag:", " ".join(f"{c:.2f}" for c in conf))


if __name__ == "__main__":
    main()
