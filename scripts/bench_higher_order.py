"""Higher-order decoders side by side: 2-slave DD vs per-factor DD vs ILP vs Viterbi, synthetic or trained.

    python scripts/bench_higher_order.py                 # every suite, 20 groups each, markdown
    python scripts/bench_higher_order.py --groups 5 --suites potts
    python scripts/bench_higher_order.py --suites chain rowcliques --tree-edges both
    CRFHEAD_DATA=... python scripts/bench_higher_order.py --checkpoint CKPT --config CONFIG \
        --weight 4 [--split test] [--repeats 3] [--max-groups N]

**Trained mode** (``--checkpoint``): the config's corpus, its groups and factors
(:mod:`crfhead.higher_order.corpus_setup`), the checkpoint's potentials
(:func:`crfhead.higher_order.evaluation.group_problems`); only the groups with patterns are timed.
Per group and method, interleaved, the best of ``--repeats`` runs: ``viterbi`` is the engine's
Viterbi alone on the same sentences (float64 potentials already built), every other row a whole
:func:`~crfhead.higher_order.decode` call (validation included); ``dd2slave (grid)`` is a
:class:`~crfhead.higher_order.decode.PreparedGroup` decoded at the corpus's dev-grid weights below
``--weight`` first, then timed at ``--weight`` alone (structure rescaled, multipliers warm), as
:func:`~crfhead.higher_order.evaluation.dev_grid` decodes; ``dd2slave [scipy]`` is the 2-slave loop
on the scipy min cut (the fallback without a compiler). Printed: ms per group (mean of the
per-group bests), the ratio to Viterbi and HiGHS's time over the row's, the certified fraction and
the mean iterations.

Suites (seeded; ``B`` sentences of ``T`` tokens, ``K`` labels, chain scores N(0, 1)):

* ``potts``: skip edges between random token pairs rewarding the same label (size-2 patterns, > 0);
* ``cliques``: the seed's group consistency: identical "phrases" (random token spans of length 1-3 in
  different sentences) rewarded for the same label subsequence, one pattern per candidate subsequence;
* ``mixed``: dense skip tables with scores of both signs on random token pairs;
* ``chain``: dense mixed-sign tables between *consecutive* tokens of a sentence plus same-label skip
  rewards: the pair terms the seed puts in the tree slave;
* ``rowcliques``: negative order-3 patterns on three consecutive tokens plus positive skip edges (their
  pairwise parts on chain edges).

``--tree-edges both`` adds the row ``dd2slave (cut edges)``: the chain-edge pair terms relaxed in the
cut instead of maximised by the chain slave (before/after the seed's placement); the "mean dual gap"
column is the best dual bound above the ILP optimum.

For each method: the fraction of groups certified optimal, the mean gap of its primal to the ILP's
optimum (0 = as good as exact), the mean iterations and the mean decode time per group; ratios of time
are to the chain (Viterbi) decode. "LP tight" counts the groups whose LP relaxation (the local polytope
with the pattern variables, which both dual decompositions can at best reach) is integral: a
decomposition can certify only those.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from crfhead import engine
from crfhead.data.datamodule import TaggingDataModule
from crfhead.data.sentence import Sentence
from crfhead.higher_order import METHODS, Pattern, decode
from crfhead.higher_order.dd2slave import dd2slave
from crfhead.higher_order.decode import PreparedGroup
from crfhead.higher_order.group import prepare
from crfhead.higher_order.ilp import solve_ilp

SuiteFn = Callable[[np.random.Generator, int, int, int, float], list[Pattern]]


def _pairs(rng: np.random.Generator, B: int, T: int, n: int) -> list[tuple[tuple[int, int], ...]]:
    out: list[tuple[tuple[int, int], ...]] = []
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


def chain(rng: np.random.Generator, B: int, T: int, K: int, strength: float) -> list[Pattern]:
    """Mixed-sign tables on consecutive tokens (chain edges) plus same-label skip rewards."""
    out = [
        Pattern(((b, t, k), (b, t + 1, j)), float(rng.normal() * strength))
        for b in range(B)
        for t in range(T - 1)
        if rng.random() < 0.3
        for k in range(K)
        for j in range(K)
    ]
    return out + potts(rng, B, T, K, strength / 2)[: B * K]


def rowcliques(rng: np.random.Generator, B: int, T: int, K: int, strength: float) -> list[Pattern]:
    """Negative order-3 patterns on consecutive tokens plus positive skip edges."""
    out = [
        Pattern(
            tuple((b, t + i, int(rng.integers(K))) for i in range(3)),
            -float(rng.gamma(2.0, strength)),
        )
        for b in range(B)
        for t in range(T - 2)
        if rng.random() < 0.5
    ]
    return out + potts(rng, B, T, K, strength)[: B * K]


SUITES: dict[str, SuiteFn] = {
    "potts": potts,
    "cliques": cliques,
    "mixed": mixed,
    "chain": chain,
    "rowcliques": rowcliques,
}


def _synthetic(args: argparse.Namespace) -> None:
    B, T, K = (int(x) for x in args.size.split(","))
    print(
        f"# higher-order decoders, groups of (B, T, K) = ({B}, {T}, {K}), {args.groups} per suite"
    )
    print()
    print(
        "| suite | LP tight | method | certified | mean gap to ILP | mean dual gap "
        "| mean iterations | ms / group | time / chain's |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for name in args.suites:
        rows: dict[str, list[tuple[bool, float, float, int, float]]] = {}
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
            methods = list(args.methods)
            if args.tree_edges == "both" and "dd2slave" in methods:
                methods.append("dd2slave (cut edges)")
            for method in methods:
                began = time.perf_counter()
                if method == "dd2slave (cut edges)":
                    cut = prepare(em, tr, None, None, None, patterns)
                    r = dd2slave(cut, args.max_iterations, tree_edges=False)
                else:
                    r = decode(
                        em, tr, patterns=patterns, method=method, max_iterations=args.max_iterations
                    )
                ms = (time.perf_counter() - began) * 1e3
                rows.setdefault(method, []).append(
                    (r.certified, exact - r.primal, r.dual - exact, r.iterations, ms)
                )
        chain_ms = statistics.mean(x[4] for x in rows["viterbi"]) if "viterbi" in rows else None
        for method, got in rows.items():
            ms = statistics.mean(x[4] for x in got)
            ratio = f"{ms / chain_ms:.1f}" if chain_ms else "—"
            print(
                f"| {name} | {tight}/{args.groups} | {method} | {sum(x[0] for x in got)}/{len(got)} "
                f"| {statistics.mean(x[1] for x in got):.4f} "
                f"| {statistics.mean(x[2] for x in got):.4f} "
                f"| {statistics.mean(x[3] for x in got):.1f} | {ms:.1f} | {ratio} |"
            )


def _trained(args: argparse.Namespace) -> None:
    from crfhead.higher_order.corpus_setup import GRIDS, corpus_of_class
    from crfhead.higher_order.evaluation import group_problems
    from crfhead.training.module import TaggerModule

    spec = yaml.safe_load(args.config.read_text())
    corpus = args.corpus or corpus_of_class(spec["data"]["corpus"]["class_path"])
    model = TaggerModule.load_from_checkpoint(args.checkpoint, map_location="cpu").eval()
    sentences = _split(spec, args.split)
    problems = [
        (rows, pot, patterns)
        for rows, pot, patterns in group_problems(
            model, sentences, corpus, threshold=args.threshold
        )
        if patterns
    ][: args.max_groups]
    weight = args.weight
    below = [w for w in GRIDS[corpus] if 0.0 < w < weight]
    methods = list(args.methods)
    names = [m for m in methods if m != "dd2slave"]
    if "dd2slave" in methods:
        names[1:1] = ["dd2slave", "dd2slave (grid)", "dd2slave [scipy]"]
    best: dict[str, list[float]] = {name: [] for name in names}
    certified: dict[str, int] = dict.fromkeys(names, 0)
    iterations: dict[str, int] = dict.fromkeys(names, 0)
    for _, pot, unit in problems:
        patterns = [Pattern(p.cells, p.score * weight) for p in unit]
        args5 = pot.chain
        for name in names:
            times = []
            for _ in range(args.repeats):
                if name == "viterbi":
                    began = time.perf_counter()
                    engine.viterbi(pot)
                    times.append(time.perf_counter() - began)
                    r = None
                elif name == "dd2slave (grid)":
                    prepared = PreparedGroup(*args5, unit)
                    for w in below:
                        prepared.decode(w, max_iterations=args.max_iterations)
                    began = time.perf_counter()
                    r = prepared.decode(weight, max_iterations=args.max_iterations)
                    times.append(time.perf_counter() - began)
                else:
                    method, maxflow = (
                        ("dd2slave", "scipy") if name == "dd2slave [scipy]" else (name, "auto")
                    )
                    began = time.perf_counter()
                    r = decode(
                        *args5,
                        patterns,
                        method=method,
                        max_iterations=args.max_iterations,
                        maxflow=maxflow,
                    )
                    times.append(time.perf_counter() - began)
            best[name].append(min(times))
            if r is not None:
                certified[name] += bool(r.certified)
                iterations[name] += r.iterations
    n = len(problems)
    sizes = [int(pot.mask.sum()) for _, pot, _ in problems]
    counts = [len(u) for _, _, u in problems]
    print(
        f"# {corpus} {args.split}: {n} groups with patterns, weight {weight:g} "
        f"(tokens per group {statistics.mean(sizes):.0f}, patterns {statistics.mean(counts):.0f}; "
        f"best of {args.repeats} per group)"
    )
    print()
    print("| decoder | ms / group | x Viterbi | HiGHS / this | certified | mean iterations |")
    print("|---|---:|---:|---:|---:|---:|")
    mean = {name: 1e3 * statistics.mean(times) for name, times in best.items()}
    for name in names:
        vit = f"{mean[name] / mean['viterbi']:.1f}" if "viterbi" in mean else "—"
        ilp = f"{mean['ilp'] / mean[name]:.1f}" if "ilp" in mean else "—"
        cert = "—" if name == "viterbi" else f"{certified[name]}/{n}"
        its = "—" if name == "viterbi" else f"{iterations[name] / n:.1f}"
        print(f"| {name} | {mean[name]:.2f} | {vit} | {ilp} | {cert} | {its} |")


def _split(spec: dict[str, Any], split: str) -> list[Sentence]:
    """The config's ``split`` sentences (its data section, without its batching and grouping)."""
    data: dict[str, Any] = dict(spec["data"])
    corpus = data.pop("corpus")
    data.pop("grouping", None)
    module, name = corpus["class_path"].rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    datamodule = TaggingDataModule(corpus=cls(**corpus.get("init_args", {})), **data)
    return list(datamodule.splits[split])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", nargs="+", choices=sorted(SUITES), default=sorted(SUITES))
    parser.add_argument("--groups", type=int, default=20, help="groups per suite")
    parser.add_argument("--size", default="6,12,5", help="B,T,K of a group")
    parser.add_argument("--strength", type=float, default=1.0, help="pattern score scale")
    parser.add_argument("--max-iterations", type=int, default=300)
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--tree-edges", choices=("on", "both"), default="on")
    parser.add_argument("--checkpoint", type=Path, default=None, help="trained mode")
    parser.add_argument("--config", type=Path, default=None, help="the checkpoint's config")
    parser.add_argument("--corpus", default=None, help="default: the config's")
    parser.add_argument("--weight", type=float, default=1.0, help="the factors' weight")
    parser.add_argument("--split", default="test")
    parser.add_argument("--threshold", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-groups", type=int, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.checkpoint is not None:
        if args.config is None:
            parser.error("--checkpoint needs --config")
        _trained(args)
    else:
        _synthetic(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
