"""The fused CPU backend: ``csrc/chain_cpu.cpp``, compiled on first use, called by ctypes.

One module per concern: :mod:`~crfhead.engine.backends.cpu.native` builds, caches, validates and
loads the library; :mod:`~crfhead.engine.backends.cpu.abi` is its one signature table and the ctypes
wrappers generated from it; :mod:`~crfhead.engine.backends.cpu.threads` chooses the threads of a
call; :mod:`~crfhead.engine.backends.cpu.kernels` holds the ops, one native call each (two for the
max-marginals and samples). This module registers them with the op table (:mod:`crfhead.engine.table`):
:data:`FUSED` in eager mode, and :data:`DISPATCHED` (the loss and ``log Z`` with a C++ gradient rule,
the marginals and Viterbi, as dispatcher ops: :mod:`~crfhead.engine.backends.cpu.dispatcher`) ahead
of them where that library loads, in eager calls and while ``torch.compile``/``torch.export`` trace
alike.

Semantics are the portable engine's: masks with holes, empty rows, shared or per-edge transitions,
start/end, float32/float64 (half types arrive upcast), gradients to emissions, transitions, start and
end. Forbidden is ``-inf``, excluded exactly and nothing clamped, at any score scale: a row with no
valid path gets log Z ``-inf``, zero marginals, Viterbi score ``-inf`` and an all ``-1`` path; a
forbidden gold path a loss of ``+inf``. The loss is one native call forward (log Z, gold score, and
the gradient: marginals minus gold counts, after checking the tags' range) and one backward
(:func:`~crfhead.engine.backends.cpu.kernels.scale_grads`, by the upstream gradient).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from crfhead.engine.backends.cpu import dispatcher, kernels
from crfhead.engine.backends.cpu.kernels import glue, scale_grads
from crfhead.engine.backends.cpu.native import (
    FLAGS,
    NO_OPENMP,
    OPENMP,
    SOURCE,
    library_path,
    uses_openmp,
)
from crfhead.engine.backends.cpu.native import status as _kernel_status
from crfhead.engine.backends.cpu.threads import PARALLEL_WORK, lanes, serial_torch, threads_for

__all__ = [
    "CHECKED",
    "DISPATCHED",
    "FLAGS",
    "FUSED",
    "NO_OPENMP",
    "OPENMP",
    "PARALLEL_WORK",
    "SOURCE",
    "glue",
    "lanes",
    "library_path",
    "scale_grads",
    "serial_torch",
    "status",
    "threads_for",
    "uses_openmp",
]

FUSED: Mapping[str, Callable[..., Any]] = {
    "log_partition": kernels.log_partition,
    "nll": kernels.nll,
    "marginals": kernels.marginals,
    "edge_marginals": kernels.edge_marginals,
    "max_marginals": kernels.max_marginals,
    "entropy": kernels.entropy,
    "viterbi": kernels.viterbi,
    "topk": kernels.topk,
    "sample": kernels.sample,
}
"""Every op of :mod:`crfhead.engine.table`, fused (kernels on the raw chain)."""
DISPATCHED: Callable[[], Mapping[str, Callable[..., Any]]] = dispatcher.registered
"""The ops that run as dispatcher ops of :mod:`~crfhead.engine.backends.cpu.dispatcher`, eager or traced."""
CHECKED: frozenset[str] = frozenset({"nll"})
"""The loss's kernel checks the tags' range itself (before any work)."""


def status() -> tuple[bool, str]:
    """Whether the kernel is built and loadable (building it if needed), and if not, why.

    The first call also starts building the dispatcher ops beside the kernel (:func:`~crfhead.engine.
    backends.cpu.dispatcher.prefetch`): on first use the two compilations share the machine's cores.
    """
    dispatcher.prefetch()
    return _kernel_status()
