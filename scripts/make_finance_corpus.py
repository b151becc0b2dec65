"""Write a run of the synthetic finance corpus as a CoNLL file and print its statistics.

    python scripts/make_finance_corpus.py --seed 0 --docs 30 --out data/finance
    python scripts/make_finance_corpus.py --seed 0 --docs 30 --out data/finance \\
        --test-seed 1 --test-docs 200            # also the test run and the unseen-token curve

Writes ``OUT/finance-<seed>.txt`` (``token tag`` lines, a ``-DOCSTART-`` line before each document),
with ``--test-seed`` also ``OUT/finance-<test seed>.txt``, and with ``--texts`` the surface text of every
sentence (digits and punctuation included) next to each as ``finance-<seed>.text.txt``. The same seed
gives the same bytes on any machine, and the first ``n`` documents of a run are the same whatever
``--docs`` is.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crfhead.data.conll import write_conll
from crfhead.data.finance import (
    ENTITY_TYPES,
    FinanceDocument,
    corpus_statistics,
    generate_documents,
    generate_finance_documents,
    unseen_rate,
)
from crfhead.data.sentence import Sentence


def _write(docs: Sequence[FinanceDocument], out: Path, seed: int, texts: bool) -> Path:
    path = out / f"finance-{seed}.txt"
    write_conll([s for d in docs for s in d.sentences], path)
    if texts:
        lines: list[str] = []
        for d in docs:
            lines += [f"# {d.doc_id} {d.kind}: {d.company}", *d.texts, ""]
        (out / f"finance-{seed}.text.txt").write_text("\n".join(lines), encoding="utf-8")
    return path


def _describe(name: str, stats: dict[str, Any], dropped: Counter[str]) -> str:
    entities, multi = stats["entities"], stats["multi_token_entities"]
    lines = [
        f"{name}: {stats['documents']} documents, {stats['sentences']} sentences, "
        f"{stats['tokens']} tokens ({stats['tokens_per_document']:.1f} per document, "
        f"{stats['tokens_per_sentence']:.1f} per sentence), vocabulary {stats['vocabulary']}, "
        f"{stats['entity_tokens']} tokens inside entities",
        "  entities (multi-token, dropped because no letter survived):",
    ]
    for t in ENTITY_TYPES:
        lines.append(f"    {t:<8} {entities.get(t, 0):>6} ({multi.get(t, 0)}, {dropped.get(t, 0)})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="the corpus run (default 0)")
    parser.add_argument("--docs", type=int, default=30, help="documents to write (default 30)")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--test-seed", type=int, default=None, help="also write this run as test")
    parser.add_argument("--test-docs", type=int, default=200, help="test documents (default 200)")
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[3, 10, 30],
        help="training sizes (documents) for the unseen-token curve (default 3 10 30)",
    )
    parser.add_argument("--texts", action="store_true", help="also write the surface text")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    args = parser.parse_args(argv)
    if args.docs < 1 or args.test_docs < 1 or min(args.sizes) < 1:
        parser.error("--docs, --test-docs and --sizes must be positive")
    if args.test_seed is not None and args.test_seed == args.seed:
        parser.error("--test-seed must differ from --seed")

    start = time.perf_counter()
    train_docs = generate_finance_documents(args.seed, args.docs)
    elapsed = time.perf_counter() - start
    train = [s for d in train_docs for s in d.sentences]
    path = _write(train_docs, args.out, args.seed, args.texts)
    print(f"wrote {path} ({args.docs} documents generated in {elapsed:.2f} s)")
    train_dropped: Counter[str] = Counter()
    for d in train_docs:
        train_dropped.update(d.dropped)

    test: list[Sentence] = []
    test_dropped: Counter[str] = Counter()
    if args.test_seed is not None:
        start = time.perf_counter()
        test_docs = generate_finance_documents(args.test_seed, args.test_docs)
        elapsed = time.perf_counter() - start
        test = [s for d in test_docs for s in d.sentences]
        path = _write(test_docs, args.out, args.test_seed, args.texts)
        print(f"wrote {path} ({args.test_docs} documents generated in {elapsed:.2f} s)")
        for d in test_docs:
            test_dropped.update(d.dropped)

    stats = corpus_statistics(train, test)
    curve: dict[int, float] = {}
    if test:
        prefix = generate_documents(args.seed, max(args.sizes))  # prefixes of the same run
        curve = {n: unseen_rate(prefix[:n], test) for n in args.sizes}
    if args.json:
        stats["dropped"] = {"train": dict(train_dropped), "test": dict(test_dropped)}
        stats["unseen_rate_by_train_docs"] = curve
        print(json.dumps(stats, indent=2))
        return 0
    print(_describe(f"run {args.seed}", stats["train"], train_dropped))
    if test:
        print(_describe(f"run {args.test_seed} (test)", stats["test"], test_dropped))
        print(
            f"test tokens unseen in the first n training documents of run {args.seed} "
            f"({args.test_docs} test documents of run {args.test_seed}):"
        )
        for n, rate in curve.items():
            print(f"  n = {n:>3}: {rate:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
