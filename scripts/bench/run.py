"""One case run end to end: every (library, op) cell measured, then the agreement checked.

Progress and problems go to stderr as they happen; a cell that raises (e.g. out of memory) is
recorded as an error and the run carries on; a cell whose predicted peak memory is over
``--max-gib`` is not run (a process killed for memory would end the whole run).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import torch

from bench.agreement import Agreement, check_agreement
from bench.anchors import ADAPTERS, LIBS, OPS, torchcrf_float64
from bench.cases import Case, make_inputs
from bench.reference import chain_float64
from bench.timing import Measurement, Timing, measure

Results = dict[tuple[str, str], Measurement]
"""The measurements of one case, by ``(library, op)``."""


def run_case(
    case: Case,
    device: torch.device,
    libs: tuple[str, ...],
    timing: Timing,
    ops: tuple[str, ...] = OPS,
) -> tuple[Results, Agreement]:
    """Measure every (library, op) of ``case`` for the ``libs`` and ``ops`` chosen, in table order."""
    inp = make_inputs(case, device)
    adapters = {lib: ADAPTERS[lib](inp) for lib in LIBS if lib in libs}
    results: Results = {}
    outputs: dict[str, dict[str, Any]] = {lib: {} for lib in adapters}
    for op in (op for op in OPS if op in ops):
        for lib in LIBS:
            if lib not in adapters:
                results[lib, op] = Measurement(skipped=True)
                continue
            fn = adapters[lib].op(op)
            if fn is None:
                results[lib, op] = Measurement(unsupported=True)
                continue
            gib = adapters[lib].peak_gib.get(op, 0.0)
            if gib > timing.max_gib:
                why = f"predicted peak memory {gib:.0f} GiB > {timing.max_gib:g} GiB (--max-gib)"
                results[lib, op] = Measurement(refused=why)
                print(f"  {case.label:28s} {op:14s} {lib:16s} not run: {why}", file=sys.stderr)
                continue
            t0 = time.perf_counter()
            try:
                m, out = measure(fn, device, timing)
                outputs[lib].update(out)
                del out
            except Exception as exc:  # report and carry on (e.g. out of memory)
                m = Measurement(error=f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
                print(f"!!! ERROR {case.label} {lib} {op}: {m.error}", file=sys.stderr)
            results[lib, op] = m
            note = " (single call)" if m.single else " (capped)" if m.capped else ""
            ms = "error" if m.ms is None else f"{m.ms:.2f} ms x{m.repeats}{note}"
            print(
                f"  {case.label:28s} {op:14s} {lib:16s} {ms}  [{time.perf_counter() - t0:.1f} s]",
                file=sys.stderr,
                flush=True,
            )
    extra = {lib: adapter.extra for lib, adapter in adapters.items()}
    agr = check_agreement(
        outputs,
        extra,
        lambda: {**torchcrf_float64(inp), **chain_float64(inp)},
        inp.mask,
        case.K,
    )
    for problem in agr.problems:
        print(f"!!! DISAGREEMENT {case.label}: {problem}", file=sys.stderr, flush=True)
    return results, agr
