"""Dropout (Srivastava et al. 2014) whose keep mask costs less than ``nn.Dropout``'s on the CPU.

``nn.Dropout`` on the CPU draws its mask with ``bernoulli_`` (about 5 ms for the ``(32, 35, 400)``
output of a BiLSTM, one thread), and even ``rand`` then a comparison costs 1.5 ms there: a mask draws
one Mersenne-twister number per element. Float32 CPU tensors therefore go through one native pass
(``crfhead/engine/backends/csrc/dropout.cpp``, built on first use by the cpu backend's
:func:`~crfhead.engine.backends.cpu.native.build_library`, called through ctypes): an element is kept
when a keyed integer hash of its index is at least a threshold, so the mask needs no generator
state, the forward pass writes the output directly and the backward pass recomputes the mask from
the key instead of keeping it (0.12 ms for that tensor). The key is drawn from torch's generator, so
``torch.manual_seed`` reproduces a run. An element is kept with probability ``1 - p`` up to
``2**-32`` and kept elements are scaled by the exact inverse of that probability, so the output's
expectation is the input, as ``nn.Dropout``'s is.

Elsewhere (other dtypes and devices, tensors of ``2**32`` elements or more, or no compiler) an
element is kept when a uniform draw in ``[0, 1)`` is at least ``p`` (``rand``, three to four times
cheaper than ``bernoulli_``), and on other devices ``nn.Dropout`` itself runs.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

__all__ = ["Dropout", "dropout", "native_status"]

_SOURCE = Path(__file__).resolve().parent.parent / "engine" / "backends" / "csrc" / "dropout.cpp"
_ABI = 1
_lock = threading.Lock()
_error: list[str] = []


@functools.cache
def _library() -> ctypes.CDLL | None:
    """The native pass (built on first use), or ``None`` where it cannot be built or loaded."""
    from crfhead.engine.backends.cpu.native import FLAGS, build_library

    with _lock:
        try:
            lib = ctypes.CDLL(str(build_library(_SOURCE, FLAGS, about="~2 s")))
        except (RuntimeError, OSError) as err:
            _error.append(str(err))
            return None
        lib.crfhead_dropout_abi_version.restype = ctypes.c_int
        if lib.crfhead_dropout_abi_version() != _ABI:
            _error.append(
                f"dropout kernel ABI {lib.crfhead_dropout_abi_version()}, expected {_ABI}"
            )
            return None
        lib.crfhead_dropout.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int64,
            ctypes.c_uint64,
            ctypes.c_uint32,
            ctypes.c_float,
        ]
        lib.crfhead_dropout.restype = None
        return lib


def native_status() -> tuple[bool, str]:
    """Whether the native pass is built and loadable here (building it if needed), and if not, why."""
    ok = _library() is not None
    return ok, "" if ok else (_error[-1] if _error else "unknown")


def _apply(lib: ctypes.CDLL, x: Tensor, seed: int, threshold: int, scale: float) -> Tensor:
    out = torch.empty_like(x)
    lib.crfhead_dropout(x.data_ptr(), out.data_ptr(), x.numel(), seed, threshold, scale)
    return out


class _NativeDropout(torch.autograd.Function):
    """The native pass; its backward is the same pass, with the same key, on the gradient."""

    @staticmethod
    def forward(
        ctx: Any, x: Tensor, lib: ctypes.CDLL, seed: int, threshold: int, scale: float
    ) -> Tensor:
        ctx.native = (lib, seed, threshold, scale)
        return _apply(lib, x, seed, threshold, scale)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None, None]:
        lib, seed, threshold, scale = ctx.native
        return _apply(lib, grad.contiguous(), seed, threshold, scale), None, None, None, None


def _native(x: Tensor, p: float) -> Tensor | None:
    """:func:`dropout` by the native pass, or ``None`` where it does not take ``x``."""
    if x.dtype != torch.float32 or not x.is_contiguous() or x.numel() >= 1 << 32:
        return None
    lib = _library()
    if lib is None:
        return None
    threshold = min(round(p * 2.0**32), 2**32 - 1)
    scale = 2.0**32 / (2.0**32 - threshold)  # the inverse of the keep probability, exactly
    seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))
    if torch.is_grad_enabled() and x.requires_grad:
        out: Tensor = _NativeDropout.apply(x, lib, seed, threshold, scale)  # type: ignore[no-untyped-call]
        return out
    return _apply(lib, x, seed, threshold, scale)


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """``x`` with each element zeroed with probability ``p`` and the rest scaled by ``1 / (1 - p)``.

    Args:
        x: any float tensor.
        p: the drop probability, in ``[0, 1]``.
        training: ``False``: ``x`` itself.
    """
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p == 1.0:
        return nn.functional.dropout(x, p, training)
    native = _native(x, p)
    if native is not None:
        return native
    scale = torch.rand(x.shape, dtype=torch.float32, device=x.device).ge_(p)
    if x.dtype != torch.float32:
        scale = scale.to(x.dtype)
    return x * scale.mul_(1.0 / (1.0 - p))


class Dropout(nn.Dropout):
    """``nn.Dropout`` (same arguments, state and ``repr``) with :func:`dropout`'s mask on the CPU."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: D102
        if self.inplace:
            return super().forward(input)
        return dropout(input, self.p, self.training)
