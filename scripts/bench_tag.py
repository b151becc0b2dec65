"""Throughput of ``tagger.tag`` on short sentences: the finance test run's sentences, sentences/s.

    .venv/bin/python scripts/bench_tag.py --model CKPT_OR_FOLDER [--docs 100] [--threads 2] [--passes 12]

The texts are the test run's sentences (``FinanceCorpus(test_docs=DOCS)``) joined by spaces; the
median and the best of ``--passes`` passes over all of them are reported, after one warm-up pass
(single passes on a shared 2-core VM move by 10-20 %), and the rate of all passes together, which
counts the passes a full garbage collection fell in (the median leaves them out).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import crfhead
from crfhead.data.corpora import FinanceCorpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--passes", type=int, default=12)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tagger = crfhead.load(args.model)
    test = FinanceCorpus(train_docs=1, dev_docs=1, test_docs=args.docs).load()["test"]
    texts = [" ".join(s.tokens) for s in test]
    out = tagger.tag(texts, progress=False)
    times = []
    for _ in range(args.passes):
        start = time.perf_counter()
        out = tagger.tag(texts, progress=False)
        times.append(time.perf_counter() - start)
    entities = sum(len(x) for x in out)
    print(
        f"{len(texts)} sentences, {entities} entities: {len(texts) / statistics.median(times):.0f} "
        f"sentences/s (median of {args.passes} passes; best {len(texts) / min(times):.0f}; "
        f"all passes together {len(texts) * len(times) / sum(times):.0f})"
    )


if __name__ == "__main__":
    main()
