"""Layer demo: a BiLSTM-CRF of your own, trained on a seeded toy BIO corpus, scored by seqeval.

This stands in for the main job until ``train.py`` (issue 4) and the finance corpus (issue 3) land. It
shows the whole public API of the layer: constrained training and decoding, marginals, top-k, export.

    python scripts/demo_crf.py [--epochs 6] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from seqeval.metrics import classification_report, f1_score
from seqeval.scheme import IOB2
from torch import nn

from crfhead import CRF

FIRST = [
    "anna",
    "marek",
    "li",
    "sofia",
    "omar",
    "ines",
    "tomas",
    "yuki",
    "ravi",
    "elena",
    "jon",
    "aurora",
]
LAST = [
    "novak",
    "chen",
    "garcia",
    "haddad",
    "silva",
    "kowalski",
    "tanaka",
    "patel",
    "berg",
    "power",
]
ORG_HEAD = ["kestrel", "solenne", "aurora", "vantage", "meridian", "halcyon", "borealis", "cobalt"]
ORG_TAIL = ["power", "holdings", "systems", "capital", "group", "labs", "growth"]
FILLER = (
    "said the company reported growth in revenue during quarter as analysts expected strong "
    "results and guided to higher margins while shares rose after call with investors on"
).split()
LABELS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG"]


def make_corpus(n: int, rng: random.Random, seen: float) -> list[tuple[list[str], list[str]]]:
    """Sentences of filler words with 1-3 person or organisation names.

    Names are drawn from the first ``seen`` fraction of each pool (1.0 at test: unseen names occur);
    "aurora", "power" and "growth" are ambiguous between types or with filler words.
    """

    def pick(pool: list[str]) -> str:
        return rng.choice(pool[: max(1, round(len(pool) * seen))])

    out = []
    for _ in range(n):
        words: list[str] = []
        tags: list[str] = []
        for _ in range(rng.randint(1, 3)):
            for _ in range(rng.randint(0, 4)):
                words.append(rng.choice(FILLER))
                tags.append("O")
            if rng.random() < 0.5:
                name = [pick(FIRST), pick(LAST)][: rng.randint(1, 2)]
                typ = "PER"
            else:
                name = [pick(ORG_HEAD), pick(ORG_TAIL)]
                typ = "ORG"
            words += name
            tags += [f"B-{typ}"] + [f"I-{typ}"] * (len(name) - 1)
        out.append((words, tags))
    return out


class BiLSTMCRF(nn.Module):
    """Embeddings → BiLSTM → linear emissions → constrained CRF."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, 32, padding_idx=0)
        self.lstm = nn.LSTM(32, 32, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(64, len(LABELS))
        self.crf = CRF(len(LABELS), labels=LABELS, scheme="BIO")

    def forward(self, words: torch.Tensor) -> torch.Tensor:
        return self.proj(self.lstm(self.embed(words))[0])  # emissions (B, T, K)


def batchify(
    data: list[tuple[list[str], list[str]]], vocab: dict[str, int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    T = max(len(w) for w, _ in data)
    words = torch.zeros(len(data), T, dtype=torch.long)
    tags = torch.full((len(data), T), -100, dtype=torch.long)
    for i, (w, t) in enumerate(data):
        words[i, : len(w)] = torch.tensor([vocab.get(x, 1) for x in w])
        tags[i, : len(t)] = torch.tensor([LABELS.index(x) for x in t])
    return words, tags, words != 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    train, test = make_corpus(600, rng, seen=0.6), make_corpus(300, rng, seen=1.0)
    vocab = {"<pad>": 0, "<unk>": 1}
    for w, _ in train:
        for x in w:
            vocab.setdefault(x, len(vocab))
    model = BiLSTMCRF(len(vocab))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    started = time.perf_counter()
    for epoch in range(args.epochs):
        rng.shuffle(train)
        total = 0.0
        for i in range(0, len(train), 32):
            words, tags, mask = batchify(train[i : i + 32], vocab)
            loss = model.crf.nll(model(words), tags, mask, reduction="token_mean")
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"epoch {epoch + 1}: loss/token {total / (len(train) / 32):.4f}")
    print(f"trained in {time.perf_counter() - started:.1f} s")

    model.eval()
    words, tags, mask = batchify(test, vocab)
    with torch.inference_mode():
        emissions = model(words)
        pred = model.crf.decode_labels(emissions, mask)
        gold = [t for _, t in test]
        print(classification_report(gold, pred, mode="strict", scheme=IOB2, digits=3))
        print(
            f"span F1 (seqeval, strict BIO): {f1_score(gold, pred, mode='strict', scheme=IOB2):.4f}"
        )
        # The rest of the layer on the first test sentence.
        e, m = emissions[:1], mask[:1]
        n = int(m.sum())
        marg = model.crf.marginals(e, m)[0, :n]
        scores, paths = model.crf.topk(e, 3, m)
        print("sentence:", " ".join(test[0][0]))
        print(
            "marginal confidence of the Viterbi tags:",
            [round(float(p), 3) for p in marg.max(-1).values],
        )
        for r in range(3):
            tags_r = [LABELS[i] for i in paths[0, r, :n].tolist()]
            print(f"top-{r + 1} score {float(scores[0, r]):8.3f}:", " ".join(tags_r))


if __name__ == "__main__":
    main()
