"""The benchmark's report: a header on the run and the machine, then text or markdown tables.

One table per op (times, ratios, peak memory) and one of the agreement. Ratios are
``anchor_time / crfhead_time``: above 1 means crfhead is faster. Cell marks: ``*`` capped (fewer
timed calls), ``**`` a single call, ``†`` other processes used more than :data:`CONTENDED_CORES`
cores while it ran, ``—`` the library has no such op or the agreement check did not run, "too big"
not run (predicted memory over ``--max-gib``).
"""

from __future__ import annotations

import datetime
import os
import platform
from dataclasses import dataclass

import torch

from bench.adapter import K_BEST, NUM_SAMPLES
from bench.agreement import CHECKS, Agreement
from bench.anchors import LIBS, OPS
from bench.cases import Case
from bench.machine import CpuClock, cpu_model, git_revision, version
from bench.run import Results
from bench.timing import CAPPED_REPEATS, Measurement, Timing

CONTENDED_CORES = 0.25  # cells during which other processes used more CPU than this are marked †
RATIOS = ("pytorch-crf", "torch-struct", "crfhead-portable")
"""The libraries whose time is divided by crfhead's, in column order."""
TITLES = {
    "loss": "loss: NLL forward + backward (grads of emissions and CRF parameters)",
    "decode": "decode: Viterbi paths",
    "marginals": "marginals: node marginals (pytorch-crf has none)",
    "edge_marginals": "edge_marginals: edge marginals (B, T-1, K, K) (pytorch-crf has none)",
    "entropy": "entropy: entropy of p(z | x) (pytorch-crf has none)",
    "topk": f"topk: the {K_BEST} best paths and their scores (pytorch-crf has none)",
    "sample": f"sample: {NUM_SAMPLES} sampled paths per chain (pytorch-crf has none)",
    "max_marginals": "max_marginals: max-marginals (crfhead only: neither anchor has them)",
}


@dataclass(frozen=True)
class Settings:
    """What the report's header says about the run."""

    device: torch.device
    backend: str  # the backend crfhead resolved for the 'crfhead' columns
    timing: Timing
    load_at_start: float | None  # 1-minute load average before the run
    clock: CpuClock  # started with the run: the CPU time other processes used during it


def contention(clock: CpuClock, elapsed_s: float) -> str:
    """CPU time other processes used during the run: the busy time of the machine minus ours."""
    others = clock.others_cpu_s()
    if others is None:
        return "n/a"
    return f"{others:.0f} CPU-s (on average {others / max(elapsed_s, 1e-9):.2f} cores)"


def header_lines(settings: Settings, elapsed_s: float) -> list[str]:
    device, timing = settings.device, settings.timing
    dev = f"cpu ({cpu_model()})"
    if device.type == "cuda":
        dev = f"cuda ({torch.cuda.get_device_name(device)})"
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    load = "n/a" if settings.load_at_start is None else f"{settings.load_at_start:.2f}"
    return [
        f"date: {now}",
        f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs, "
        f"torch threads {torch.get_num_threads()}",
        f"other processes: 1-min load average {load} before the run; during the run they used "
        f"{contention(settings.clock, elapsed_s)} (timings are only trustworthy near 0)",
        f"device: {dev}; crfhead backend: {settings.backend} ('crfhead' columns), portable "
        "('crfhead-portable')",
        f"python {platform.python_version()}, torch {torch.__version__}, "
        f"crfhead {version('crfhead')} ({git_revision()}), pytorch-crf {version('pytorch-crf')}, "
        f"torch-struct {version('torch-struct')}",
        f"float32; median of {timing.repeats} timed calls after {timing.warmup} warm-up calls "
        f"({CAPPED_REPEATS} calls, marked *, when a warm-up call exceeds {timing.cap_s:g} s; "
        f"the first call alone, marked ** and without memory, when it exceeds "
        f"{timing.single_s:g} s); "
        "ratio = anchor ms / crfhead ms (> 1: crfhead faster); crfhead / kernel = the eager "
        "call's time over its fused kernel's native entry points alone (preallocated, no "
        "validation or autograd); "
        "MiB = peak extra memory of one call",
        f"† = other processes used more than {CONTENDED_CORES:g} cores on average while the cell "
        "ran: its time is not trustworthy",
    ]


# --------------------------------------------------------------------------- cells
def contended(m: Measurement) -> bool:
    return m.others_cores is not None and m.others_cores > CONTENDED_CORES


