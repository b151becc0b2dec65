"""The fused CPU backend: ``crfhead/csrc/chain_cpu.cpp`` compiled on first use, called through ctypes.

Why not ``torch.utils.cpp_extension``: the kernel needs raw pointers and a loop, nothing from ATen, and
including the torch headers made the first-use compile take 76 s of CPU (297 s wall on this 2-core
machine) against 5 s for the plain C++ file; a ctypes call costs a few microseconds. The library is
built with the system compiler (``$CXX``, else ``c++``) into ``$CRFHEAD_CACHE`` (default
``~/.cache/crfhead``), keyed by a hash of the source, the flags and the CPU model, written atomically so
concurrent processes (DDP ranks, test workers) can race safely. Where no compiler exists the build
fails once, :func:`status` says why, and ``auto`` falls back to the portable backend with one log line.

Semantics are the portable engine's (see :mod:`crfhead.potentials`): masks with holes, empty rows,
shared or per-edge transitions, start/end, float32/float64 (half types arrive upcast), gradients to
emissions, transitions, start and end. Double backward recomputes with the portable engine.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from crfhead.backends.fused import fused_log_partition, scale_grads
from crfhead.potentials import ChainPotentials

__all__ = [
    "SOURCE",
    "forward_backward",
    "library_path",
    "log_partition",
    "marginals",
    "status",
    "viterbi",
]

SOURCE = Path(__file__).resolve().parents[1] / "csrc" / "chain_cpu.cpp"
FLAGS = (
    "-O3",
    "-march=native",
    "-fopenmp-simd",  # honour the '#pragma omp simd' loops (no OpenMP runtime)
    "-fno-math-errno",
    "-std=c++17",
    "-shared",
    "-fPIC",
    "-pthread",
)
_ABI = 3
_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_error: str | None = None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") or line.startswith("flags"):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def library_path(compiler: str) -> Path:
    """Where the library built by ``compiler`` from the current source is cached."""
    key = hashlib.sha256()
    for part in (
        SOURCE.read_bytes(),
        compiler.encode(),
        " ".join(FLAGS).encode(),
        _cpu_model().encode(),
    ):
        key.update(part)
    cache = Path(os.environ.get("CRFHEAD_CACHE") or Path.home() / ".cache" / "crfhead")
    return cache / f"chain_cpu_{key.hexdigest()[:16]}.so"


def _build() -> ctypes.CDLL:
    compiler = os.environ.get("CXX") or "c++"
    exe = shutil.which(compiler)
    if exe is None:
        raise RuntimeError(f"no C++ compiler found (tried {compiler!r}; set $CXX)")
    lib = library_path(compiler)
    if not lib.exists():
        lib.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=lib.parent)
        os.close(fd)
        try:
            done = subprocess.run(
                [exe, *FLAGS, str(SOURCE), "-o", tmp], capture_output=True, text=True, timeout=600
            )
            if done.returncode != 0:
                raise RuntimeError(f"compiling {SOURCE.name} failed: {done.stderr.strip()[-500:]}")
            os.replace(tmp, lib)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    cdll = ctypes.CDLL(str(lib))
    if cdll.crfhead_abi_version() != _ABI:
        raise RuntimeError(f"{lib} has ABI {cdll.crfhead_abi_version()}, expected {_ABI}")
    p, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    for suffix in ("f32", "f64"):
        fb = getattr(cdll, f"crfhead_forward_backward_{suffix}")
        fb.argtypes = [p, p, p, p, p, i64, i64, i64, c_int, p, p, p, p, p, c_int]
        fb.restype = None
        nll = getattr(cdll, f"crfhead_nll_grad_{suffix}")
        nll.argtypes = [p, p, p, p, p, i64, i64, i64, c_int, p, p, p, p, p, p, p, c_int]
        nll.restype = None
        vit = getattr(cdll, f"crfhead_viterbi_{suffix}")
        vit.argtypes = [p, p, p, p, p, i64, i64, i64, c_int, p, p, c_int]
        vit.restype = None
    return cdll


def _load() -> ctypes.CDLL | None:
    global _lib, _error
    with _lock:
        if _lib is None and _error is None:
            try:
                _lib = _build()
            except (RuntimeError, OSError, subprocess.SubprocessError) as err:
                _error = str(err)
        return _lib


def status() -> tuple[bool, str]:
    """Whether the kernel is built and loadable (building it if needed), and if not, why."""
    lib = _load()
    return lib is not None, _error or ""


def _threads() -> int:
    """Threads the kernel splits the batch over: ``$CRFHEAD_CPU_THREADS``, else torch's intra-op count."""
    return max(1, int(os.environ.get("CRFHEAD_CPU_THREADS") or torch.get_num_threads()))


