"""The native library of the cpu backend: built from ``csrc/chain_cpu.cpp``, cached, validated, loaded.

Why not ``torch.utils.cpp_extension``: the kernel needs raw pointers and a loop, nothing from ATen, and
the torch headers would make the first-use compile several times slower than the plain C++ file; a
ctypes call costs a few microseconds. The library is built with the system compiler (``$CXX``, else
``c++``) into ``$CRFHEAD_CACHE`` (default ``~/.cache/crfhead``), keyed by a hash of the source, the
flags and the CPU model, written atomically so concurrent processes (DDP ranks, test workers) can
race safely. Beside it a ``.sha256`` file records the library's size and hash; a cached library that
does not match it (truncated by a full disk, corrupted, or from before the record existed) is never
loaded, since loading a truncated library kills the process (SIGBUS): it is rebuilt, with a warning.
Where no compiler exists the build fails once, :func:`status` says why, and ``auto`` falls back to
the portable backend with one log line. The build links OpenMP when the compiler has it (see
:data:`OPENMP`; ``CRFHEAD_CPU_OPENMP=0`` opts out).
"""

from __future__ import annotations

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

from crfhead.checks import register_chain_check
from crfhead.engine.backends.cpu import abi
from crfhead.threads import register_thread_setter

__all__ = [
    "FLAGS",
    "NO_OPENMP",
    "OPENMP",
    "SOURCE",
    "build_library",
    "entries",
    "library_path",
    "load",
    "status",
    "uses_openmp",
]

log = logging.getLogger(__name__)

SOURCE = Path(__file__).resolve().parent.parent / "csrc" / "chain_cpu.cpp"
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
that thread (:func:`crfhead.threads.serial_torch`). The kernel's own threads are a pool of its own
either way: an OpenMP region's closing barrier waits for every thread of the team, a scheduler time
slice whenever another process holds the cores."""
NO_OPENMP = ("-fopenmp-simd",)
"""The fallback where the compiler has no OpenMP: the ``omp simd`` hints only (no serial section)."""

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_entries: dict[str, Any] | None = None
_error: str | None = None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") or line.startswith("flags"):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def library_path(
    compiler: str, flags: tuple[str, ...] = FLAGS + OPENMP, source: Path = SOURCE
) -> Path:
    """Where the library built by ``compiler`` with ``flags`` from ``source`` as it is now is cached.

    The name is the source's stem and a hash of the source, the compiler, the flags and the CPU model.
    """
    key = hashlib.sha256()
    for part in (
        source.read_bytes(),
        compiler.encode(),
        " ".join(flags).encode(),
        _cpu_model().encode(),
    ):
        key.update(part)
    cache = Path(os.environ.get("CRFHEAD_CACHE") or Path.home() / ".cache" / "crfhead")
    return cache / f"{source.stem}_{key.hexdigest()[:16]}.so"


def _record(lib: Path) -> Path:
    """The file holding ``lib``'s size and SHA-256."""
    return lib.with_name(lib.name + ".sha256")


def _fingerprint(path: Path) -> str:
    data = path.read_bytes()
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}"


def cached(lib: Path) -> bool:
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


def _compile(
    exe: str, flags: tuple[str, ...], lib: Path, source: Path = SOURCE, about: str = "a few seconds"
) -> None:
    """Compile ``source`` into ``lib`` and record its fingerprint, atomically (processes may race).

    Says so in one line on stderr: the first call that needs the kernel pauses for it.
    """
    what = "the CPU kernel (~10 s" if source == SOURCE else f"{source.name} ({about}"
    print(
        f"crfhead: compiling {what}, once; cached in {lib.parent})",
        file=sys.stderr,
        flush=True,
    )
    lib.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=lib.parent)
    os.close(fd)
    try:
        done = subprocess.run(
            [exe, *flags, str(source), "-o", tmp], capture_output=True, text=True, timeout=600
        )
        if done.returncode != 0:
            raise RuntimeError(f"compiling {source.name} failed: {done.stderr.strip()[-500:]}")
        # The record first: a reader between the two renames sees a mismatch and rebuilds.
        fd, tmp_record = tempfile.mkstemp(suffix=".sha256", dir=lib.parent)
        with os.fdopen(fd, "w") as handle:
            handle.write(_fingerprint(Path(tmp)) + "\n")
        os.replace(tmp_record, _record(lib))
        os.replace(tmp, lib)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _compiler() -> tuple[str, str]:
    """``(name, executable)`` of the C++ compiler (``$CXX``, else ``c++``).

    Raises:
        RuntimeError: there is none.
    """
    compiler = os.environ.get("CXX") or "c++"
    exe = shutil.which(compiler)
    if exe is None:
        raise RuntimeError(f"no C++ compiler found (tried {compiler!r}; set $CXX)")
    return compiler, exe


