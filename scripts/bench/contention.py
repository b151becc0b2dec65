"""The contention scenario (``bench_chain.py --contention N``): the same calls on a machine kept busy.

A user's machine runs other work beside the CRF: a second training job, DataLoader workers doing
tensor work. :class:`Load` starts ``N`` background processes that each multiply matrices with
``threads`` torch threads (default 2) until stopped; :func:`run_contention` times crfhead's and
pytorch-crf's calls of the three core ops (loss, decode, marginals: ``--ops`` does not apply here)
four ways per case:

* ``idle, 1 thread``: no background processes, ``torch.set_num_threads(1)``: the baseline;
* ``idle, default``: no background processes, torch's default thread count;
* ``loaded, default``: with the background processes, default threads (what a user gets);
* ``loaded, 1 thread``: with the background processes, one thread.

The phases run case by case (the background processes start after a case's idle phases and stop
after its loaded ones), so a case's four columns are measured minutes apart at most, whatever else
the machine does meanwhile. The table gives each time as a multiple of the idle single-thread time
and, for crfhead, pytorch-crf's time under the same load divided by crfhead's. Memory and the
agreement are not measured here (the plain run does that).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from types import TracebackType

import torch

from bench.adapter import CORE_OPS
from bench.anchors import ADAPTERS
from bench.cases import Case, make_inputs
from bench.machine import load_average
from bench.timing import Measurement, Timing, measure

LIBS = ("crfhead", "pytorch-crf")
"""The libraries timed under contention by default (torch-struct takes seconds a call at some
sizes); ``--contention-libs`` chooses among them."""
PHASES = ("idle, 1 thread", "idle, default", "loaded, default", "loaded, 1 thread")
BASELINE = PHASES[0]

LOADER = """
import os, torch
torch.set_num_threads({threads})
a = torch.randn({n}, {n})
b = torch.randn({n}, {n})
a @ b
print("ready", flush=True)
while os.getppid() == {parent}:
    a @ b