def _suffix(dtype: torch.dtype) -> str:
    if dtype == torch.float32:
        return "f32"
    if dtype == torch.float64:
        return "f64"
    raise ValueError(f"the cpu backend computes in float32 or float64, got {dtype}")


def _args(pot: ChainPotentials) -> tuple[list[Any], tuple[Tensor, ...]]:
    """C arguments of the potentials, and the contiguous tensors that must outlive the call."""
    em = pot.emissions.detach().contiguous()
    dtype = em.dtype
    trans = pot.transitions.detach().to(dtype).contiguous()
    start = pot.start.detach().to(dtype).contiguous()
    end = pot.end.detach().to(dtype).contiguous()
    mask = pot.mask.contiguous().view(torch.uint8)
    B, T, K = em.shape
    args = [em.data_ptr(), trans.data_ptr(), start.data_ptr(), end.data_ptr(), mask.data_ptr()]
    return [*args, B, T, K, int(trans.dim() == 4)], (em, trans, start, end, mask)


def forward_backward(
    pot: ChainPotentials, *, marginals: bool = True, edges: bool = False
) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
    """One fused forward-backward: ``(log Z, node, edge, first, last)``.

    ``log Z`` is ``(B,)``; optionally the node marginals ``(B, T, K)``, the edge marginals (``(B, K,
    K)`` summed over edges for shared transitions, ``(B, T-1, K, K)`` per edge), and the marginals of
    the first and last tags ``(B, K)``.

    The results carry no autograd history (see :func:`log_partition` for the differentiable ``log Z``).
    """
    lib = _load()
    if lib is None:
        raise RuntimeError(f"crfhead cpu backend unavailable: {_error}")
    args, keep = _args(pot)
    em = keep[0]
    B, T, K = em.shape
    new = torch.empty  # the kernel zeroes what it does not write
    opts: dict[str, Any] = {"dtype": em.dtype}
    logz = new(B, **opts)
    node = new(B, T, K, **opts) if marginals or edges else None
    edge = None
    if edges:
        edge = new(B, max(T - 1, 0), K, K, **opts) if pot.per_position else new(B, K, K, **opts)
    first = new(B, K, **opts) if node is not None else None
    last = new(B, K, **opts) if node is not None else None

    def ptr(x: Tensor | None) -> int | None:
        return None if x is None else x.data_ptr()

    fn = getattr(lib, f"crfhead_forward_backward_{_suffix(em.dtype)}")
    fn(*args, ptr(logz), ptr(node), ptr(edge), ptr(first), ptr(last), _threads())
    del keep
    return logz, node, edge, first, last


def log_partition(pot: ChainPotentials) -> Tensor:
    """``log Z`` ``(B,)``, differentiable (gradient = marginals from the same fused call)."""
    return fused_log_partition(pot, forward_backward)


