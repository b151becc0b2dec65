"""The eager calls of the cpu backend as dispatcher ops: ``csrc/chain_ops.cpp``, built on first use.

The kernel (``csrc/chain_cpu.cpp``) is a plain C library called through ctypes. In eager mode the
loss, ``log Z`` and Viterbi go instead through three ops that ``chain_ops.cpp`` registers with torch's
dispatcher (``crfhead::fused_nll``, ``crfhead::fused_log_partition``, ``crfhead::fused_viterbi``): one
dispatch from Python, outputs allocated in C++, the kernel's entry points called through pointers
bound once (:func:`load`), and the gradient rule of the loss and ``log Z`` registered once, as a C++
``torch::autograd::Function`` (the ``fused`` rule of :mod:`crfhead.engine.backends.autograd`: the
forward computes the gradient's parts, the backward scales them by the upstream gradient in one
more kernel call). What a Python ``autograd.Function`` and a ctypes call cost per call (the context,
the saved-tensor bookkeeping, a conversion per argument) is then C++ work. A backward with
``create_graph`` (double backward) calls ``crfhead::fused_recompute``, registered here: the portable
scan's differentiable recomputation, as the Python rule does.

The ops library is compiled against torch's headers (``torch/library.h`` and the autograd function,
not the whole extension API: about 15 s of compiler time), into the kernel's cache, keyed also by
torch's version. Where it cannot be built or loaded, :func:`ops` is ``None`` (the reason in
:func:`status`) and the eager calls stay on the ctypes path with the Python autograd function, the
same results bit for bit. ``CRFHEAD_EAGER_OPS=0`` in the environment when crfhead loads asks for that
path.
"""

from __future__ import annotations

import ctypes
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor

from crfhead.checks import register_chain_check
from crfhead.engine.backends.cpu import native
from crfhead.engine.backends.cpu.threads import for_call
from crfhead.engine.potentials import Chain

__all__ = ["OPS_SOURCE", "VERSION", "Ops", "flags", "ops", "prefetch", "registered", "status"]

log = logging.getLogger(__name__)

OPS_SOURCE = Path(__file__).resolve().parent.parent / "csrc" / "chain_ops.cpp"
VERSION = 1
"""What ``crfhead_ops_version()`` must return (with the order of :data:`_BOUND`)."""
_BOUND = ("forward_backward", "nll_grad", "scale_grads", "viterbi", "first_non_finite")
"""The kernel's entry points ``crfhead_ops_bind`` takes, each ``_f32`` then ``_f64``."""


class Ops(NamedTuple):
    """The loaded ops (each an ``OpOverload``, the cheapest callable of a dispatcher op)."""

    nll: Any
    log_partition: Any
    viterbi: Any
    check: Any


_lock = threading.Lock()
_ops: Ops | None = None
_enabled = os.environ.get("CRFHEAD_EAGER_OPS") != "0"
"""``CRFHEAD_EAGER_OPS=0`` (read when crfhead loads this module) keeps the eager calls on ctypes."""
_error: str | None = None


def flags() -> tuple[str, ...]:
    """The compiler flags: torch's headers, libraries and C++ ABI; the key of the cached library.

    They name torch's install (its path and version), so another torch builds another library.
    """
    root = Path(torch.__file__).resolve().parent
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return (
        "-O2",
        "-std=c++17",
        "-shared",
        "-fPIC",
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        f"-DCRFHEAD_TORCH_VERSION={torch.__version__}",
        f"-I{root / 'include'}",
        f"-I{root / 'include' / 'torch' / 'csrc' / 'api' / 'include'}",
        f"-L{root / 'lib'}",
        f"-Wl,-rpath,{root / 'lib'}",
        # GNU ld drops a library no symbol of the objects before it needs (the libraries come first).
        *(("-Wl,--no-as-needed",) if sys.platform.startswith("linux") else ()),
        "-lc10",
        "-ltorch_cpu",
    )