def fmt_ms(m: Measurement) -> str:
    if m.skipped:
        return "skipped"
    if m.unsupported:
        return "—"
    if m.refused:
        return "too big"
    if m.ms is None:
        return "error"
    mark = "**" if m.single else "*" if m.capped else ""
    return f"{m.ms:.2f}{mark}{'†' if contended(m) else ''}"


def fmt_ratio(anchor: Measurement, ours: Measurement) -> str:
    if anchor.ms is None or ours.ms is None or ours.ms <= 0:
        return fmt_ms(anchor) if anchor.ms is None else "—"
    return f"{anchor.ms / ours.ms:.2f}{'†' if contended(anchor) or contended(ours) else ''}"


def fmt_mib(m: Measurement) -> str:
    if m.ms is None:
        return fmt_ms(m)
    return "n/a" if m.mib is None else f"{m.mib:.1f}"


def fmt_agreement(value: float | str | None) -> str:
    if value is None:
        return "—"
    return value if isinstance(value, str) else f"{value:.1e}"


# --------------------------------------------------------------------------- tables
Table = tuple[list[str], list[list[str]]]
CASE_HEAD = ["B", "T", "K", "lengths"]


def case_cells(case: Case) -> list[str]:
    return [str(case.B), str(case.T), str(case.K), case.lengths_name]


def op_table(op: str, cases: list[Case], results: list[Results]) -> Table:
    head = [*CASE_HEAD]
    head += [f"{lib} ms" for lib in LIBS]
    head += [f"{a} / crfhead" for a in RATIOS]
    head += ["crfhead / kernel"]
    head += [f"{lib} MiB" for lib in LIBS]
    rows = []
    for case, res in zip(cases, results, strict=True):
        row = case_cells(case)
        row += [fmt_ms(res[lib, op]) for lib in LIBS]
        row += [fmt_ratio(res[a, op], res["crfhead", op]) for a in RATIOS]
        row += [fmt_ratio(res["crfhead", op], res["crfhead-kernel", op])]
        row += [fmt_mib(res[lib, op]) for lib in LIBS]
        rows.append(row)
    return head, rows


def agreement_table(
    cases: list[Case], agreements: list[Agreement], ops: tuple[str, ...] = OPS
) -> Table:
    checks = [c for c in CHECKS if c.op in ops]
    head = [*CASE_HEAD, *(c.column for c in checks), "status"]
    rows = [
        [
            *case_cells(case),
            *(fmt_agreement(a.values.get(c.column)) for c in checks),
            "**DISAGREE**" if a.problems else "ok",
        ]
        for case, a in zip(cases, agreements, strict=True)
    ]
    return head, rows


def render(head: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" for _ in head) + "|"]
        return lines + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    return lines + ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]


def report(
    settings: Settings,
    cases: list[Case],
    results: list[Results],
    agreements: list[Agreement],
    elapsed_s: float,
    markdown: bool,
    ops: tuple[str, ...] = OPS,
) -> str:
    """The whole report: header, one table per op of ``ops`` (in :data:`OPS` order), agreement."""
    md = markdown
    lines = ["# crfhead CRF vs pytorch-crf vs torch-struct", ""] if md else []
    lines += [f"- {h}" if md else h for h in header_lines(settings, elapsed_s)]
    for op in (op for op in OPS if op in ops):
        lines += ["", f"## {TITLES[op]}" if md else f"== {TITLES[op]}", ""]
        lines += render(*op_table(op, cases, results), md)
    lines += [
        "",
        "## agreement (max errors; paths: identical / total)" if md else "== agreement",
        "",
    ]
    lines += render(*agreement_table(cases, agreements, ops), md)
    problems = [(c, p) for c, a in zip(cases, agreements, strict=True) for p in a.problems]
    errors = [
        (c, lib, op, m.error)
        for c, res in zip(cases, results, strict=True)
        for (lib, op), m in res.items()
        if m.error
    ]
    if problems or errors:
        lines += [""]
        lines += [f"- **DISAGREEMENT** {c.label}: {p}" for c, p in problems]
        lines += [f"- **ERROR** {c.label} {lib} {op}: {e}" for c, lib, op, e in errors]
    else:
        lines += ["", "All libraries agree on every case."]
    refused = [
        f"- not run: {c.label} {lib} {op}: {m.refused}"
        for c, res in zip(cases, results, strict=True)
        for (lib, op), m in res.items()
        if m.refused
    ]
    if refused:
        lines += ["", *refused]
    lines += ["", f"Total run time: {elapsed_s:.0f} s."]
    return "\n".join(lines)