class _FusedNLL(torch.autograd.Function):
    """``log Z - score(tags)`` and the gold score, gradients (marginals - gold counts) from one call."""

    @staticmethod
    def forward(
        ctx: Any,
        emissions: Tensor,
        transitions: Tensor,
        start: Tensor,
        end: Tensor,
        mask: Tensor,
        tags: Tensor,
    ) -> tuple[Tensor, Tensor]:
        pot = ChainPotentials(emissions, transitions, start, end, mask)
        lib = _load()
        if lib is None:
            raise RuntimeError(f"crfhead cpu backend unavailable: {_error}")
        args, keep = _args(pot)
        em = keep[0]
        B, T, K = em.shape
        need = ctx.needs_input_grad
        grads = any(need[:4])
        opts: dict[str, Any] = {"dtype": em.dtype}
        new = torch.empty  # the kernel zeroes what it does not write
        logz, gold = new(B, **opts), new(B, **opts)
        node = new(B, T, K, **opts) if grads else None
        edge = None
        if grads and need[1]:
            shape = (B, max(T - 1, 0), K, K) if pot.per_position else (B, K, K)
            edge = new(shape, **opts)
        first = new(B, K, **opts) if grads else None
        last = new(B, K, **opts) if grads else None
        gold_tags = torch.where(mask, tags, torch.zeros_like(tags)).contiguous()

        def ptr(x: Tensor | None) -> int | None:
            return None if x is None else x.data_ptr()

        fn = getattr(lib, f"crfhead_nll_grad_{_suffix(em.dtype)}")
        fn(
            *args,
            gold_tags.data_ptr(),
            ptr(logz),
            ptr(gold),
            ptr(node),
            ptr(edge),
            ptr(first),
            ptr(last),
            _threads(),
        )
        del keep
        ctx.per_position = pot.per_position
        ctx.save_for_backward(
            emissions, transitions, start, end, mask, gold_tags, node, edge, first, last
        )
        ctx.mark_non_differentiable(gold)
        return logz - gold, gold

    @staticmethod
    def backward(ctx: Any, grad: Tensor, _gold: Tensor | None) -> tuple[Tensor | None, ...]:
        emissions, transitions, start, end, mask, tags, node, edge, first, last = ctx.saved_tensors
        if torch.is_grad_enabled():
            # Double backward: log Z's gradient recomputed differentiably; the gold counts are constant.
            from crfhead.chain import log_partition_grads, score

            pot = ChainPotentials(emissions, transitions, start, end, mask)
            g = log_partition_grads(pot, grad, bool(ctx.needs_input_grad[1]), None)
            with torch.enable_grad():
                em_, tr_, st_, en_ = (
                    x.detach().requires_grad_(True) for x in (emissions, transitions, start, end)
                )
                gold = score(ChainPotentials(em_, tr_, st_, en_, mask), tags)
                counts = torch.autograd.grad(gold, (em_, tr_, st_, en_), grad, allow_unused=True)
            out = [
                None if a is None else a - (0 if c is None else c)
                for a, c in zip(g[:4], counts, strict=True)
            ]
            return (*out, None, None)
        return (*scale_grads(grad, node, edge, first, last, ctx.per_position), None, None)


def nll(pot: ChainPotentials, tags: Tensor) -> tuple[Tensor, Tensor]:
    """``(log Z - score(tags), score(tags))``, each ``(B,)``; the first differentiable.

    Args:
        pot: the chain potentials.
        tags: ``(B, T)`` int64 gold tags, in range at unmasked positions (read nowhere else).
    """
    tensors = (pot.emissions, pot.transitions, pot.start, pot.end)
    if torch.is_grad_enabled() and any(x.requires_grad for x in tensors):
        out: tuple[Tensor, Tensor] = _FusedNLL.apply(  # type: ignore[no-untyped-call]
            *tensors, pot.mask, tags
        )
        return out
    lib = _load()
    if lib is None:
        raise RuntimeError(f"crfhead cpu backend unavailable: {_error}")
    args, keep = _args(pot)
    B = keep[0].shape[0]
    logz = torch.empty(B, dtype=keep[0].dtype)
    gold = torch.empty(B, dtype=keep[0].dtype)
    gold_tags = torch.where(pot.mask, tags, torch.zeros_like(tags)).contiguous()
    fn = getattr(lib, f"crfhead_nll_grad_{_suffix(keep[0].dtype)}")
    fn(
        *args,
        gold_tags.data_ptr(),
        logz.data_ptr(),
        gold.data_ptr(),
        None,
        None,
        None,
        None,
        _threads(),
    )
    del keep
    return logz - gold, gold


def marginals(pot: ChainPotentials) -> Tensor:
    """Node marginals ``(B, T, K)`` (no autograd history)."""
    node = forward_backward(pot, marginals=True)[1]
    assert node is not None
    return node


def viterbi(pot: ChainPotentials) -> tuple[Tensor, Tensor]:
    """Best scores ``(B,)`` and paths ``(B, T)`` int64 (``-1`` where masked); ties to the lowest tag."""
    lib = _load()
    if lib is None:
        raise RuntimeError(f"crfhead cpu backend unavailable: {_error}")
    args, keep = _args(pot)
    em = keep[0]
    B, T, _ = em.shape
    scores = torch.empty(B, dtype=em.dtype)  # the kernel writes every entry
    paths = torch.empty((B, T), dtype=torch.long)
    fn = getattr(lib, f"crfhead_viterbi_{_suffix(em.dtype)}")
    fn(*args, scores.data_ptr(), paths.data_ptr(), _threads())
    del keep
    return scores, paths
