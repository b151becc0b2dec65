"""Per-edge transitions on the native kernel: marginals, loss (forward + backward) and Viterbi, ms.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_per_edge.py [--sizes 32,64,17 ...] [--repeats 15]

Random chains ``(B, T, K)`` with per-edge transitions ``(B, T-1, K, K)``, full masks, one thread;
median of ``--repeats`` calls after one warm-up. Run it with ``CRFHEAD_LANES_PER_EDGE_MAX_K=0`` (one
sequence at a time), ``=1000`` (SIMD lanes for every K) and unset (the kernel's choice), interleaved,
to compare the paths.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import torch

from crfhead import make_potentials
from crfhead.engine import marginals, nll, viterbi


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return 1e3 * times[len(times) // 2]


def _row(B: int, T: int, K: int, repeats: int) -> str:
    em, tr = torch.randn(B, T, K), torch.randn(B, T - 1, K, K)
    tags = torch.randint(0, K, (B, T))
    pot = make_potentials(em, tr, None, None, None)

    def loss() -> None:
        leaves = [em.clone().requires_grad_(True), tr.clone().requires_grad_(True)]
        value, _ = nll(make_potentials(*leaves, None, None, None), tags)
        value.sum().backward()  # type: ignore[no-untyped-call]

    return (
        f"marginals {_median_ms(lambda: marginals(pot), repeats):.2f} ms, "
        f"loss {_median_ms(loss, repeats):.2f} ms, "
        f"Viterbi {_median_ms(lambda: viterbi(pot), repeats):.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["32,64,13", "32,64,17", "32,64,33"])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    bound = os.environ.get("CRFHEAD_LANES_PER_EDGE_MAX_K", "unset")
    for size in args.sizes:
        B, T, K = (int(x) for x in size.split(","))
        print(
            f"CRFHEAD_LANES_PER_EDGE_MAX_K={bound} ({B}, {T}, {K}): {_row(B, T, K, args.repeats)}"
        )


if __name__ == "__main__":
    main()
