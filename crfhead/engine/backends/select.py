"""Which backend runs an engine call: the choice (``auto``, context, environment), availability, the kernel.

See :mod:`crfhead.engine.backends` for what each backend is. Precedence, lowest first: ``auto``, the
environment variable ``CRFHEAD_BACKEND``, the :func:`use_backend` context manager, the ``backend=``
keyword of the engine's functions. ``auto`` picks ``cpu`` for CPU tensors and ``triton`` for CUDA
tensors when they are available, and ``portable`` otherwise, logging once why. Asking explicitly for
an unavailable backend is an error. While ``torch.compile``/``torch.export`` trace CPU tensors,
``auto`` and ``cpu`` run the fused kernel as dispatcher ops (:mod:`~crfhead.engine.backends.cpu.dispatcher`:
no graph break, one exported program for every length), except under ``torch.onnx.export`` (ONNX has
no such ops); otherwise, and on CUDA, the portable backend runs while tracing.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, TypeVar

import torch

from crfhead.numerics import is_tracing, onnx_exporting

__all__ = ["BACKENDS", "available", "kernel", "resolve", "use_backend"]

BACKENDS = ("auto", "portable", "cpu", "triton")
_LOG = logging.getLogger("crfhead")
_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "crfhead_backend", default=None
)
_WARNED: set[str] = set()
_F = TypeVar("_F", bound=Callable[..., object])
_AUTO = {"cpu": ("cpu", "fused CPU kernel"), "cuda": ("triton", "Triton kernels")}
"""What ``auto`` runs on each device type, and how the fallback warning names it."""
_AUTO_READY: dict[torch.device, str] = {}
"""``auto``'s fused backend by device, once it has loaded (a loaded kernel stays loaded)."""


def _check(name: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"unknown crfhead backend {name!r}; choose one of {BACKENDS}")
    return name


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Run the engine with backend ``name`` inside the ``with`` block."""
    token = _CURRENT.set(_check(name))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def available(name: str) -> tuple[bool, str]:
    """Whether backend ``name`` can run here, and if not, why."""
    _check(name)
    if name in ("auto", "portable"):
        return True, ""
    if name == "cpu":
        from crfhead.engine.backends import cpu

        return cpu.status()
    from crfhead.engine.backends import triton

    return triton.status()


def kernel(name: str) -> ModuleType:
    """The module that implements backend ``name`` (``portable``, ``cpu`` or ``triton``), imported on first use.

    What it registers with the op table is read by :func:`crfhead.engine.table.registered`.
    """
    if name == "cpu":
        from crfhead.engine.backends import cpu

        return cpu
    if name == "triton":
        from crfhead.engine.backends import triton

        return triton
    from crfhead.engine.backends import portable

    return portable


def _constant_to_compile(fn: _F) -> _F:
    """``fn`` marked as :func:`torch.compiler.assume_constant_result` marks it, without importing dynamo.

    That decorator imports ``torch._dynamo`` (seconds, and ``import crfhead`` must stay light) only to
    set the one attribute that dynamo reads when it meets a call of ``fn`` while tracing; the
    attribute is set here instead, and ``tests/test_import_hygiene.py`` checks that the decorator
    still sets exactly it.
    """
    setattr(fn, "_dynamo_marked_constant", True)  # noqa: B010 (a private name of torch's)
    return fn


def _warn_once(key: str, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        _LOG.warning(message)


# ``os.environ.get`` of an unset variable raises and catches a KeyError inside, on every engine call:
# the environment's own mapping is read instead (the same data: ``os.environ``'s writes go to it),
# with the public call where an interpreter has no such mapping.
_ENV_DATA: dict[Any, Any] | None = getattr(os.environ, "_data", None)
_ENV_KEY = os.environ.encodekey("CRFHEAD_BACKEND") if _ENV_DATA is not None else None


def _env_backend() -> str | None:
    """``$CRFHEAD_BACKEND``, or ``None`` when unset."""
    if _ENV_DATA is None:
        return os.environ.get("CRFHEAD_BACKEND")
    raw = _ENV_DATA.get(_ENV_KEY)
    return None if raw is None else os.environ.decodevalue(raw)


@_constant_to_compile
def _ambient() -> str:
    """The context's choice, else ``$CRFHEAD_BACKEND``, else ``auto``: read once while tracing.

    A constant to ``torch.compile`` (the graph does not re-check it on later calls).
    """
    return _CURRENT.get() or _env_backend() or "auto"


@_constant_to_compile
def _cpu_kernel_ready() -> bool:
    """Whether the cpu kernel loads (builds it if needed); a constant to ``torch.compile``."""
    return available("cpu")[0]


def _traced(device: torch.device, name: str) -> str:
    """The backend while ``torch.compile``/``torch.export`` trace.

    The cpu kernel's custom ops on CPU tensors (``auto`` or ``cpu``, unless ONNX is exporting), else
    portable.
    """
    if device.type == "cpu" and name in ("auto", "cpu") and not onnx_exporting():
        return "cpu" if _cpu_kernel_ready() else "portable"
    return "portable"


def resolve(
    device: torch.device, requested: str | None = None, *, tracing: bool | None = None
) -> str:
    """The backend to run on tensors of ``device``: ``"portable"``, ``"cpu"`` or ``"triton"``.

    Args:
        device: where the potentials are.
        requested: an explicit choice (the engine functions' ``backend=``), else the context's, else
            ``$CRFHEAD_BACKEND``, else ``"auto"``.
        tracing: whether ``torch.compile``/``torch.export`` trace, if the caller knows (asked here
            otherwise).

    Raises:
        ValueError: an unknown name, or a backend that does not run on ``device``.
        RuntimeError: an explicitly requested backend that is unavailable here (the reason is named).
    """
    if is_tracing() if tracing is None else tracing:
        return _traced(device, _check(requested or _ambient()))
    name = _check(requested or _CURRENT.get() or _env_backend() or "auto")
    if name == "auto":
        ready = _AUTO_READY.get(device)  # by device: hashing one is cheaper than naming its type
        if ready is not None:
            return ready
        fused = _AUTO.get(device.type)
        if fused is None:
            return "portable"
        backend, what = fused
        ok, why = available(backend)
        if ok:
            _AUTO_READY[device] = backend
            return backend
        _warn_once(
            backend,
            f"crfhead: {what} unavailable ({why}); using the portable PyTorch backend (slower)",
        )
        return "portable"
    if name == "portable":
        return name
    if name == "cpu" and device.type != "cpu":
        raise ValueError(f"the cpu backend runs on CPU tensors, got tensors on {device}")
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    if name == "triton" and device.type != "cuda" and not (interpret and device.type == "cpu"):
        raise ValueError(
            f"the triton backend runs on CUDA tensors (or CPU ones with TRITON_INTERPRET=1), got {device}"
        )
    ok, why = available(name)
    if not ok:
        raise RuntimeError(f"crfhead backend {name!r} is unavailable: {why}")
    return name
