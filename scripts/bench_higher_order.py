"""Higher-order decoders side by side on synthetic suites: 2-slave DD vs per-factor DD vs ILP vs Viterbi.

    python scripts/bench_higher_order.py                 # every suite, 20 groups each, markdown
    python scripts/bench_higher_order.py --groups 5 --suites potts

Suites (seeded; ``B`` sentences of ``T`` tokens, ``K`` labels, chain scores N(0, 1)):

* ``potts``: skip edges between random token pairs rewarding the same label (size-2 patterns, > 0);
* ``cliques``: the seed's group consistency: identical "phrases" (random token spans of length 1-3 in
  different sentences) rewarded for the same label subsequence, one pattern per candidate subsequence;
* ``mixed``: dense skip tables with scores of both signs on random token pairs.

For each method: the fraction of groups certified optimal, the mean gap of its primal to the ILP's
optimum (0 = as good as exact), the mean iterations and the mean decode time per group; ratios of time
are to the chain (Viterbi) decode. "LP tight" counts the groups whose LP relaxation (the local polytope
with the pattern variables, which both dual decompositions can at best reach) is integral: a
decomposition can certify only those.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import torch

from crfhead.higher_order import METHODS, Pattern, decode
from crfhead.higher_order.group import prepare
from crfhead.higher_order.ilp import solve_ilp

SuiteFn = Callable[[np.random.Generator, int, int, int, float], list[Pattern]]


def _pairs(rng: np.random.Generator, B: int, T: int, n: int) -> list[tuple[tuple[int, int], ...]]:
    out = []
    for _ in range(n):
        a, b = rng.choice(B * T, size=2, replace=False)
        out.append(((int(a) // T, int(a) % T), (int(b) // T, int(b) % T)))
    return out


def potts(rng: np.random.Generator, B: int, T: int, K: int, strength: float) -> list[Pattern]:
    """Same-label rewards on random token pairs."""
    return [
        Pattern(((u[0], u[1], k), (v[0], v[1], k)), strength)
        for u, v in _pairs(rng, B, T, B * T // 2)
        for k in range(K)
    ]


def cliques(rng: np.random.Generator, B: int, T: int, K: int, strength: float) -> list[Pattern]:
    """Identical phrases in two sentences rewarded for every shared label subsequence of length <= 2."""
    out: list[Pattern] = []
    for _ in range(max(1, B // 2)):
        n = int(rng.integers(1, 3))
        b1, b2 = rng.choice(B, size=2, replace=B < 2)
        if b1 == b2:
            continue
        t1, t2 = (int(rng.integers(0, T - n + 1)) for _ in range(2))
        for labels in np.ndindex(*(K,) * n):
            cells = tuple((int(b1), t1 + i, int(k)) for i, k in enumerate(labels))
            cells += tuple((int(b2), t2 + i, int(k)) for i, k in enumerate(labels))
            out.append(Pattern(cells, strength))
    return out


def mixed(rng: np.random.Generator, B: int, T: int, K: int, strength: float) -> list[Pattern]:
    """Dense skip tables of both signs."""
    return [
        Pattern(((u[0], u[1], k), (v[0], v[1], j)), float(rng.normal() * strength))
        for u, v in _pairs(rng, B, T, B * T // 4)
        for k in range(K)
        for j in range(K)
    ]


SUITES: dict[str, SuiteFn] = {"potts": potts, "cliques": cliques, "mixed": mixed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", nargs="+", choices=sorted(SUITES), default=sorted(SUITES))
    parser.add_argument("--groups", type=int, default=20, help="groups per suite")
    parser.add_argument("--size", default="6,12,5", help="B,T,K of a group")
    parser.add_argument("--strength", type=float, default=1.0, help="pattern score scale")
    parser.add_argument("--max-iterations", type=int, default=300)
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    args = parser.parse_args(argv)
    B, T, K = (int(x) for x in args.size.split(","))
    torch.set_num_threads(1)
    print(
        f"# higher-order decoders, groups of (B, T, K) = ({B}, {T}, {K}), {args.groups} per suite"
    )
    print()
    print(
        "| suite | LP tight | method | certified | mean gap to ILP | mean iterations "
        "| ms / group | time / chain's |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for name in args.suites:
        rows: dict[str, list[tuple[bool, float, int, float]]] = {m: [] for m in args.methods}
        tight = 0
        for seed in range(args.groups):
            rng = np.random.default_rng(seed)
            em = torch.tensor(rng.normal(size=(B, T, K)))
            tr = torch.tensor(rng.normal(size=(K, K)))
            patterns = SUITES[name](rng, B, T, K, args.strength)
            group = prepare(em, tr, None, None, None, patterns)
            c = group.chain
            found = solve_ilp(c.emissions, c.transitions, c.start, c.end, c.mask, group.patterns)
            exact = found.score
            tight += found.lp_integral
            for method in args.methods:
                began = time.perf_counter()
                r = decode(
                    em, tr, patterns=patterns, method=method, max_iterations=args.max_iterations
                )
                ms = (time.perf_counter() - began) * 1e3
                rows[method].append((r.certified, exact - r.primal, r.iterations, ms))
        chain_ms = (
            statistics.mean(x[3] for x in rows.get("viterbi", [])) if "viterbi" in rows else None
        )
        for method, got in rows.items():
            ms = statistics.mean(x[3] for x in got)
            ratio = f"{ms / chain_ms:.1f}" if chain_ms else "—"
            print(
                f"| {name} | {tight}/{args.groups} | {method} | {sum(x[0] for x in got)}/{len(got)} "
                f"| {statistics.mean(x[1] for x in got):.4f} "
                f"| {statistics.mean(x[2] for x in got):.1f} | {ms:.1f} | {ratio} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
