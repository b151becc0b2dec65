"""The eager call against its kernel: ``CRF`` loss (forward + backward) and decode over the kernel's entry points.

    .venv/bin/python scripts/bench_eager.py [--sizes 32,50,9 8,1024,9] [--rounds 15] [--calls 100]
                                            [--against /path/to/other/checkout]

The ``crfhead`` and ``crfhead-kernel`` columns of ``bench_chain.py`` (its data and calls) on one
thread (``--threads``), interleaved so that a noisy machine moves both sides alike: each round times ``--calls`` calls of each of the four (the layer's
loss, the kernel's ``nll_grad`` + ``scale_grads`` on preallocated outputs, the layer's decode, the
kernel's ``viterbi``) and keeps their medians; the table gives the median over rounds and the ratio
``layer / kernel`` (the issue's goal: loss within 1.5x, decode within 1.3x). ``--against`` runs the
same measurement on another checkout of crfhead (``git worktree add /tmp/old REV``) in the same
process order, one size after the other, so two versions are compared on one machine state.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch


def measure(B: int, T: int, K: int, rounds: int, calls: int) -> dict[str, float]:
    """Median microseconds per call of each of the four, over ``rounds`` interleaved rounds.

    The calls are ``bench_chain.py``'s ``crfhead`` and ``crfhead-kernel`` columns on its data for
    the size (full lengths).
    """
    from bench.anchors import crfhead_adapter, crfhead_kernel_adapter
    from bench.cases import Case, make_inputs

    inputs = make_inputs(Case(B, T, K, variable=False), torch.device("cpu"))
    layer, kernel = crfhead_adapter(inputs).calls, crfhead_kernel_adapter(inputs).calls
    fns = {
        "loss": layer["loss"],
        "kernel loss": kernel["loss"],
        "decode": layer["decode"],
        "kernel decode": kernel["decode"],
    }
    for fn in fns.values():
        for _ in range(max(calls, 50)):
            fn()
    per_round: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times = []
            for _ in range(calls):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            per_round[name].append(statistics.median(times) * 1e6)
    return {name: statistics.median(v) for name, v in per_round.items()}


def line(size: str, m: dict[str, float], label: str) -> str:
    loss, decode = m["loss"] / m["kernel loss"], m["decode"] / m["kernel decode"]
    return (
        f"| {label} | {size} | {m['loss']:.1f} | {m['kernel loss']:.1f} | {loss:.2f} | "
        f"{m['decode']:.1f} | {m['kernel decode']:.1f} | {decode:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["32,50,9", "64,128,17", "8,1024,9"])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the kernel's too)")
    parser.add_argument("--against", help="another crfhead checkout, measured alternately")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child's single size
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.one:
        B, T, K = (int(x) for x in args.one.split(","))
        m = measure(B, T, K, args.rounds, args.calls)
        print(" ".join(f"{v:.3f}" for v in m.values()))
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sides = [("this checkout", here)] + ([("against", args.against)] if args.against else [])
    print(
        "| code | B,T,K | loss us | kernel us | loss / kernel | decode us | kernel us | "
        "decode / kernel |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    keys = ("loss", "kernel loss", "decode", "kernel decode")
    for size in args.sizes:
        for label, root in sides:
            env = {**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": str(args.threads)}
            out = subprocess.run(
                [sys.executable, __file__, "--one", size, "--rounds", str(args.rounds),
                 "--calls", str(args.calls), "--threads", str(args.threads)],
                env=env, cwd=root, capture_output=True, text=True, check=True,
            ).stdout.split()  # fmt: skip
            print(line(size, dict(zip(keys, map(float, out), strict=True)), label), flush=True)


if __name__ == "__main__":
    main()
