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

``--floor`` adds, for this checkout, what any call through torch's autograd costs at each size: the
loss's dispatcher op called directly (``torch.ops.crfhead.fused_nll`` on the layer's tensors, then
``backward`` of the summed losses: no layer, no validation, no op table) and the backward of a
one-node graph (``x.sum()`` of a ``(B,)`` leaf), interleaved with the layer and the kernel.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any

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
    return _interleaved(fns, rounds, calls)


def measure_floor(B: int, T: int, K: int, rounds: int, calls: int) -> dict[str, float]:
    """Median microseconds of the layer's loss, the kernel's, the bare op's and autograd's least."""
    from bench.anchors import crfhead_adapter, crfhead_kernel_adapter
    from bench.cases import Case, make_inputs

    from crfhead.engine.backends.cpu import dispatcher

    if dispatcher.ops() is None:
        raise SystemExit(f"--floor needs the dispatcher ops: {dispatcher.status()[1]}")
    inputs = make_inputs(Case(B, T, K, variable=False), torch.device("cpu"))
    layer, kernel = crfhead_adapter(inputs).calls, crfhead_kernel_adapter(inputs).calls
    em = inputs.emissions.clone().requires_grad_(True)
    scores = [
        inputs.params[k].clone().requires_grad_(True)
        for k in ("transitions", "start_transitions", "end_transitions")
    ]
    mask, tags = inputs.mask, torch.where(inputs.mask, inputs.tags, 0).long()
    leaves = [em, *scores]
    x = torch.randn(B, requires_grad=True)

    def op() -> None:
        for leaf in leaves:
            leaf.grad = None
        torch.autograd.backward(torch.ops.crfhead.fused_nll(em, *scores, mask, tags)[0].sum())

    def least() -> None:
        x.grad = None
        torch.autograd.backward(x.sum())

    fns = {"loss": layer["loss"], "kernel loss": kernel["loss"], "op": op, "autograd": least}
    return _interleaved(fns, rounds, calls)


def _interleaved(fns: dict[str, Any], rounds: int, calls: int) -> dict[str, float]:
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
    parser.add_argument(
        "--floor", action="store_true", help="also the bare op and autograd's least"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child's single size
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.one and args.floor:
        B, T, K = (int(x) for x in args.one.split(","))
        m = measure_floor(B, T, K, args.rounds, args.calls)
        print(" ".join(f"{v:.3f}" for v in m.values()))
        return
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
    if args.floor:
        print()
        print(
            "| B,T,K | layer loss us | kernel us | bare op us | op / kernel | autograd's least us |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for size in args.sizes:
            env = {**os.environ, "PYTHONPATH": here, "OMP_NUM_THREADS": str(args.threads)}
            out = subprocess.run(
                [sys.executable, __file__, "--one", size, "--floor", "--rounds", str(args.rounds),
                 "--calls", str(args.calls), "--threads", str(args.threads)],
                env=env, cwd=here, capture_output=True, text=True, check=True,
            ).stdout.split()  # fmt: skip
            layer, kernel, op, least = map(float, out)
            print(
                f"| {size} | {layer:.1f} | {kernel:.1f} | {op:.1f} | {op / kernel:.2f} | "
                f"{least:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
