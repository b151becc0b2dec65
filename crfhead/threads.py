"""Serial sections: torch's CPU operations on the calling thread run single-threaded inside one.

For small tensor work (the glue around a fused kernel call, a finiteness check): forking and joining
torch's OpenMP threads costs more than such work, and on a busy machine the join waits for a
descheduled thread (the README's contention benchmark shows the cost). Only the calling
thread's OpenMP thread count changes (libgomp keeps it per thread and torch reads it per thread), and
it is restored on exit, exceptions included.

The per-thread setter comes from the fused CPU kernel (``crfhead_torch_threads`` in
``crfhead/engine/backends/csrc/chain_cpu.cpp``, which shares torch's libgomp), registered by
:mod:`crfhead.engine.backends.cpu` when it loads; until then (or without an OpenMP build) a serial
section runs unchanged. This module imports nothing of crfhead, so the boundary checks can use it
without importing, or compiling, the kernel.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

__all__ = ["register_thread_setter", "serial_torch"]

_setter: Callable[[int], int] | None = None


def register_thread_setter(setter: Callable[[int], int] | None) -> None:
    """Install ``setter(n) -> previous``: sets the calling thread's OpenMP thread count to ``n``.

    ``setter`` returns the previous count, or a value ``<= 0`` when it changed nothing.
    """
    global _setter
    _setter = setter


@contextlib.contextmanager
def serial_torch(serial: bool = True) -> Iterator[None]:
    """Run torch's CPU operations on the calling thread single-threaded inside the block (if ``serial``)."""
    setter = _setter if serial else None
    previous = setter(1) if setter is not None else -1
    try:
        yield
    finally:
        if setter is not None and previous > 0:
            setter(previous)