def _recompute(
    em: Tensor,
    tr: Tensor,
    start: Tensor,
    end: Tensor,
    mask: Tensor,
    tags: Tensor | None,
    grad: Tensor,
    edges: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``crfhead::fused_recompute``: the portable scan's differentiable gradient (double backward).

    A gradient not computed is an empty tensor (the op returns tensors; the caller drops it).
    """
    from crfhead.engine.potentials import ChainPotentials
    from crfhead.engine.scan import double_backward

    dtype = em.dtype  # the forward computed in the emissions' dtype
    tr, start, end = (x if x.dtype == dtype else x.to(dtype) for x in (tr, start, end))
    g = double_backward(ChainPotentials(em, tr, start, end, mask.bool()), tags, grad, edges)
    a, b, c, d = (em.new_empty(0) if x is None else x for x in g)
    return a, b, c, d


def _open(path: Path) -> Ops:
    lib = ctypes.CDLL(str(path))  # runs the op registrations
    if lib.crfhead_ops_version() != VERSION:
        raise RuntimeError(f"{path} has version {lib.crfhead_ops_version()}, expected {VERSION}")
    kernel = native.load()
    if kernel is None:
        raise RuntimeError("the cpu kernel is unavailable")
    names = [f"crfhead_{name}_{suffix}" for name in _BOUND for suffix in ("f32", "f64")]
    table = (ctypes.c_void_p * len(names))(
        *(ctypes.cast(getattr(kernel, name), ctypes.c_void_p).value for name in names)
    )
    lib.crfhead_ops_bind.argtypes = [ctypes.c_void_p]
    lib.crfhead_ops_bind.restype = None
    lib.crfhead_ops_bind(table)
    torch.library.impl("crfhead::fused_recompute", "CompositeImplicitAutograd")(_recompute)
    namespace = torch.ops.crfhead
    loaded = Ops(
        namespace.fused_nll.default,
        namespace.fused_log_partition.default,
        namespace.fused_viterbi.default,
        namespace.fused_check.default,
    )
    register_chain_check(_chain_check(loaded.check))
    return loaded


def _chain_check(op: Any) -> Any:
    """The boundary's finiteness pass (:data:`crfhead.checks.ChainCheck`) as one dispatcher op."""

    def check(em: Tensor, tr: Tensor, st: Tensor, en: Tensor, mask: Tensor) -> int | None:
        code: int = op(em, tr, st, en, mask)
        return None if code == -3 else code

    return check


def _load() -> None:
    global _ops, _error
    try:
        lib = native.build_library(OPS_SOURCE, flags(), about="~15 s")
        _ops = _open(lib)
    except (RuntimeError, OSError, subprocess.SubprocessError, AttributeError) as err:
        lines = str(err).strip().splitlines() or [repr(err)]
        _error = next((line.strip() for line in lines if "error" in line), lines[-1].strip())
        if native.status()[0]:  # else the kernel's own fallback line says why (the same cause)
            log.warning(
                "crfhead: the cpu backend's eager ops are unavailable (%s); eager calls use the "
                "ctypes path (same results, more time per call)",
                _error,
            )


_prefetched = False


def _after_fork_in_child() -> None:
    """A forked child (a DataLoader worker) has no build thread: a lock it held is released here."""
    global _lock, _prefetched
    _lock = threading.Lock()
    if _ops is None:
        _prefetched = False


os.register_at_fork(after_in_child=_after_fork_in_child)


def prefetch() -> None:
    """Start loading the eager ops (building them if needed) in a background thread, once.

    Called where the kernel is first asked for, so that a first use compiles the two libraries at
    once; :func:`ops` waits for that load rather than starting its own.
    """
    global _prefetched
    if _prefetched or _ops is not None or not _enabled:
        return
    _prefetched = True
    threading.Thread(target=ops, name="crfhead-eager-ops", daemon=True).start()


def ops() -> Ops | None:
    """The eager ops (built and loaded on first use), or ``None`` where unavailable or turned off."""
    if _ops is not None:  # loaded: no lock on the hot path
        return _ops
    if _error is not None or not _enabled:
        return None
    with _lock:
        if _ops is None and _error is None:
            _load()
    return _ops


def status() -> tuple[bool, str]:
    """Whether the eager ops load here (building them if needed), and if not, why."""
    if not _enabled:
        return False, "turned off by CRFHEAD_EAGER_OPS=0"
    return ops() is not None, _error or ""


def registered() -> Mapping[str, Callable[..., Any]]:
    """The op table's eager ops (:mod:`crfhead.engine.table`), by name; empty where unavailable.

    Each takes the raw chain (and the op's arguments) and returns the op's result: ``nll`` the loss
    and the gold score, ``log_partition`` ``log Z``, both differentiable by the C++ rule;
    ``viterbi`` the best scores and paths, without gradient.
    """
    if not _enabled:
        return {}
    return _REGISTERED if ops() is not None else {}


def _nll(chain: Chain, tags: Tensor) -> tuple[Tensor, Tensor]:
    assert _ops is not None
    out: tuple[Tensor, Tensor] = _ops.nll(*chain, tags, _threads(chain))
    return out


def _log_partition(chain: Chain) -> Tensor:
    assert _ops is not None
    out: Tensor = _ops.log_partition(*chain, _threads(chain))
    return out


def _viterbi(chain: Chain) -> tuple[Tensor, Tensor]:
    assert _ops is not None
    out: tuple[Tensor, Tensor] = _ops.viterbi(*chain, _threads(chain))
    return out


def _threads(chain: Chain) -> int:
    B, T, K = chain[0].shape
    return for_call(B, T, K, False, chain[0].dtype)


_REGISTERED: Mapping[str, Callable[..., Any]] = {
    "nll": _nll,
    "log_partition": _log_partition,
    "viterbi": _viterbi,
}
