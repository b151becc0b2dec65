"""The fused CPU backend: ``csrc/chain_cpu.cpp`` beside this file, compiled on first use, called by ctypes.

Why not ``torch.utils.cpp_extension``: the kernel needs raw pointers and a loop, nothing from ATen, and
the torch headers would make the first-use compile several times slower than the plain C++ file; a
ctypes call costs a few microseconds. The library is
built with the system compiler (``$CXX``, else ``c++``) into ``$CRFHEAD_CACHE`` (default
``~/.cache/crfhead``), keyed by a hash of the source, the flags and the CPU model, written atomically so
concurrent processes (DDP ranks, test workers) can race safely. Beside it a ``.sha256`` file records the
library's size and hash; a cached library that does not match it (truncated by a full disk, corrupted,
or from before the record existed) is never loaded, since loading a truncated library kills the
process (SIGBUS): it is rebuilt, with a warning. Where no compiler exists the build
fails once, :func:`status` says why, and ``auto`` falls back to the portable backend with one log line.
The build links OpenMP when the compiler has it (see :data:`OPENMP`; ``CRFHEAD_CPU_OPENMP=0`` opts out).

Threads (see :func:`threads_for`): a call runs on the calling thread alone unless its work pays for
waking helpers, and then on at most one thread per block of sequences; the helpers are a pool of
passive workers whose join never waits for one that has not started, so a machine whose cores are
busy elsewhere costs a call its speed-up, never a scheduler time slice per call. While a call runs
single-threaded, the few torch operations around the kernel run in a :func:`serial_torch` section, so
they do not fork and join torch's OpenMP threads either.

Semantics are the portable engine's: masks with holes, empty rows, shared or per-edge transitions,
start/end, float32/float64 (half types arrive upcast), gradients to emissions, transitions, start and
end. Forbidden is ``-inf``, excluded exactly and nothing clamped, at any score scale (a sequence whose
scaled arithmetic may have lost mass is recomputed in log space): a row with no valid path gets log Z
``-inf``, zero marginals, Viterbi score ``-inf`` and an all ``-1`` path; a forbidden gold path a loss
of ``+inf``. A :class:`~crfhead.engine.backends.autograd.Kernel`: the loss is one native call forward (log Z,
gold score, and the gradient: marginals minus gold counts, after checking the tags' range) and one
backward (:func:`scale_grads`, by the upstream gradient); the per-edge marginals
(:func:`edge_marginals`), the max-sums (:func:`max_sums`, for the max-marginals), the k best paths
(:func:`topk`) and samples (:func:`sample`: draws from the fused edge marginals) are one call each.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from crfhead.engine.potentials import ChainPotentials
from crfhead.engine.scan import Moments
from crfhead.numerics import is_tracing
from crfhead.threads import register_thread_setter
from crfhead.threads import serial_torch as _serial_torch

__all__ = [
    "CUSTOM_OPS",
    "PARALLEL_WORK",
    "SOURCE",
    "edge_marginals",
    "edge_marginals_parts",
    "forward_backward",
    "glue",
    "lanes",
    "library_path",
    "marginals",
    "max_sums",
    "nll",
    "sample",
    "scale_grads",
    "serial_torch",
    "status",
    "threads_for",
    "topk",
    "uses_openmp",
    "viterbi",
]

log = logging.getLogger(__name__)

CUSTOM_OPS = True
"""While ``torch.compile``/``torch.export`` trace, the autograd layer calls this backend's custom ops
(:mod:`~crfhead.engine.backends.ops`) rather than its autograd function."""

SOURCE = Path(__file__).resolve().parent / "csrc" / "chain_cpu.cpp"
FLAGS = (
    "-O3",
    "-march=native",
    "-fno-math-errno",
    "-std=c++17",
    "-shared",
    "-fPIC",
    "-pthread",
)
OPENMP = ("-fopenmp",)
"""Tried first. The library then links ``libgomp.so.1``, which resolves to the copy torch has already
loaded, so it can set the calling thread's OpenMP thread count, which is torch's intra-op count on
that thread (:func:`serial_torch`). The kernel's own threads are a pool of its own either way: an
OpenMP region's closing barrier waits for every thread of the team, a scheduler time slice whenever
another process holds the cores."""
NO_OPENMP = ("-fopenmp-simd",)
"""The fallback where the compiler has no OpenMP: the ``omp simd`` hints only (no serial section)."""
PARALLEL_WORK = 1_000_000
"""The work (``B * T * K * K``, the multiply-adds of one pass) from which a call uses more than one
thread. Waking a helper costs the caller about 15 microseconds, and a sleeping helper starts tens of
microseconds later, so it only pays in calls of a few tenths of a millisecond or more: here about
0.5 ms for the loss and 0.25 ms for Viterbi on one core of a 2-core AMD EPYC VM. Of the benchmark
sizes, (32, 50, 9) and (8, 1024, 9) (one block of sequences anyway) stay on one thread."""
_ABI = 7
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


def library_path(compiler: str, flags: tuple[str, ...] = FLAGS + OPENMP) -> Path:
    """Where the library built by ``compiler`` with ``flags`` from the current source is cached."""
    key = hashlib.sha256()
    for part in (
        SOURCE.read_bytes(),
        compiler.encode(),
        " ".join(flags).encode(),
        _cpu_model().encode(),
    ):
        key.update(part)
    cache = Path(os.environ.get("CRFHEAD_CACHE") or Path.home() / ".cache" / "crfhead")
    return cache / f"chain_cpu_{key.hexdigest()[:16]}.so"


def _record(lib: Path) -> Path:
    """The file holding ``lib``'s size and SHA-256."""
    return lib.with_name(lib.name + ".sha256")


