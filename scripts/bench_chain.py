"""Benchmark crfhead's linear-chain CRF against pytorch-crf and torch-struct, side by side.

For each size ``(B, T, K)``, with full lengths and with variable lengths (the same data for every
library), it times the ops of every library that has them and records their peak extra memory
(``--ops`` chooses some; default all):

* ``loss``: forward + backward of the summed negative log-likelihood;
* ``decode``: Viterbi paths;
* ``marginals``: node marginals ``p(z_t = k | x)``;
* ``edge_marginals``: edge marginals ``(B, T-1, K, K)``;
* ``entropy``: the entropy of ``p(z | x)``;
* ``topk``: the 5 best paths and their scores;
* ``sample``: 10 sampled paths per chain (checked for validity only: random);
* ``max_marginals``: max-marginals, crfhead only (crfhead-portable is its comparison).

pytorch-crf has only ``loss`` and ``decode`` ("—" in its column elsewhere); torch-struct has every
op but ``max_marginals``.

The pieces live in ``scripts/bench/``: the ops and what an adapter is (``adapter.py``), what each
library's calls are (``anchors.py``, torch-struct's in ``struct_anchor.py``), how a call is timed
and its memory measured (``timing.py``), how the libraries' outputs are compared (``agreement.py``,
with float64 arbiters in ``reference.py``), how other processes' CPU use is measured
(``machine.py``) and the tables (``report.py``); this file is the command line.

Timing: float32, ``torch.set_num_threads`` left at the default, ``--warmup`` (default 2) warm-up
calls, then the median of ``--repeats`` (default 10) timed calls; a first warm-up call slower than
``--cap-s`` (default 3 s) leaves 3 timed calls, marked ``*``; one slower than ``--single-s``
(default 10 s) is the cell's only call, marked ``**`` (no memory measured). A cell predicted to
need more than ``--max-gib`` (default 8 GiB) is not run ("too big": torch-struct's ``topk`` at
``K = 64`` would need about 60 GiB). The default run takes about 25 minutes on 2 idle cores
(about 10 with ``--ops loss decode marginals``), most of the rest in torch-struct's ``topk`` and
``sample`` (seconds to a minute a call); on a busy machine, much longer.

Run it on an otherwise idle machine: the report prints the load average before the run and the
CPU time other processes used during it, and marks with ``†`` every cell during which other
processes used more than a quarter of a core. Any disagreement between the libraries is printed
loudly to stderr and listed in the report; the exit status is then 1, else 0.

Ratios are ``anchor_time / crfhead_time``: above 1 means crfhead is faster.

``--contention N`` runs the contention scenario instead (``bench/contention.py``): crfhead and
pytorch-crf timed idle and while ``N`` background processes multiply matrices with
``--contention-threads`` (default 2) torch threads each, with default and with one thread, loaded
times given as multiples of the idle single-thread time. ``--contention-libs crfhead`` times
crfhead alone (under 2 minutes for the default sizes' full lengths); pytorch-crf's calls with
default threads can take seconds each on a busy machine, so run its sizes one at a time there,
with ``--cap-s 1``.

Run (progress goes to stderr, the report to stdout)::

    pip install --no-deps torch-struct==0.5   # pytorch-crf==0.7.2 comes with the dev extras
    python scripts/bench_chain.py --markdown > bench.md
    python scripts/bench_chain.py --sizes 32,50,9 16,512,17 --repeats 20 --skip-struct
    python scripts/bench_chain.py --ops loss decode marginals --markdown
    python scripts/bench_chain.py --ops edge_marginals entropy topk --sizes 32,50,9 --repeats 5
    python scripts/bench_chain.py --device cuda --markdown
    python scripts/bench_chain.py --contention 2 --lengths full --markdown
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
import time

import torch

# ``bench`` is the folder next to this file, which Python puts first on ``sys.path``.
from bench import anchors
from bench.adapter import OPS
from bench.agreement import Agreement
from bench.cases import Case
from bench.contention import LIBS as CONTENTION_LIBS
from bench.contention import contention_table, header, run_contention
from bench.engine import resolve
from bench.machine import CpuClock, load_average
from bench.report import Settings, render, report
from bench.run import Results, run_case
from bench.timing import Timing

DEFAULT_SIZES = [(32, 50, 9), (64, 128, 17), (16, 512, 17), (32, 50, 64), (8, 1024, 9)]


def parse_size(text: str) -> tuple[int, int, int]:
    """``"B,T,K"`` -> ``(B, T, K)`` (an argparse ``type``)."""
    try:
        B, T, K = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"size must be B,T,K (e.g. 32,50,9), got {text!r}"
        ) from None
    if min(B, K) < 1 or T < 2:
        raise argparse.ArgumentTypeError(f"need B, K >= 1 and T >= 2, got {text!r}")
    return B, T, K


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark crfhead's CRF against pytorch-crf and torch-struct."
    )
    parser.add_argument(
        "--sizes", nargs="+", type=parse_size, default=DEFAULT_SIZES, metavar="B,T,K"
    )
    parser.add_argument("--lengths", choices=["full", "var", "both"], default="both")
    parser.add_argument(
        "--ops", nargs="+", choices=OPS, default=list(OPS), help="the ops timed (default: all)"
    )
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per cell (median)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed warm-up calls per cell")
    parser.add_argument("--cap-s", type=float, default=3.0, help="slow warm-up: only 3 timed calls")
    parser.add_argument(
        "--single-s",
        type=float,
        default=10.0,
        help="a first call slower than this is the only call of its cell",
    )
    parser.add_argument(
        "--max-gib",
        type=float,
        default=8.0,
        help="cells predicted to need more memory than this are not run",
    )
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--skip-struct", action="store_true", help="leave torch-struct out")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory calls")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    parser.add_argument(
        "--backend",
        default="auto",
        help="crfhead's backend for the 'crfhead' column (auto, cpu, ...)",
    )
    parser.add_argument(
        "--contention",
        type=int,
        default=0,
        metavar="N",
        help="time crfhead and pytorch-crf idle and beside N busy background processes",
    )
    parser.add_argument(
        "--contention-threads", type=int, default=2, help="torch threads per background process"
    )
    parser.add_argument(
        "--contention-libs",
        nargs="+",
        choices=CONTENTION_LIBS,
        default=list(CONTENTION_LIBS),
        help="the libraries timed with --contention",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.warmup < 1:
        parser.error("--repeats and --warmup must be >= 1")
    if args.contention < 0 or args.contention_threads < 1:
        parser.error("--contention must be >= 0 and --contention-threads >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available")
    device = torch.device(args.device)
    os.environ["CRFHEAD_BACKEND"] = args.backend
    backend = resolve(device, args.backend)
    libs: tuple[str, ...] = anchors.LIBS
    if args.skip_struct:
        libs = tuple(lib for lib in libs if lib != "torch-struct")
    elif not anchors.HAS_TORCH_STRUCT:
        parser.error(
            "torch-struct is missing: pip install --no-deps torch-struct==0.5 or --skip-struct"
        )
    regimes = {"full": [False], "var": [True], "both": [False, True]}[args.lengths]
    cases = [Case(B, T, K, v) for B, T, K in args.sizes for v in regimes]
    timing = Timing(
        args.warmup,
        args.repeats,
        args.cap_s,
        memory=not args.no_memory,
        single_s=args.single_s,
        max_gib=args.max_gib,
    )
    if args.contention:
        return contention_main(args, cases, device, timing)

    ops = tuple(op for op in OPS if op in args.ops)
    settings = Settings(device, backend, timing, load_average(), CpuClock.start())
    started = time.perf_counter()
    results: list[Results] = []
    agreements: list[Agreement] = []
    for i, case in enumerate(cases):
        print(f"[{i + 1}/{len(cases)}] {case.label}", file=sys.stderr, flush=True)
        res, agr = run_case(case, device, libs, timing, ops)
        results.append(res)
        agreements.append(agr)
        gc.collect()
    elapsed = time.perf_counter() - started
    print(report(settings, cases, results, agreements, elapsed, args.markdown, ops))
    print(f"done in {elapsed:.0f} s", file=sys.stderr)
    return 1 if any(a.problems for a in agreements) else 0


def contention_main(
    args: argparse.Namespace, cases: list[Case], device: torch.device, timing: Timing
) -> int:
    """``--contention N``: the contention table (see ``bench/contention.py``).

    A ``SIGTERM`` (e.g. from ``timeout``) exits through Python, so the background processes are
    stopped on the way out.
    """
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.perf_counter()
    libs = tuple(lib for lib in CONTENTION_LIBS if lib in args.contention_libs)
    rows, phases = run_contention(
        cases, device, timing, args.contention, args.contention_threads, libs
    )
    lines = header(phases, args.contention, args.contention_threads, timing)
    lines = [f"- {line}" if args.markdown else line for line in lines]
    print("\n".join([*lines, "", *render(*contention_table(rows), args.markdown)]))
    print(f"done in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
