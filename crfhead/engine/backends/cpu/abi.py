"""The C ABI of ``csrc/chain_cpu.cpp``: its one signature table, and the ctypes wrappers generated from it.

Every entry point the kernel exports is declared once, in :data:`SIGNATURES` (one per dtype,
``crfhead_<name>_f32`` and ``crfhead_<name>_f64``) or :data:`HELPERS` (dtype-free), with the C
parameter names: a bare name is a pointer, ``name:i64`` an ``int64_t``, ``name:int`` an ``int``. A
leading ``*CHAIN`` is the potentials (:data:`CHAIN`), which a wrapper takes as one
:data:`~crfhead.engine.potentials.Chain` tuple of contiguous tensors. :func:`bind` sets the ctypes
prototypes from the table and returns one :class:`Entry` per name; a test checks the table against
the C++ exports. :data:`ABI` is the version the library must report; change it with any change of
a signature here and in the C++ file together.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from crfhead.engine.potentials import Chain

__all__ = ["ABI", "CHAIN", "HELPERS", "SIGNATURES", "Entry", "bind", "ctype"]

ABI = 8
"""What ``crfhead_abi_version()`` must return."""

CHAIN = ("em", "trans", "start", "end", "mask", "B:i64", "T:i64", "K:i64", "per_position:int")
"""The potentials' parameters, first in every chain entry point."""

SIGNATURES: Mapping[str, tuple[tuple[str, ...], str]] = {
    "forward_backward": (
        (*CHAIN, "logz", "node", "edge", "first", "last", "num_threads:int"),
        "void",
    ),
    "nll_grad": (
        (*CHAIN, "tags", "loss", "gold", "node", "edge", "first", "last", "num_threads:int"),
        "i64",
    ),
    "scale_grads": (
        (
            *("grad", "node", "edge", "first", "last"),
            *("B:i64", "T:i64", "K:i64", "per_position:int"),
            *("d_em", "d_tr", "d_start", "d_end"),
        ),
        "void",
    ),
    "viterbi": ((*CHAIN, "scores", "paths", "num_threads:int"), "void"),
    "edge_marginals": ((*CHAIN, "logz", "node", "edge", "num_threads:int"), "void"),
    "max_sums": ((*CHAIN, "sums", "best", "num_threads:int"), "void"),
    "topk": ((*CHAIN, "R:i64", "scores", "paths", "num_threads:int"), "void"),
    "first_non_finite": (CHAIN, "i64"),
    "sample": (
        (
            *("node", "edge", "mask", "u", "num_samples:i64"),
            *("B:i64", "T:i64", "K:i64", "paths", "num_threads:int"),
        ),
        "void",
    ),
}
"""Entry points defined for float32 and float64: name -> (C parameters, C return type)."""

HELPERS: Mapping[str, tuple[tuple[str, ...], str]] = {
    "abi_version": ((), "int"),
    "openmp": ((), "int"),
    "torch_threads": (("n:int",), "int"),
    "pool_adaptive": (("on:int",), "void"),
}
"""Entry points without a dtype, called ``crfhead_<name>``."""

_CTYPES: Mapping[str, Any] = {
    "ptr": ctypes.c_void_p,
    "i64": ctypes.c_int64,
    "int": ctypes.c_int,
    "void": None,
}


def ctype(param: str) -> str:
    """The kind of a parameter of the table: ``"ptr"``, ``"i64"`` or ``"int"``."""
    return param.partition(":")[2] or "ptr"


def _prototype(fn: Any, params: tuple[str, ...], restype: str) -> Any:
    fn.argtypes = [_CTYPES[ctype(p)] for p in params]
    fn.restype = _CTYPES[restype]
    return fn


def _pointer(x: Tensor | int | None) -> int | None:
    """A tensor's data pointer (``NULL`` for an empty one: a part not asked for), else ``x``."""
    if isinstance(x, Tensor):
        return x.data_ptr() if x.numel() else None
    return x


class Entry:
    """One entry point of :data:`SIGNATURES`, both dtypes; called with tensors, ints and ``None``.

    A chain entry takes the :data:`~crfhead.engine.potentials.Chain` first (contiguous, the mask as
    bool or ``uint8`` bytes), then the rest of its parameters; other tensors are passed as their data pointers (``NULL``
    when empty: a part not asked for). The dtype
    of the first tensor chooses ``_f32`` or ``_f64``.
    """

    __slots__ = ("_chain", "_f32", "_f64", "name")

    def __init__(self, cdll: ctypes.CDLL, name: str) -> None:
        params, restype = SIGNATURES[name]
        self.name = name
        self._chain = params[: len(CHAIN)] == CHAIN
        self._f32 = _prototype(getattr(cdll, f"crfhead_{name}_f32"), params, restype)
        self._f64 = _prototype(getattr(cdll, f"crfhead_{name}_f64"), params, restype)

    def _fn(self, dtype: torch.dtype) -> Any:
        if dtype == torch.float32:
            return self._f32
        if dtype == torch.float64:
            return self._f64
        raise ValueError(f"the cpu backend computes in float32 or float64, got {dtype}")

    def __call__(self, *args: Any) -> Any:
        """Call the entry point (see the class docstring); returns its C result."""
        if self._chain:
            chain: Chain = args[0]
            em, trans, start, end, mask = chain
            B, T, K = em.shape
            fn = self._f32 if em.dtype == torch.float32 else self._fn(em.dtype)
            return fn(
                *(em.data_ptr(), trans.data_ptr(), start.data_ptr(), end.data_ptr()),
                *(mask.data_ptr(), B, T, K, int(trans.dim() == 4)),
                *[_pointer(x) for x in args[1:]],
            )
        return self._fn(args[0].dtype)(*map(_pointer, args))


def bind(cdll: ctypes.CDLL) -> dict[str, Any]:
    """Set the prototypes of every entry point of ``cdll``: one :class:`Entry` (or helper) per name."""
    entries: dict[str, Any] = {name: Entry(cdll, name) for name in SIGNATURES}
    for name, (params, restype) in HELPERS.items():
        entries[name] = _prototype(getattr(cdll, f"crfhead_{name}"), params, restype)
    return entries