def _fingerprint(path: Path) -> str:
    data = path.read_bytes()
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}"


def _cached(lib: Path) -> bool:
    """Whether ``lib`` exists and matches its recorded size and hash (warns when it does not)."""
    if not lib.exists():
        return False
    record = _record(lib)
    try:
        ok = record.read_text().strip() == _fingerprint(lib)
    except OSError:
        ok = False
    if not ok:
        log.warning(
            "crfhead cpu backend: %s does not match %s (truncated or corrupt); rebuilding",
            lib,
            record.name,
        )
    return ok


def _compile(exe: str, flags: tuple[str, ...], lib: Path) -> None:
    """Compile the source into ``lib`` and record its fingerprint, atomically (processes may race).

    Says so in one line on stderr: the first call that needs the kernel pauses for it.
    """
    print(
        f"crfhead: compiling the CPU kernel (~10 s, once; cached in {lib.parent})",
        file=sys.stderr,
        flush=True,
    )
    lib.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=lib.parent)
    os.close(fd)
    try:
        done = subprocess.run(
            [exe, *flags, str(SOURCE), "-o", tmp], capture_output=True, text=True, timeout=600
        )
        if done.returncode != 0:
            raise RuntimeError(f"compiling {SOURCE.name} failed: {done.stderr.strip()[-500:]}")
        # The record first: a reader between the two renames sees a mismatch and rebuilds.
        fd, tmp_record = tempfile.mkstemp(suffix=".sha256", dir=lib.parent)
        with os.fdopen(fd, "w") as handle:
            handle.write(_fingerprint(Path(tmp)) + "\n")
        os.replace(tmp_record, _record(lib))
        os.replace(tmp, lib)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _build() -> ctypes.CDLL:
    compiler = os.environ.get("CXX") or "c++"
    exe = shutil.which(compiler)
    if exe is None:
        raise RuntimeError(f"no C++ compiler found (tried {compiler!r}; set $CXX)")
    lib = library_path(compiler, FLAGS + OPENMP)
    fallback = library_path(compiler, FLAGS + NO_OPENMP)
    if os.environ.get("CRFHEAD_CPU_OPENMP") == "0":  # opt out (e.g. a clash of OpenMP runtimes)
        lib = fallback
        if not _cached(lib):
            _compile(exe, FLAGS + NO_OPENMP, lib)
    elif not _cached(lib):
        if _cached(fallback):  # OpenMP failed to build here before
            lib = fallback
        else:
            try:
                _compile(exe, FLAGS + OPENMP, lib)
            except (RuntimeError, subprocess.SubprocessError) as err:
                _compile(exe, FLAGS + NO_OPENMP, fallback)
                log.info("crfhead cpu backend built without OpenMP: %s", str(err).splitlines()[-1])
                lib = fallback
    cdll = ctypes.CDLL(str(lib))
    if cdll.crfhead_abi_version() != _ABI:
        raise RuntimeError(f"{lib} has ABI {cdll.crfhead_abi_version()}, expected {_ABI}")
    p, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    chain = [
        p,
        p,
        p,
        p,
        p,
        i64,
        i64,
        i64,
        c_int,
    ]  # emissions, transitions, start, end, mask, B, T, K, per-edge
    signatures: dict[str, tuple[list[Any], Any]] = {
        "forward_backward": ([*chain, p, p, p, p, p, c_int], None),
        "nll_grad": ([*chain, p, p, p, p, p, p, p, c_int], i64),
        "scale_grads": ([p, p, p, p, p, i64, i64, i64, c_int, p, p, p, p], None),
        "viterbi": ([*chain, p, p, c_int], None),
        "edge_marginals": ([*chain, p, p, p, c_int], None),
        "max_sums": ([*chain, p, p, c_int], None),
        "topk": ([*chain, i64, p, p, c_int], None),
        "sample": ([p, p, p, p, i64, i64, i64, i64, p, c_int], None),
    }
    for suffix in ("f32", "f64"):
        for name, (argtypes, restype) in signatures.items():
            fn = getattr(cdll, f"crfhead_{name}_{suffix}")
            fn.argtypes = argtypes
            fn.restype = restype
    cdll.crfhead_torch_threads.argtypes = [c_int]
    cdll.crfhead_torch_threads.restype = c_int
    register_thread_setter(cdll.crfhead_torch_threads)
    cdll.crfhead_pool_adaptive.argtypes = [c_int]
    cdll.crfhead_pool_adaptive.restype = None
    return cdll


