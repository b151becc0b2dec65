"""Boykov–Kolmogorov max flow with search-tree reuse, native, for the 2-slave pattern slave (Qian & Liu, TACL 2014).

The dual decomposition solves one minimum cut per iteration on one graph whose *terminal*
capacities alone change (they carry the multipliers θ). Boykov & Kolmogorov's augmenting-path
algorithm (PAMI 2004) keeps two search trees; Kohli & Torr's dynamic graph cuts (PAMI 2007) keep
the flow and both trees between solves and revisit only the nodes whose terminal capacity changed,
so an iteration costs little more than the flow that actually moves. The kernel is
``crfhead/engine/backends/csrc/maxflow.cpp``, built by the cpu backend's
:func:`~crfhead.engine.backends.cpu.native.build_library` (system compiler, cached by hash in
``$CRFHEAD_CACHE``, fingerprinted, written atomically) and called through ctypes; where it cannot
be built :func:`available` is ``False`` and :func:`~crfhead.higher_order.pseudo_boolean.maximize`
falls back to scipy's Dinic.

**Why the bound is proven although capacities are float64.** The kernel returns the residual graph
(``tr_u``, signed residual terminal capacities; ``r_a`` on the pairwise arcs, never negative: a
subtraction ``r - δ`` with ``δ <= r`` is exact at 0 and otherwise positive) and never a flow
value accumulated in floating point. With ``E(x) = -c + Σ_u w_u x_u + Σ_a c_a [x_tail = 0][x_head = 1]``
(``-f``, the energy the graph represents; ``w`` the given terminal capacities) and the residual
energy ``R(x) = Σ_u (tr_u x_u + max(0, -tr_u)) + Σ_a r_a [x_tail = 0][x_head = 1] >= 0``, the
*exact* real-number identity, for the stored floats whatever rounding produced them, is

    E(x) - R(x) = -c - Σ_u max(0, -tr_u) + Σ_u e_u x_u - Σ_{sister arcs a, b} (p_a + p_b) x_u x_v,

with the read-back flow ``p_a = c_a - r_a`` and the excess ``e_u = w_u - tr_u + Σ_{a into u} p_a``
(both 0-balanced in exact arithmetic: ``e = 0`` is conservation, ``p_a + p_b = 0`` skew
symmetry). Hence for every ``x``: ``E(x) >= -c - Σ max(0, -tr) - Σ max(0, -e_u) - Σ max(0, p_a + p_b)``,
and ``max f <= c + sink_left + imbalance`` (:meth:`Maxflow.solve`'s ``parts``). Only this last
sum is computed in floating point; :func:`bound` adds ``4ε (n + m + 8)`` times the magnitude of its
terms and of the function's coefficients (the ``w`` themselves are rounded sums), a strict
over-estimate of the round-off of sums of at most ``n + m + 2`` terms each. So the bound is valid
without exact arithmetic, and it is tight: the imbalance is round-off, ``~ε`` of the magnitudes.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from pathlib import Path

import numpy as np

__all__ = ["SOURCE", "Maxflow", "available", "bound", "status"]

SOURCE = Path(__file__).resolve().parent.parent / "engine" / "backends" / "csrc" / "maxflow.cpp"
_ABI = 1
_EPS = float(np.finfo(np.float64).eps)
# -O2 rather than the chain kernel's -O3: the loop is pointer chasing, and the build is faster.
_FLAGS = ("-O2", "-fno-math-errno", "-std=c++17", "-shared", "-fPIC")

_lock = threading.Lock()
_error: list[str] = []

_P = ctypes.c_void_p
_I64 = ctypes.c_int64


@functools.cache
def _library() -> ctypes.CDLL | None:
    """The loaded kernel (built on first use), or ``None`` where it cannot be built or loaded."""
    from crfhead.engine.backends.cpu.native import build_library

    with _lock:
        try:
            lib = ctypes.CDLL(str(build_library(SOURCE, _FLAGS)))
        except (RuntimeError, OSError) as err:
            _error.append(str(err))
            return None
        lib.crfhead_mf_abi_version.restype = ctypes.c_int
        if lib.crfhead_mf_abi_version() != _ABI:
            _error.append(f"maxflow kernel ABI {lib.crfhead_mf_abi_version()}, expected {_ABI}")
            return None
        lib.crfhead_mf_new.argtypes = [_I64, _I64, _P, _P, _P, _P]
        lib.crfhead_mf_new.restype = _P
        lib.crfhead_mf_free.argtypes = [_P]
        lib.crfhead_mf_free.restype = None
        lib.crfhead_mf_scale.argtypes = [_P, ctypes.c_double]
        lib.crfhead_mf_scale.restype = None
        lib.crfhead_mf_solve.argtypes = [_P, _P, _P, _P, ctypes.c_int]
        lib.crfhead_mf_solve.restype = _I64
        return lib


def available() -> bool:
    """Whether the native kernel is built and loadable here (building it on first call)."""
    return _library() is not None


def status() -> tuple[bool, str]:
    """:func:`available`, and why not when it is not."""
    ok = available()
    return ok, "" if ok else (_error[-1] if _error else "unknown")


def _ptr(a: np.ndarray) -> int:
    return int(a.ctypes.data)


class Maxflow:
    """One cut graph held by the kernel: fixed pairwise arcs, terminal capacities set per solve.

    Args:
        n: the nodes.
        tails, heads: ``(m,)`` int64, the pairwise arcs' ends (each pair once, ``tails != heads``).
        forward, backward: ``(m,)`` float64 ``>= 0``, the capacities of ``tail → head`` and of
            ``head → tail``.

    The kernel keeps the flow and both search trees between :meth:`solve` calls (the state is this
    object's: one graph is not to be solved from two threads at once).

    Raises:
        RuntimeError: the kernel is not available (:func:`status` says why).
    """

    def __init__(
        self,
        n: int,
        tails: np.ndarray,
        heads: np.ndarray,
        forward: np.ndarray,
        backward: np.ndarray,
    ) -> None:
        lib = _library()
        if lib is None:
            raise RuntimeError(f"the native max-flow kernel is unavailable: {status()[1]}")
        self._lib = lib
        self.n = int(n)
        self.m = int(tails.shape[0])
        self._arrays = [
            np.ascontiguousarray(tails, dtype=np.int64),
            np.ascontiguousarray(heads, dtype=np.int64),
            np.ascontiguousarray(forward, dtype=np.float64),
            np.ascontiguousarray(backward, dtype=np.float64),
        ]
        self._handle = lib.crfhead_mf_new(self.n, self.m, *(_ptr(a) for a in self._arrays))
        self._x = np.zeros(self.n, dtype=np.uint8)
        self._parts = np.zeros(3, dtype=np.float64)
        self._out = (_ptr(self._x), _ptr(self._parts))  # fixed buffers: their addresses once
        self.visited = 0

    def __reduce__(self) -> tuple[type[Maxflow], tuple[object, ...]]:
        """Copies and pickles rebuild the graph (without the flow and trees: a fresh first solve)."""
        return (Maxflow, (self.n, *self._arrays))

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle:
            self._lib.crfhead_mf_free(handle)
            self._handle = None

    def scale(self, ratio: float) -> None:
        """Multiply every capacity and the flow by ``ratio > 0``; both trees stay valid."""
        if not ratio > 0.0:
            raise ValueError(f"ratio must be > 0, got {ratio}")
        self._lib.crfhead_mf_scale(self._handle, float(ratio))

    def solve(self, w: np.ndarray, reuse: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """The minimum cut for terminal capacities ``w`` ``(n,)`` float64 (``> 0``: ``s → u``, ``< 0``: ``u → t``).

        Returns:
            ``(x, parts)``: ``x`` ``(n,)`` bool, the sink side (the nodes the source cannot reach in
            the final residual graph); ``parts`` ``(3,)``: the residual sink capacity, the flow's
            imbalance and the magnitude of both sums (module docstring; pass them to :func:`bound`).
            :attr:`visited` is the count of nodes the solve started from (all on a fresh start).
        """
        w = np.ascontiguousarray(w, dtype=np.float64)
        if w.shape != (self.n,):
            raise ValueError(f"w must have shape ({self.n},), got {w.shape}")
        self.visited = int(
            self._lib.crfhead_mf_solve(self._handle, _ptr(w), *self._out, int(bool(reuse)))
        )
        return self._x.view(np.bool_).copy(), self._parts.copy()


def bound(constant: float, parts: np.ndarray, magnitude: float, terms: int) -> float:
    """A proven upper bound on ``max f`` from a solve's ``parts`` (module docstring).

    Args:
        constant: ``c``, the function's constant term.
        parts: :meth:`Maxflow.solve`'s second result.
        magnitude: ``|c| + Σ|b| + Σ a`` of the function (the ``w`` are rounded from it).
        terms: ``n + m``, nodes plus pairwise arcs.
    """
    sink_left, imbalance, sums = (float(v) for v in parts)
    value = constant + sink_left + imbalance
    return value + 4.0 * _EPS * (terms + 8) * (magnitude + sums + abs(value))
