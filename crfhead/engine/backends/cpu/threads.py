"""The cpu backend's thread policy: how many threads one kernel call uses, and serial torch glue.

A call runs on the calling thread alone unless its work pays for waking helpers, and then on at most
one thread per block of sequences; the helpers are a pool of passive workers whose join never waits
for one that has not started, so a machine whose cores are busy elsewhere costs a call its speed-up,
never a scheduler time slice per call. While a call runs single-threaded, the few torch operations
around the kernel run in a :func:`serial_torch` section, so they do not fork and join torch's OpenMP
threads either.
"""

from __future__ import annotations

import contextlib
import os

import torch

from crfhead.engine.backends.cpu import native
from crfhead.threads import serial_torch as _serial_torch

__all__ = ["PARALLEL_WORK", "for_call", "lanes", "serial_torch", "threads_for"]

PARALLEL_WORK = 1_000_000
"""The work (``B * T * K * K``, the multiply-adds of one pass) from which a call uses more than one
thread. Waking a helper costs the caller tens of microseconds, so more threads pay only in calls of
a few tenths of a millisecond or more; the common training sizes, such as (32, 50, 9), stay on one
thread."""


def lanes(dtype: torch.dtype) -> int:
    """Sequences per SIMD block of the shared-transition kernel: 8 for float32, 4 for float64."""
    return 4 if dtype == torch.float64 else 8


def threads_for(
    B: int, T: int, K: int, *, per_sequence: bool = False, dtype: torch.dtype = torch.float32
) -> int:
    """How many threads one call on ``(B, T, K)`` potentials uses.

    The kernel's tasks are blocks of :func:`lanes` sequences (shared or per-edge transitions; one
    sequence each, ``per_sequence``, for the k-best and sampling), so more threads than tasks would
    idle. ``$CRFHEAD_CPU_THREADS``, if set, is the count (at most one per task); otherwise one thread
    below :data:`PARALLEL_WORK`, else torch's intra-op count on the calling thread
    (``torch.get_num_threads()``), at most one per task.

    Without the override the kernel also drops its helpers for a second after a call whose join
    shows one was descheduled inside its task (the cores are busy elsewhere); an explicit count is
    always obeyed.
    """
    tasks = B if per_sequence else -(-B // lanes(dtype))
    override = os.environ.get("CRFHEAD_CPU_THREADS")
    if override:
        wanted = int(override)
    elif B * T * K * K < PARALLEL_WORK:
        return 1
    else:
        wanted = torch.get_num_threads()
    return max(1, min(wanted, tasks))


def serial_torch(serial: bool = True) -> contextlib.AbstractContextManager[None]:
    """:func:`crfhead.threads.serial_torch`, with the kernel loaded (it provides the per-thread setter)."""
    if serial:
        native.load()
    return _serial_torch(serial)


def for_call(B: int, T: int, K: int, per_sequence: bool, dtype: torch.dtype) -> int:
    """:func:`threads_for` one call, telling the kernel whether the count is explicit.

    With ``$CRFHEAD_CPU_THREADS`` set the pool does not back off (see :func:`threads_for`).
    """
    threads = threads_for(B, T, K, per_sequence=per_sequence, dtype=dtype)
    if threads > 1:
        native.entries()["pool_adaptive"](int(not os.environ.get("CRFHEAD_CPU_THREADS")))
    return threads
