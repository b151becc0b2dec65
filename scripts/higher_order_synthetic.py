"""The seed's Table 3 and Figures 2 and 4 on synthetic 2D-grid and 3-wise CRFs (Qian & Liu, TACL 2014).

    python scripts/higher_order_synthetic.py            # 100 instances a model, 16 x 16 grids (minutes)
    python scripts/higher_order_synthetic.py --quick    # 3 tiny instances a model (seconds)
    python scripts/higher_order_synthetic.py --table-noise 0.3 --tag noisy   # a frustrated variant

For each model (``grid2d``, ``threewise``; the generator is :mod:`crfhead.higher_order.synthetic`)
every instance is decoded by the rows alone (Viterbi), the exact ILP, and 2-slave and naive (per
pattern) dual decomposition at each iteration budget, one run per budget. Prints the markdown table
(the dual decompositions at ``--table-budget`` iterations, the seed's 200) and writes
``<model>[_<tag>].png`` (F, dual gap and certified fraction against decode time) and
``synthetic[_<tag>].json`` (every point) to ``--out-dir`` (``docs/higher_order/``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

from crfhead.higher_order.synthetic import (
    BUDGETS,
    MODELS,
    SyntheticSpec,
    anytime,
    instances,
    markdown_table,
    plot_anytime,
)

OUT = Path(__file__).resolve().parents[1] / "docs" / "higher_order"
QUICK = {"instances": 3, "size": "5,6,2", "blocks": 2, "budgets": "1,5,20", "table_budget": 20}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a seconds-long run: " + str(QUICK))
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS))
    parser.add_argument("--instances", type=int, default=100, help="instances per model")
    parser.add_argument("--size", default="16,16,2", help="B,T,K: rows, columns, labels")
    parser.add_argument("--blocks", type=int, default=10, help="planted rectangles per grid")
    parser.add_argument("--table-noise", type=float, default=0.0, help="N(0, s) on factor entries")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--table-budget", type=int, default=200, help="the table's DD budget")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--maxflow", default="auto", help="the 2-slave's min cut: auto, native, scipy, ortools"
    )
    parser.add_argument("--tag", default="", help="a suffix for the output files")
    parser.add_argument("--out-dir", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    B, T, K = (int(x) for x in args.size.split(","))
    budgets = sorted({int(x) for x in args.budgets.split(",")} | {args.table_budget})
    spec = SyntheticSpec(
        rows=B, columns=T, labels=K, blocks=args.blocks, table_noise=args.table_noise
    )
    torch.set_num_threads(1)
    suffix = f"_{args.tag}" if args.tag else ""
    comparisons = []
    began = time.perf_counter()
    for model in args.models:
        cases = instances(model, args.instances, spec, seed=args.seed)
        comparison = anytime(
            cases,
            model,
            budgets=budgets,
            progress=lambda line: print(line, file=sys.stderr),
            maxflow=args.maxflow,
        )
        comparisons.append(comparison)
        print(plot_anytime(comparison, args.out_dir / f"{model}{suffix}.png"), file=sys.stderr)
    elapsed = time.perf_counter() - began
    record = {
        "spec": dataclasses.asdict(spec),
        "instances": args.instances,
        "seed": args.seed,
        "maxflow": args.maxflow,
        "budgets": budgets,
        "seconds": elapsed,
        "comparisons": [dataclasses.asdict(c) for c in comparisons],
    }
    json_path = args.out_dir / f"synthetic{suffix}.json"
    json_path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(json_path, file=sys.stderr)
    print(
        f"# Synthetic 2D-grid and 3-wise CRFs: {args.instances} instances a model, "
        f"(B, T, K) = ({B}, {T}, {K}), table noise {args.table_noise}, max flow {args.maxflow}; "
        f"dual decompositions at {args.table_budget} iterations; {elapsed:.0f} s in all"
    )
    print()
    print(markdown_table(comparisons, args.table_budget))
    return 0


if __name__ == "__main__":
    sys.exit(main())
