"""The seed's two simulated-world tables: learning curves (HMM vs CRFs vs Bayes) and MEMM ceilings.

Prints, as markdown, the test token accuracy of the HMM, the indicator CRF, the ±1-word CRF and the
Bayes tagger (posterior and Viterbi) at each training size in both worlds, the same rows in conditional
log-loss (nats per token), and the MEMMs (two words to the left, lookahead 0 or 1) against Corollary
2's lagged Bayes ceiling; see :mod:`crfhead.theory.experiments`.

    python scripts/worlds_tables.py [--quick] [--seed 0] [--out runs/worlds_tables.json]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import torch

from crfhead.theory.experiments import (
    format_learning_curves,
    format_memm_ceilings,
    learning_curves,
    memm_ceilings,
)
from crfhead.theory.worlds import next_state_world, well_specified_world


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n in {10, 100}, 500 test sequences")
    parser.add_argument("--seed", type=int, default=0, help="seeds the train/validation/test draws")
    parser.add_argument("--test-n", type=int, default=None, help="test sequences (default 2000)")
    parser.add_argument(
        "--memm-n", type=int, default=None, help="MEMM training size (default 1000)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--out", type=Path, default=None, help="write the rows here as JSON")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ns = (10, 100) if args.quick else (10, 30, 100, 300, 1000)
    test_n = args.test_n or (500 if args.quick else 2000)
    memm_n = args.memm_n or (300 if args.quick else 1000)

    command = shlex.join(["python", "scripts/worlds_tables.py", *sys.argv[1:]])
    print(f"<!-- {command} -->\n")
    start = time.perf_counter()
    worlds = (well_specified_world(), next_state_world())
    curves = [r for w in worlds for r in learning_curves(w, ns, test_n=test_n, seed=args.seed)]
    ceilings = [r for w in worlds for r in memm_ceilings(w, memm_n, test_n=test_n, seed=args.seed)]
    wall = time.perf_counter() - start

    print(f"Test token accuracy ({test_n} test sequences; learned taggers Viterbi-decoded):\n")
    print(format_learning_curves(curves, "acc"))
    print("\nConditional log-loss of the true test tags (nats per token):\n")
    print(format_learning_curves(curves, "loss"))
    print(f"\nMEMMs trained on {memm_n} sequences (two words to the left + lookahead):\n")
    print(format_memm_ceilings(ceilings))
    print(f"\nwall time {wall:.0f} s")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "command": command,
            "wall_s": round(wall, 1),
            "learning_curves": curves,
            "memm_ceilings": ceilings,
        }
        args.out.write_text(json.dumps(payload, indent=1) + "\n")


if __name__ == "__main__":
    main()
