"""The cpu backend's dispatcher ops: ``csrc/chain_ops.cpp``, built on first use, eager and traced alike.

The kernel (``csrc/chain_cpu.cpp``) is a plain C library called through ctypes. The loss, ``log Z``,
the node marginals and Viterbi go instead through ops that ``chain_ops.cpp`` registers with torch's
dispatcher, the same op in an eager call, a ``torch.compile`` graph and a ``torch.export`` program:

* ``crfhead::fused_nll(em, tr, start, end, mask, tags)`` → ``(loss, gold)`` and
  ``crfhead::fused_log_partition(em, tr, start, end, mask)`` → ``log Z``, differentiable by the
  ``fused`` rule of :mod:`crfhead.engine.backends.autograd` registered once, as a C++
  ``torch::autograd::Function``: its forward calls ``crfhead::nll`` / ``crfhead::forward_backward``
  (the value with the gradient's parts, marginals minus gold counts, see
  :class:`~crfhead.engine.scan.Moments`) and its backward ``crfhead::scale_grads`` (the parts scaled
  by the upstream gradient), so a traced training graph holds those two kernel calls;
* ``crfhead::marginals`` → node marginals ``(B, T, K)`` and ``crfhead::viterbi`` → ``(scores (B,),
  paths (B, T))``, without gradient (the op table recomputes or re-scores where one is needed).

Each op's CPU kernel allocates its outputs in C++, calls the kernel's entry points through pointers
bound once (:func:`ops`) and chooses its threads in C++
(:func:`~crfhead.engine.backends.cpu.threads.threads_for`'s policy, so a traced graph's symbolic
``B``/``T`` leave it to run time); each has a fake implementation here, registered when the library
loads, whose shapes follow symbolic ``B`` and ``T``, so an exported program serves every length. A
backward with ``create_graph`` (double backward) calls ``crfhead::fused_recompute``, registered here:
the portable scan's differentiable recomputation, as the Python rule does. In eager mode the boundary's
finiteness pass is one more op, ``crfhead::fused_check``.

The library is compiled against torch's headers (``torch/library.h`` and the autograd function, not
the whole extension API: about 15 s of compiler time), into the kernel's cache, keyed also by torch's
version. Where it cannot be built or loaded, :func:`ops` is ``None`` (the reason in :func:`status`):
eager calls use the ctypes path with the Python autograd function (the same results bit for bit),
and traced ones the portable functions. ``CRFHEAD_EAGER_OPS=0`` in the environment when crfhead
loads asks for that.
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
from crfhead.engine.backends.cpu.kernels import part_shapes
from crfhead.engine.backends.cpu.threads import PARALLEL_WORK
from crfhead.engine.potentials import Chain

__all__ = ["OPS_SOURCE", "VERSION", "Ops", "flags", "ops", "prefetch", "registered", "status"]

log = logging.getLogger(__name__)

OPS_SOURCE = Path(__file__).resolve().parent.parent / "csrc" / "chain_ops.cpp"
VERSION = 2
"""What ``crfhead_ops_version()`` must return (with the order of :data:`_BOUND`)."""
_BOUND = ("forward_backward", "nll_grad", "scale_grads", "viterbi", "first_non_finite")
"""The kernel's entry points ``crfhead_ops_bind`` takes, each ``_f32`` then ``_f64``; then
``crfhead_pool_adaptive``."""


class Ops(NamedTuple):
    """The loaded ops the op table calls (each an ``OpOverload``, a dispatcher op's cheapest callable)."""

    nll: Any
    log_partition: Any
    marginals: Any
    viterbi: Any
    check: Any


_lock = threading.Lock()
_ops: Ops | None = None
_enabled = os.environ.get("CRFHEAD_EAGER_OPS") != "0"
"""``CRFHEAD_EAGER_OPS=0`` (read when crfhead loads this module) keeps eager calls on ctypes and
traced ones on the portable functions."""
_error: str | None = None
threads_in_ops: Callable[[int, int, int, int], int] | None = None
"""``(B, T, K, float64) -> threads``: the ops' own thread choice (C++), once loaded; for the tests."""


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


# ----------------------------------------------------------------------------- fake implementations
def _fake_parts(em: Tensor, tr: Tensor, grads: bool, edges: bool) -> list[Tensor]:
    B, T, K = em.shape
    return [em.new_empty(s) for s in part_shapes(B, T, K, tr.dim() == 4, grads, edges)]


def _nll_fake(
    em: Tensor,
    tr: Tensor,
    st: Tensor,
    en: Tensor,
    mask: Tensor,
    tags: Tensor,
    grads: bool,
    edges: bool,
) -> tuple[Tensor, ...]:
    B = em.shape[0]
    return (em.new_empty(B), em.new_empty(B), *_fake_parts(em, tr, grads, grads and edges))


def _forward_backward_fake(
    em: Tensor, tr: Tensor, st: Tensor, en: Tensor, mask: Tensor, marginals: bool, edges: bool
) -> tuple[Tensor, ...]:
    return (em.new_empty(em.shape[0]), *_fake_parts(em, tr, marginals or edges, edges))


def _scale_grads_fake(
    grad: Tensor, node: Tensor, edge: Tensor, first: Tensor, last: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    K = node.shape[2]
    d_tr = edge.new_empty(edge.shape if edge.dim() == 4 else (K, K) if edge.dim() == 3 else (0,))
    return node.new_empty(node.shape), d_tr, node.new_empty(K), node.new_empty(K)


def _fused_nll_fake(
    em: Tensor, tr: Tensor, st: Tensor, en: Tensor, mask: Tensor, tags: Tensor
) -> tuple[Tensor, Tensor]:
    return em.new_empty(em.shape[0]), em.new_empty(em.shape[0])


def _fused_log_partition_fake(
    em: Tensor, tr: Tensor, st: Tensor, en: Tensor, mask: Tensor
) -> Tensor:
    return em.new_empty(em.shape[0])


def _marginals_fake(em: Tensor, tr: Tensor, st: Tensor, en: Tensor, mask: Tensor) -> Tensor:
    return em.new_empty(em.shape)


def _viterbi_fake(
    em: Tensor, tr: Tensor, st: Tensor, en: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor]:
    B, T, _ = em.shape
    return em.new_empty(B), em.new_empty((B, T), dtype=torch.long)


_FAKES: Mapping[str, Callable[..., Any]] = {
    "fused_nll": _fused_nll_fake,
    "fused_log_partition": _fused_log_partition_fake,
    "nll": _nll_fake,
    "forward_backward": _forward_backward_fake,
    "scale_grads": _scale_grads_fake,
    "marginals": _marginals_fake,
    "viterbi": _viterbi_fake,
}
_python_parts = False


def _register_python_parts() -> None:
    """The parts of the ops written in Python: the fakes and ``fused_recompute`` (once a process)."""
    global _python_parts
    if _python_parts:
        return
    torch.library.impl("crfhead::fused_recompute", "CompositeImplicitAutograd")(_recompute)
    for name, fake in _FAKES.items():
        torch.library.register_fake(f"crfhead::{name}")(fake)
    _python_parts = True


def _open(path: Path) -> Ops:
    lib = ctypes.CDLL(str(path))  # runs the op registrations
    if lib.crfhead_ops_version() != VERSION:
        raise RuntimeError(f"{path} has version {lib.crfhead_ops_version()}, expected {VERSION}")
    kernel = native.load()
    if kernel is None:
        raise RuntimeError("the cpu kernel is unavailable")
    names = [f"crfhead_{name}_{suffix}" for name in _BOUND for suffix in ("f32", "f64")]
    names.append("crfhead_pool_adaptive")
    table = (ctypes.c_void_p * len(names))(
        *(ctypes.cast(getattr(kernel, name), ctypes.c_void_p).value for name in names)
    )
    lib.crfhead_ops_bind.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.crfhead_ops_bind.restype = None
    lib.crfhead_ops_bind(table, PARALLEL_WORK)
    lib.crfhead_ops_threads.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_int]
    lib.crfhead_ops_threads.restype = ctypes.c_int
    global threads_in_ops
    threads_in_ops = lib.crfhead_ops_threads
    _register_python_parts()
    namespace = torch.ops.crfhead
    loaded = Ops(
        namespace.fused_nll.default,
        namespace.fused_log_partition.default,
        namespace.marginals.default,
        namespace.viterbi.default,
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
                "crfhead: the cpu backend's dispatcher ops are unavailable (%s); eager calls use "
                "the ctypes path (same results, more time per call) and traced calls the portable "
                "functions",
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
    """Start loading the dispatcher ops (building them if needed) in a background thread, once.

    Called where the kernel is first asked for, so that a first use compiles the two libraries at
    once; :func:`ops` waits for that load rather than starting its own.
    """
    global _prefetched
    if _prefetched or _ops is not None or not _enabled:
        return
    _prefetched = True
    threading.Thread(target=ops, name="crfhead-dispatcher-ops", daemon=True).start()


def ops() -> Ops | None:
    """The dispatcher ops (built and loaded on first use), or ``None`` where unavailable or turned off."""
    if _ops is not None:  # loaded: no lock on the hot path
        return _ops
    if _error is not None or not _enabled:
        return None
    with _lock:
        if _ops is None and _error is None:
            _load()
    return _ops


def status() -> tuple[bool, str]:
    """Whether the dispatcher ops load here (building them if needed), and if not, why."""
    if not _enabled:
        return False, "turned off by CRFHEAD_EAGER_OPS=0"
    return ops() is not None, _error or ""


def registered() -> Mapping[str, Callable[..., Any]]:
    """The op table's dispatcher ops (:mod:`crfhead.engine.table`), by name; empty where unavailable.

    Each takes the raw chain (and the op's arguments) and returns the op's result, eager or traced:
    ``nll`` the loss and the gold score, ``log_partition`` ``log Z``, both differentiable by the C++
    rule; ``marginals`` the node marginals and ``viterbi`` the best scores and paths, without
    gradient.
    """
    if not _enabled:
        return {}
    return _REGISTERED if ops() is not None else {}


def _nll(chain: Chain, tags: Tensor) -> tuple[Tensor, Tensor]:
    assert _ops is not None
    out: tuple[Tensor, Tensor] = _ops.nll(*chain, tags)
    return out


def _log_partition(chain: Chain) -> Tensor:
    assert _ops is not None
    out: Tensor = _ops.log_partition(*chain)
    return out


def _marginals(chain: Chain) -> Tensor:
    assert _ops is not None
    out: Tensor = _ops.marginals(*chain)
    return out


def _viterbi(chain: Chain) -> tuple[Tensor, Tensor]:
    assert _ops is not None
    out: tuple[Tensor, Tensor] = _ops.viterbi(*chain)
    return out


_REGISTERED: Mapping[str, Callable[..., Any]] = {
    "nll": _nll,
    "log_partition": _log_partition,
    "marginals": _marginals,
    "viterbi": _viterbi,
}
