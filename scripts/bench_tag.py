"""Throughput of ``tagger.tag`` on short sentences: the finance test run's sentences, sentences/s.

    .venv/bin/python scripts/bench_tag.py --model CKPT_OR_FOLDER [--docs 100] [--threads 2]

The texts are the test run's sentences (``FinanceCorpus(test_docs=DOCS)``) joined by spaces; the
best of three passes over all of them is reported, after one warm-up batch.
"""

from __future__ import annotations

import argparse
import time

import torch

import crfhead
from crfhead.data.corpora import FinanceCorpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tagger = crfhead.load(args.model)
    test = FinanceCorpus(train_docs=1, dev_docs=1, test_docs=args.docs).load()["test"]
    texts = [" ".join(s.tokens) for s in test]
    tagger.tag(texts[:64])
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        out = tagger.tag(texts, progress=False)
        best = min(best, time.perf_counter() - start)
    entities = sum(len(x) for x in out)
    print(f"{len(texts)} sentences, {entities} entities: {len(texts) / best:.0f} sentences/s")


if __name__ == "__main__":
    main()
