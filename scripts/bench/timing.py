"""Time and peak memory of one (case, library, op).

Timing: ``warmup`` untimed calls, then the median of ``repeats`` timed calls, ``time.perf_counter``
around each call (``torch.cuda.synchronize`` on CUDA). Time cap: if the first warm-up call takes
longer than ``cap_s`` (torch-struct at K=64 materialises ``(B, T/2, K, K, K)`` tensors and takes
seconds a call), the other warm-up calls are skipped (except the memory-profiled one) and only
:data:`CAPPED_REPEATS` timed calls are made; such cells are marked ``*``. If it takes longer than
``single_s`` (torch-struct's top-k takes 20-70 s a call at ``(64, 128, 17)``), that first call is
the measurement: no other call, no memory profile; such cells are marked ``**`` (the time then
includes one-off costs such as first-touch page faults, a small part of a call that long).

Peak memory (MiB): the peak *extra* memory of one untimed call. On CPU, the second warm-up call
runs under ``torch.profiler.profile(profile_memory=True)``; every allocation and free of PyTorch's
CPU allocator is then a ``[memory]`` event with a signed byte count, and the peak is the maximum
running sum of those events in time order (so it counts intermediate tensors, saved activations,
outputs and ``.grad`` tensors, but not Python objects such as pytorch-crf's lists of paths, nor
memory the C library keeps after a free; RSS-based measures are too coarse: ``ru_maxrss`` only
ever grows within a process). On CUDA it is a separate call after the timed ones:
``torch.cuda.max_memory_allocated()`` after ``reset_peak_memory_stats()``, minus the memory
allocated before the call.

Each cell also records the mean CPU use of other processes while it ran (:mod:`bench.machine`).
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from bench.machine import CpuClock

Op = Callable[[], dict[str, Any]]
"""One call of one library (see :mod:`bench.anchors`): returns its outputs by name."""

CAPPED_REPEATS = 3


@dataclass(frozen=True)
class Timing:
    """How every cell is measured (the CLI's ``--warmup``, ``--repeats``, ``--cap-s``)."""

    warmup: int
    repeats: int
    cap_s: float
    memory: bool  # False with ``--no-memory``
    single_s: float = math.inf  # a first call slower than this is the only one (``--single-s``)
    max_gib: float = math.inf  # cells predicted to need more memory are not run (``--max-gib``)


@dataclass
class Measurement:
    """Time and memory of one (case, library, op)."""

    ms: float | None = None
    repeats: int = 0
    capped: bool = False
    single: bool = False  # the first call, slower than ``single_s``, was the only one
    mib: float | None = None
    error: str | None = None
    skipped: bool = False
    unsupported: bool = False
    refused: str | None = None  # why the cell was not run (predicted memory over ``max_gib``)
    others_cores: float | None = None  # mean CPU use of other processes while this cell ran


def synchronizer(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def timed(fn: Op, sync: Callable[[], None]) -> tuple[float, dict[str, Any]]:
    """One call of ``fn``: its wall time in seconds and its outputs."""
    sync()
    t0 = time.perf_counter()
    out = fn()
    sync()
    return time.perf_counter() - t0, out


def time_op(
    fn: Op,
    sync: Callable[[], None],
    warmup: int,
    repeats: int,
    cap_s: float,
    profiled: Op | None = None,
    single_s: float = math.inf,
) -> tuple[Measurement, dict[str, Any]]:
    """Warm up, then time ``repeats`` calls (3 if a warm-up call exceeds ``cap_s``); median in ms.

    ``profiled``, if given, is called (untimed) right after the first warm-up call, and counts as
    the second warm-up call. It never decides the cap: the profiler's own overhead can be seconds
    for thousands of small ops. A first call slower than ``single_s`` is the measurement alone.
    """
    out: dict[str, Any] = {}
    capped = False
    for i in range(warmup):
        if i == 1 and profiled is not None:
            out = profiled()
            continue
        seconds, out = timed(fn, sync)
        if i == 0 and seconds > single_s:
            return Measurement(ms=1e3 * seconds, repeats=1, capped=True, single=True), out
        if seconds > cap_s:
            capped = True
            break
    if profiled is not None and (capped or warmup < 2):
        out = profiled()
    n = min(repeats, CAPPED_REPEATS) if capped else repeats
    times = []
    for _ in range(n):
        seconds, out = timed(fn, sync)
        times.append(seconds)
    return Measurement(ms=1e3 * statistics.median(times), repeats=n, capped=capped), out


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """Silence the C++ profiler's start/stop lines on file descriptor 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_mib(fn: Op, device: torch.device) -> tuple[float, dict[str, Any]]:
    """One call of ``fn``: its peak extra memory in MiB (see the module docstring) and its outputs."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        out = fn()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - base) / 2**20, out
    from torch._C._autograd import DeviceType

    activities = [torch.profiler.ProfilerActivity.CPU]
    with quiet_stderr(), torch.profiler.profile(activities=activities, profile_memory=True) as prof:
        out = fn()
    cpu_types = {DeviceType.CPU, DeviceType.MKLDNN, DeviceType.IDEEP}
    events = [
        e
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() in cpu_types
    ]
    current = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        current += e.nbytes()
        peak = max(peak, current)
    return peak / 2**20, out


def measure(fn: Op, device: torch.device, timing: Timing) -> tuple[Measurement, dict[str, Any]]:
    """Time and memory of one (case, library, op); also returns the outputs of the last call."""
    mem: list[float] = []

    def profiled() -> dict[str, Any]:
        mib, out = peak_mib(fn, device)
        mem.append(mib)
        return out

    # CPU: the second warm-up call is the memory-profiled one (no extra call, which matters at
    # seconds a call). CUDA: a separate call after the timed ones, so that one-off workspaces
    # (cuBLAS...) allocated by the very first call are not counted.
    on_cpu = device.type == "cpu" and timing.memory
    clock = CpuClock.start()
    m, out = time_op(
        fn,
        synchronizer(device),
        timing.warmup,
        timing.repeats,
        timing.cap_s,
        profiled if on_cpu else None,
        timing.single_s,
    )
    if device.type == "cuda" and timing.memory and not m.single:
        profiled()
    m.others_cores = clock.others_cores()
    m.mib = mem[0] if mem else None
    return m, out