def build_library(
    source: Path, flags: tuple[str, ...] = FLAGS, about: str = "a few seconds"
) -> Path:
    """The shared library of another kernel ``source``, built with ``flags`` on first use and cached.

    The same cache, key, fingerprint check and atomic write as this backend's own library (module
    docstring); for kernels that need neither OpenMP nor the thread setter. ``about``: how long the
    compilation takes, for the line that says it is running.

    Raises:
        RuntimeError: no compiler, or the compilation failed (its last lines quoted).
    """
    compiler, exe = _compiler()
    lib = library_path(compiler, flags, source)
    if not cached(lib):
        _compile(exe, flags, lib, source, about)
    return lib


def _build() -> Path:
    """The cached library, built first if needed (with OpenMP where the compiler has it)."""
    compiler, exe = _compiler()
    lib = library_path(compiler, FLAGS + OPENMP)
    fallback = library_path(compiler, FLAGS + NO_OPENMP)
    if os.environ.get("CRFHEAD_CPU_OPENMP") == "0":  # opt out (e.g. a clash of OpenMP runtimes)
        lib = fallback
        if not cached(lib):
            _compile(exe, FLAGS + NO_OPENMP, lib)
    elif not cached(lib):
        if cached(fallback):  # OpenMP failed to build here before
            lib = fallback
        else:
            try:
                _compile(exe, FLAGS + OPENMP, lib)
            except (RuntimeError, subprocess.SubprocessError) as err:
                _compile(exe, FLAGS + NO_OPENMP, fallback)
                log.info("crfhead cpu backend built without OpenMP: %s", str(err).splitlines()[-1])
                lib = fallback
    return lib


def _open(path: Path) -> tuple[ctypes.CDLL, dict[str, Any]]:
    """Load the library, check its ABI, bind its entry points and register the thread setter."""
    cdll = ctypes.CDLL(str(path))
    bound = abi.bind(cdll)
    if bound["abi_version"]() != abi.ABI:
        raise RuntimeError(f"{path} has ABI {bound['abi_version']()}, expected {abi.ABI}")
    register_thread_setter(bound["torch_threads"])
    register_chain_check(_chain_check(bound["first_non_finite"]))
    return cdll, bound


def _chain_check(entry: Any) -> Any:
    """The boundary's fused finiteness check (:data:`crfhead.checks.ChainCheck`) by ``entry``.

    It takes CPU tensors of one dtype, float32 or float64, contiguous, of the shapes
    :func:`~crfhead.engine.potentials.make_potentials` accepts, and a contiguous bool mask; others
    are left to torch's reductions (``None``).
    """
    dtypes = (torch.float32, torch.float64)
    cpu = torch.device("cpu")

    def check(em: Tensor, tr: Tensor, st: Tensor, en: Tensor, mask: Tensor) -> int | None:
        dt = em.dtype
        if em.dim() != 3:
            return None
        B, T, K = em.shape
        if (
            (tr.shape != (K, K) and tr.shape != (B, max(T - 1, 0), K, K))
            or st.shape != (K,)
            or en.shape != (K,)
            or mask.shape != (B, T)
            or any(x.device != cpu for x in (em, tr, st, en, mask))
            or dt not in dtypes
            or tr.dtype != dt
            or st.dtype != dt
            or en.dtype != dt
            or mask.dtype != torch.bool
            or not (em.is_contiguous() and tr.is_contiguous() and mask.is_contiguous())
            or not (st.is_contiguous() and en.is_contiguous())
        ):
            return None
        code: int = entry((em, tr, st, en, mask))
        return code

    return check


def load() -> ctypes.CDLL | None:
    """The loaded library (built on first use), or ``None`` where it cannot be built or loaded."""
    global _lib, _entries, _error
    if _lib is not None:  # loaded: no lock on the hot path
        return _lib
    with _lock:
        if _lib is None and _error is None:
            try:
                _lib, _entries = _open(_build())
            except (RuntimeError, OSError, subprocess.SubprocessError) as err:
                _error = str(err)
        return _lib


def entries() -> dict[str, Any]:
    """The bound entry points (:func:`~crfhead.engine.backends.cpu.abi.bind`), loading the library.

    Raises:
        RuntimeError: the library cannot be built or loaded here (the reason is named).
    """
    if _entries is None:
        load()
        if _entries is None:
            raise RuntimeError(f"crfhead cpu backend unavailable: {_error}")
    return _entries


def status() -> tuple[bool, str]:
    """Whether the kernel is built and loadable (building it if needed), and if not, why."""
    lib = load()
    return lib is not None, _error or ""


def uses_openmp() -> bool:
    """Whether the loaded kernel spreads work over OpenMP threads (else ``std::thread`` workers)."""
    return load() is not None and bool(entries()["openmp"]())
