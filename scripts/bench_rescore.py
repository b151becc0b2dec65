"""The k best's and Viterbi's scores with gradients on: the call alone and with its backward.

    .venv/bin/python scripts/bench_rescore.py [--sizes 32,50,9] [--k 5] [--runs 3]
                                              [--against /path/to/other/checkout]

``CRF(K)`` (its parameters require grad) on emissions that require grad, a mask with holes (10 %
of the positions after the first), one thread: ``crf.topk(em, k, mask)`` and the Viterbi scores of
``engine.viterbi`` (the rescore rule, :class:`crfhead.engine.backends.autograd.Rescored`), each
alone and with a backward of its found scores, ``topk`` under ``torch.no_grad`` for reference, and
``engine.score`` of ``(B, T)`` tags with gradients. Each number is the median over 7 rounds of the
median of 100 calls, in microseconds. ``--against`` runs the same in another checkout
(``git worktree add /tmp/old REV``), alternating with this one ``--runs`` times, each in its own
process (``PYTHONPATH`` set to the checkout), so both see the same machine state.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch

COLUMNS = ("topk", "topk + backward", "topk no_grad", "viterbi", "viterbi + backward", "score")


def measure(B: int, T: int, K: int, k: int) -> list[float]:
    """Median microseconds of each column, for this process's crfhead."""
    from crfhead import CRF, engine

    torch.manual_seed(0)
    crf = CRF(K)
    em = torch.randn(B, T, K, requires_grad=True)
    mask = torch.rand(B, T) < 0.9
    mask[:, 0] = True
    tags = torch.randint(0, K, (B, T))
    crf.topk(em.detach(), k, mask)  # loads the kernel

    def topk_backward() -> None:
        scores, _ = crf.topk(em, k, mask)
        scores[scores > float("-inf")].sum().backward()

    def viterbi_backward() -> None:
        engine.viterbi(crf.potentials(em, mask))[0].sum().backward()

    def topk_no_grad() -> None:
        with torch.no_grad():
            crf.topk(em, k, mask)

    calls: list[Callable[[], object]] = [
        lambda: crf.topk(em, k, mask),
        topk_backward,
        topk_no_grad,
        lambda: engine.viterbi(crf.potentials(em, mask)),
        viterbi_backward,
        lambda: engine.score(crf.potentials(em, mask), tags),
    ]
    return [_median_us(fn) for fn in calls]


def _median_us(fn: Callable[[], object]) -> float:
    for _ in range(50):
        fn()
    rounds = []
    for _ in range(7):
        times = []
        for _ in range(100):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        rounds.append(statistics.median(times))
    return statistics.median(rounds) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["32,50,9"])
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--against", help="another crfhead checkout, measured alternately")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child's single size
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.one:
        B, T, K = (int(x) for x in args.one.split(","))
        print(" ".join(f"{v:.1f}" for v in measure(B, T, K, args.k)))
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sides = [("this checkout", here)] + ([("against", args.against)] if args.against else [])
    print("| code | B,T,K | " + " | ".join(f"{c} us" for c in COLUMNS) + " |")
    print("|---|---|" + "---:|" * len(COLUMNS))
    for size in args.sizes:
        for _ in range(args.runs):
            for label, root in sides:
                env = {**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": "1"}
                out = subprocess.run(
                    [sys.executable, __file__, "--one", size, "--k", str(args.k)],
                    env=env, cwd=root, capture_output=True, text=True, check=True,
                ).stdout.split()  # fmt: skip
                print(f"| {label} | {size} | " + " | ".join(out) + " |", flush=True)


if __name__ == "__main__":
    main()