def _load() -> ctypes.CDLL | None:
    global _lib, _error
    if _lib is not None:  # loaded: no lock on the hot path
        return _lib
    with _lock:
        if _lib is None and _error is None:
            try:
                _lib = _build()
            except (RuntimeError, OSError, subprocess.SubprocessError) as err:
                _error = str(err)
        return _lib


def uses_openmp() -> bool:
    """Whether the loaded kernel spreads work over OpenMP threads (else ``std::thread`` workers)."""
    lib = _load()
    return bool(lib is not None and lib.crfhead_openmp())


def status() -> tuple[bool, str]:
    """Whether the kernel is built and loadable (building it if needed), and if not, why."""
    lib = _load()
    return lib is not None, _error or ""


def lanes(dtype: torch.dtype) -> int:
    """Sequences per SIMD block of the shared-transition kernel: 8 for float32, 4 for float64."""
    return 4 if dtype == torch.float64 else 8


def threads_for(
    B: int, T: int, K: int, *, per_sequence: bool = False, dtype: torch.dtype = torch.float32
) -> int:
    """How many threads one call on ``(B, T, K)`` potentials uses.

    The kernel's tasks are blocks of :func:`lanes` sequences (shared or per-edge transitions; one
    sequence each, ``per_sequence``, for the max-sums, k-best and sampling), so more threads than
    tasks would idle. ``$CRFHEAD_CPU_THREADS``, if set, is the count
    (at most one per task); otherwise one thread below :data:`PARALLEL_WORK`, else torch's intra-op
    count on the calling thread (``torch.get_num_threads()``), at most one per task.

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
        _load()
    return _serial_torch(serial)


def _threads(B: int, T: int, K: int, per_sequence: bool, dtype: torch.dtype) -> int:
    """:func:`threads_for` one call (computed in the emissions' dtype).

    Also tells the kernel whether the count is explicit (``$CRFHEAD_CPU_THREADS``: no backing off).
    """
    threads = threads_for(B, T, K, per_sequence=per_sequence, dtype=dtype)
    if threads > 1:
        _library().crfhead_pool_adaptive(int(not os.environ.get("CRFHEAD_CPU_THREADS")))
    return threads


def _suffix(dtype: torch.dtype) -> str:
    if dtype == torch.float32:
        return "f32"
    if dtype == torch.float64:
        return "f64"
    raise ValueError(f"the cpu backend computes in float32 or float64, got {dtype}")


def _library() -> ctypes.CDLL:
    lib = _lib if _lib is not None else _load()
    if lib is None:
        raise RuntimeError(f"crfhead cpu backend unavailable: {_error}")
    return lib


def _c(x: Tensor, dtype: torch.dtype) -> Tensor:
    """``x`` as a contiguous tensor of ``dtype`` (no copy when it already is one)."""
    if x.dtype != dtype:
        x = x.to(dtype)
    return x if x.is_contiguous() else x.contiguous()


Chain = tuple[Tensor, Tensor, Tensor, Tensor, Tensor]
"""``(emissions, transitions, start, end, mask)``: the raw inputs of every native entry point."""


def _args(chain: Chain) -> tuple[list[Any], Chain]:
    """C arguments of the potentials, and the contiguous tensors that must outlive the call."""
    em = chain[0]
    dtype = em.dtype
    em, trans, start, end = (_c(x, dtype) for x in chain[:4])
    mask = _c(chain[4], torch.bool).view(torch.uint8)
    B, T, K = em.shape
    args = [em.data_ptr(), trans.data_ptr(), start.data_ptr(), end.data_ptr(), mask.data_ptr()]
    return [*args, B, T, K, int(trans.dim() == 4)], (em, trans, start, end, mask)


def _ptr(x: Tensor | None) -> int | None:
    return None if x is None else x.data_ptr()


def part_shapes(
    B: Any, T: Any, K: Any, per_position: bool, grads: bool, edges: bool
) -> tuple[tuple[Any, ...], ...]:
    """Shapes of ``(node, edge, first, last)``; ``(0,)`` for a part not asked for.

    Symbolic sizes welcome (the custom ops' fake implementations use it too).
    """
    none: tuple[Any, ...] = (0,)
    if not grads:
        return none, none, none, none
    edge = none
    if edges:
        edges_per_row = torch.sym_max(T - 1, 0)  # type: ignore[no-untyped-call]
        edge = (B, edges_per_row, K, K) if per_position else (B, K, K)
    return (B, T, K), edge, (B, K), (B, K)


def _outputs(
    chain: Chain, dtype: torch.dtype, grads: bool, edges: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Uninitialised outputs ``(value, node, edge, first, last)`` of a native call (empty when unasked)."""
    B, T, K = chain[0].shape
    shapes = part_shapes(B, T, K, chain[1].dim() == 4, grads, edges)
    new = torch.empty
    node, edge, first, last = (new(s, dtype=dtype) for s in shapes)
    return new(B, dtype=dtype), node, edge, first, last


def _opt(x: Tensor) -> Tensor | None:
    """A part as :class:`Moments` holds it: ``None`` for the empty placeholder of one not asked for."""
    return None if x.dim() == 1 and x.shape[0] == 0 else x


def _moments(parts: tuple[Tensor, ...]) -> Moments:
    value, node, edge, first, last = parts
    return Moments(value, _opt(node), _opt(edge), _opt(first), _opt(last))


def fb_parts(
    chain: Chain, marginals: bool, edges: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The native forward-backward on raw tensors: ``(value, node, edge, first, last)``.

    Parts not asked for are empty ``(0,)`` tensors (what the ``crfhead::forward_backward`` op returns).
    """
    lib = _library()
    B, T, K = chain[0].shape
    threads = _threads(B, T, K, False, chain[0].dtype)
    with serial_torch(threads == 1):
        args, keep = _args(chain)
        dtype = keep[0].dtype
        out = _outputs(keep, dtype, marginals or edges, edges)
        fn = getattr(lib, f"crfhead_forward_backward_{_suffix(dtype)}")
        fn(*args, *(x.data_ptr() if x.numel() else None for x in out), threads)
    del keep
    return out


def forward_backward(
    pot: ChainPotentials, *, marginals: bool = True, edges: bool = False
) -> Moments:
    """One fused forward-backward: ``log Z`` ``(B,)`` and, if asked, its gradient's parts.

    See :class:`~crfhead.engine.scan.Moments`; the results carry no autograd history. While
    ``torch.compile``/``torch.export`` trace, the ``crfhead::forward_backward`` custom op.
    """
    chain = (pot.emissions, pot.transitions, pot.start, pot.end, pot.mask)
    if is_tracing():
        return _moments(ops.forward_backward_op(*chain, marginals, edges))
    return _moments(fb_parts(chain, marginals, edges))


def _raise_bad_tag(tags: Tensor, index: int, K: int) -> None:
    b, t = divmod(index, tags.shape[1])
    raise ValueError(
        f"tag {int(tags[b, t])} at unmasked position (batch {b}, time {t}) is out of range [0, {K})"
    )


def nll_parts(
    chain: Chain, tags: Tensor, grads: bool, edges: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The native loss on raw tensors: ``(loss, gold, node, edge, first, last)``.

    Parts not asked for are empty ``(0,)`` tensors (what the ``crfhead::nll`` op returns).

    Raises:
        ValueError: an unmasked tag outside ``[0, K)`` (checked by the kernel, before any work).
    """
    lib = _library()
    B, T, K = chain[0].shape
    threads = _threads(B, T, K, False, chain[0].dtype)
    with serial_torch(threads == 1):
        args, keep = _args(chain)
        dtype = keep[0].dtype
        value, node, edge, first, last = _outputs(keep, dtype, grads, edges)
        gold = torch.empty(B, dtype=dtype)
        tags = _c(tags, torch.long)
        fn = getattr(lib, f"crfhead_nll_grad_{_suffix(dtype)}")
        bad = fn(
            *args,
            tags.data_ptr(),
            value.data_ptr(),
            gold.data_ptr(),
            *(x.data_ptr() if x.numel() else None for x in (node, edge, first, last)),
            threads,
        )
    del keep
    if bad >= 0:
        _raise_bad_tag(tags, bad, K)
    return value, gold, node, edge, first, last


def nll(
    pot: ChainPotentials, tags: Tensor, *, grads: bool = False, edges: bool = False
) -> tuple[Moments, Tensor]:
    """The loss ``log Z - score(tags)`` with its gradient's parts, and the gold score ``(B,)``.

    Args:
        pot: the chain potentials.
        tags: ``(B, T)`` integer gold tags, read at unmasked positions only.
        grads: also return the gradient's parts (marginals minus gold counts).
        edges: with ``grads``, the part for the transitions too.

    Raises:
        ValueError: an unmasked tag outside ``[0, K)`` (checked by the kernel, before any work).
    """
    chain = (pot.emissions, pot.transitions, pot.start, pot.end, pot.mask)
    if is_tracing():
        value, gold, *parts = ops.nll_op(*chain, tags, grads, edges)
    else:
        value, gold, *parts = nll_parts(chain, tags, grads, edges)
    return _moments((value, *parts)), gold


def scale_grads(
    grad: Tensor, m: Moments, per_position: bool, need: tuple[bool, ...]
) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
    """Gradients of ``sum_b grad[b] * m.value[b]`` to (emissions, transitions, start, end), natively."""
    node, edge, first, last = m.node, m.edge, m.first, m.last
    assert node is not None and first is not None and last is not None
    B, T, K = node.shape
    dtype = node.dtype
    tr_shape = (B, max(T - 1, 0), K, K) if per_position else (K, K)
    d_em = torch.empty(B, T, K, dtype=dtype) if need[0] else None
    d_tr = torch.empty(tr_shape, dtype=dtype) if need[1] and edge is not None else None
    d_start = torch.empty(K, dtype=dtype) if need[2] else None
    d_end = torch.empty(K, dtype=dtype) if need[3] else None
    grad = _c(grad, dtype)
    getattr(_library(), f"crfhead_scale_grads_{_suffix(dtype)}")(
        grad.data_ptr(),
        node.data_ptr(),
        _ptr(edge),
        first.data_ptr(),
        last.data_ptr(),
        B,
        T,
        K,
        int(per_position),
        _ptr(d_em),
        _ptr(d_tr),
        _ptr(d_start),
        _ptr(d_end),
    )
    return d_em, d_tr, d_start, d_end


def marginals(pot: ChainPotentials) -> Tensor:
    """Node marginals ``(B, T, K)`` (no autograd history; the ``crfhead::marginals`` op while tracing)."""
    chain = (pot.emissions, pot.transitions, pot.start, pot.end, pot.mask)
    if is_tracing():
        node: Tensor = ops.marginals_op(*chain)
        return node
    return fb_parts(chain, True, False)[1]


def viterbi_parts(chain: Chain) -> tuple[Tensor, Tensor]:
    """The native Viterbi on raw tensors: best scores ``(B,)`` and paths ``(B, T)`` int64."""
    lib = _library()
    B, T, K = chain[0].shape
    threads = _threads(B, T, K, False, chain[0].dtype)
    with serial_torch(threads == 1):
        args, keep = _args(chain)
        em = keep[0]
        scores = torch.empty(B, dtype=em.dtype)  # the kernel writes every entry
        paths = torch.empty((B, T), dtype=torch.long)
        fn = getattr(lib, f"crfhead_viterbi_{_suffix(em.dtype)}")
        fn(*args, scores.data_ptr(), paths.data_ptr(), threads)
    del keep
    return scores, paths


def viterbi(pot: ChainPotentials) -> tuple[Tensor, Tensor]:
    """Best scores ``(B,)`` and paths ``(B, T)`` int64 (``-1`` where masked); ties to the lowest tag.

    No autograd history; the ``crfhead::viterbi`` op while tracing.
    """
    chain = (pot.emissions, pot.transitions, pot.start, pot.end, pot.mask)
    if is_tracing():
        best: tuple[Tensor, Tensor] = ops.viterbi_op(*(x.detach() for x in chain))
        return best
    return viterbi_parts(chain)


def _chain(pot: ChainPotentials) -> Chain:
    return (
        pot.emissions.detach(),
        pot.transitions.detach(),
        pot.start.detach(),
        pot.end.detach(),
        pot.mask,
    )


def glue(pot: ChainPotentials) -> contextlib.AbstractContextManager[None]:
    """The context for torch's operations that combine this kernel's results on ``pot``.

    They run on one thread below 4M values a tensor (``B * T * K``), as the input checks do (see
    :func:`serial_torch`: torch splits element-wise work over 32K values across threads, and on a
    busy machine that join waits for a descheduled one).
    """
    B, T, K = pot.shape
    return serial_torch(B * T * K < 1 << 22)


def edge_marginals_parts(chain: Chain) -> tuple[Tensor, Tensor, Tensor]:
    """The native forward-backward with per-edge output, also with shared transitions.

    Returns ``log Z`` ``(B,)``, node ``(B, T, K)`` and edge marginals ``(B, T-1, K, K)`` (entry
    ``t-1``: the edge entering ``t``).
    """
    lib = _library()
    B, T, K = chain[0].shape
    threads = _threads(B, T, K, False, chain[0].dtype)
    with serial_torch(threads == 1):
        args, keep = _args(chain)
        dtype = keep[0].dtype
        logz = torch.empty(B, dtype=dtype)
        node = torch.empty(B, T, K, dtype=dtype)
        edge = torch.empty(B, max(T - 1, 0), K, K, dtype=dtype)
        fn = getattr(lib, f"crfhead_edge_marginals_{_suffix(dtype)}")
        fn(
            *args,
            logz.data_ptr(),
            node.data_ptr(),
            edge.data_ptr() if edge.numel() else None,
            threads,
        )
    del keep
    return logz, node, edge


def edge_marginals(pot: ChainPotentials) -> Tensor:
    """Edge marginals ``(B, T-1, K, K)`` in one fused call (no autograd history)."""
    return edge_marginals_parts(_chain(pot))[2]


def _per_sequence_threads(B: int, work: int, dtype: torch.dtype) -> int:
    """:func:`_threads` for a kernel whose tasks are single sequences of ``work`` operations each."""
    return _threads(B, work, 1, True, dtype)


def max_sums(pot: ChainPotentials) -> tuple[Tensor, Tensor]:
    """``(sums, best)``: the best score through each ``(t, k)`` and the best score.

    ``sums`` ``(B, T, K)`` is ``-inf`` where no valid path passes or ``t`` is masked; ``best``
    ``(B,)`` is 0 for an empty row.
    """
    lib = _library()
    B, T, K = pot.shape
    threads = _threads(B, T, K, False, pot.emissions.dtype)
    with serial_torch(threads == 1):
        args, keep = _args(_chain(pot))
        dtype = keep[0].dtype
        sums = torch.empty(B, T, K, dtype=dtype)
        best = torch.empty(B, dtype=dtype)
        getattr(lib, f"crfhead_max_sums_{_suffix(dtype)}")(
            *args, sums.data_ptr(), best.data_ptr(), threads
        )
    del keep
    return sums, best


def topk(pot: ChainPotentials, k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` best paths: scores ``(B, k)`` and paths ``(B, k, T)`` (missing: ``-inf``, ``-1``)."""
    lib = _library()
    B, T, K = pot.shape
    threads = _per_sequence_threads(B, T * K * K * k, pot.emissions.dtype)
    with serial_torch(threads == 1):
        args, keep = _args(_chain(pot))
        dtype = keep[0].dtype
        scores = torch.empty(B, k, dtype=dtype)
        paths = torch.empty(B, k, T, dtype=torch.long)
        getattr(lib, f"crfhead_topk_{_suffix(dtype)}")(
            *args, k, scores.data_ptr(), paths.data_ptr(), threads
        )
    del keep
    return scores, paths


def sample(pot: ChainPotentials, num_samples: int, generator: torch.Generator | None) -> Tensor:
    """``(S, B, T)`` exact samples: the fused edge marginals, then one native pass of draws."""
    chain = _chain(pot)
    _, node, edge = edge_marginals_parts(chain)
    B, T, K = node.shape
    with glue(pot):
        u = torch.rand((num_samples, B, T), generator=generator, dtype=torch.float64)
    paths = torch.empty(num_samples, B, T, dtype=torch.long)
    mask = _c(pot.mask, torch.bool).view(torch.uint8)
    threads = _per_sequence_threads(B, num_samples * T * K, node.dtype)
    getattr(_library(), f"crfhead_sample_{_suffix(node.dtype)}")(
        node.data_ptr(),
        edge.data_ptr() if edge.numel() else None,
        mask.data_ptr(),
        u.data_ptr(),
        num_samples,
        B,
        T,
        K,
        paths.data_ptr(),
        threads,
    )
    return paths


from crfhead.engine.backends import ops  # noqa: E402  (registers the custom ops)

ops.register_native(sys.modules[__name__])