"""
"""One background process: matrix products of ``n x n`` floats, back to back, until killed (or until
its parent is gone, so a benchmark killed without cleanup leaves no load behind)."""


class Load:
    """``count`` background processes multiplying matrices with ``threads`` threads each.

    A context manager: entering starts them and returns once each has done its first product (so
    the load is on when timing starts); leaving kills them, also on an exception.
    """

    def __init__(self, count: int, threads: int = 2, size: int = 384) -> None:
        self.count, self.threads, self.size = count, threads, size
        self.procs: list[subprocess.Popen[str]] = []

    def __enter__(self) -> Load:
        code = LOADER.format(threads=self.threads, n=self.size, parent=os.getpid())
        for _ in range(self.count):
            self.procs.append(
                subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
            )
        for proc in self.procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                self.__exit__(None, None, None)
                raise RuntimeError("a background load process failed to start")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()
        self.procs = []


@dataclass(frozen=True)
class Row:
    """The measurements of one (case, library, op) in every phase, by phase name."""

    case: Case
    lib: str
    op: str
    cells: dict[str, Measurement]


@dataclass(frozen=True)
class Phase:
    """One phase's conditions, for the report's header."""

    name: str
    case: Case
    load_at_start: float | None


def _time_phase(
    name: str,
    case: Case,
    libs: tuple[str, ...],
    device: torch.device,
    timing: Timing,
    threads: int,
    cells: dict[tuple[Case, str, str], dict[str, Measurement]],
) -> None:
    """Time every (library, op) of ``case`` with ``threads`` torch threads as phase ``name``."""
    torch.set_num_threads(threads)
    inp = make_inputs(case, device)
    for lib in libs:
        adapter = ADAPTERS[lib](inp)
        for op in CORE_OPS:
            fn = adapter.op(op)
            if fn is None:
                m = Measurement(unsupported=True)
            else:
                m, _ = measure(fn, device, timing)
            cells.setdefault((case, lib, op), {})[name] = m
            ms = "—" if m.ms is None else f"{m.ms:.2f} ms"
            print(f"  [{name}] {case.label:28s} {op:9s} {lib:12s} {ms}", file=sys.stderr)


def run_contention(
    cases: list[Case],
    device: torch.device,
    timing: Timing,
    count: int,
    load_threads: int,
    libs: tuple[str, ...] = LIBS,
) -> tuple[list[Row], list[Phase]]:
    """Every case and library of ``libs`` in the four :data:`PHASES`, beside ``count`` loaders of
    ``load_threads`` threads."""
    default = torch.get_num_threads()
    timing = dataclasses.replace(timing, memory=False)
    cells: dict[tuple[Case, str, str], dict[str, Measurement]] = {}
    phases = []
    threads = dict(zip(PHASES, (1, default, default, 1), strict=True))
    try:
        for case in cases:
            for name in PHASES[:2]:
                phases.append(Phase(name, case, load_average()))
                _time_phase(name, case, libs, device, timing, threads[name], cells)
            with Load(count, load_threads):
                time.sleep(1.0)  # let the scheduler settle with the new processes
                for name in PHASES[2:]:
                    phases.append(Phase(name, case, load_average()))
                    _time_phase(name, case, libs, device, timing, threads[name], cells)
    finally:
        torch.set_num_threads(default)
    rows = [
        Row(case, lib, op, cells[case, lib, op])
        for op in CORE_OPS
        for case in cases
        for lib in libs
    ]
    return rows, phases


def _ms(m: Measurement | None) -> str:
    if m is None or m.unsupported:
        return "—"
    return "error" if m.ms is None else f"{m.ms:.2f}"


def _times(m: Measurement | None, base: Measurement | None) -> str:
    """``m``'s time and, in parentheses, its multiple of ``base``'s."""
    if m is None or base is None or m.ms is None or base.ms is None or base.ms <= 0:
        return _ms(m)
    return f"{m.ms:.2f} ({m.ms / base.ms:.1f}x)"


def contention_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    """One line per (op, case, library): the four phases' ms, loaded ones as multiples of idle."""
    head = ["op", "B, T, K", "lengths", "library", *(f"{p} ms" for p in PHASES)]
    head.append("pytorch-crf / crfhead, loaded default")
    by_key = {(r.case, r.lib, r.op): r for r in rows}
    out = []
    for r in rows:
        base = r.cells.get(BASELINE)
        cells = [_ms(base)] + [_times(r.cells.get(p), base) for p in PHASES[1:]]
        ratio = "—"
        other = by_key.get((r.case, "pytorch-crf", r.op))
        ours, theirs = r.cells.get(PHASES[2]), other.cells.get(PHASES[2]) if other else None
        if r.lib == "crfhead" and ours and theirs and ours.ms and theirs.ms:
            ratio = f"{theirs.ms / ours.ms:.1f}x"
        size = f"{r.case.B}, {r.case.T}, {r.case.K}"
        out.append([r.op, size, r.case.lengths_name, r.lib, *cells, ratio])
    return head, out


def header(phases: list[Phase], count: int, load_threads: int, timing: Timing) -> list[str]:
    """The scenario's conditions: the background load and the load averages the phases began at."""
    lines = [
        f"contention: {count} background processes, each multiplying 384 x 384 float matrices "
        f"with {load_threads} torch threads, on {os.cpu_count()} logical CPUs",
        f"median of {timing.repeats} timed calls after {timing.warmup} warm-up calls; "
        "(n x) = multiple of the idle single-thread time",
    ]
    for idle in (True, False):
        loads = [
            p.load_at_start
            for p in phases
            if p.name.startswith("idle") == idle and p.load_at_start is not None
        ]
        if loads:
            what = "idle phases (other processes only)" if idle else "loaded phases"
            lines.append(
                f"1-min load average at the start of the {what}: {min(loads):.2f} to "
                f"{max(loads):.2f} (median {statistics.median(loads):.2f})"
            )
    return lines
