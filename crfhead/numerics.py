"""Numerical conventions shared by every dynamic program in crfhead.

* ``IMPOSSIBLE`` is the one log-potential that means "this never happens" (a forbidden transition,
  a masked-out tag). It is finite in float16, bfloat16, float32 and float64, so that ``0 * IMPOSSIBLE``
  is 0 and no gradient becomes NaN, and it is so far below any real score that ``exp(IMPOSSIBLE)`` is
  exactly 0 in float32 and float64: a partition function over a constrained chain equals the sum over
  the valid paths only.
* The recursions run in float32 even when emissions arrive in bfloat16/float16 or under autocast, and in
  float64 when given float64 (see :func:`compute_dtype` and :func:`no_autocast`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = [
    "EXP_FLOOR",
    "IMPOSSIBLE",
    "compute_dtype",
    "is_impossible",
    "is_tracing",
    "logsumexp",
    "no_autocast",
    "softmax",
]

IMPOSSIBLE: float = -1.0e4
"""Log-potential of an impossible event: finite in every floating dtype, ``exp`` of it is 0."""


EXP_FLOOR: float = -87.0
"""Arguments of ``exp`` are clamped here (``exp(-87)`` ≈ 1.6e-38 is still a normal float32).

On x86 CPUs the vectorised ``exp`` falls into a slow path (10-30x slower) for arguments below about
-87, where results underflow or are denormal, which every ``IMPOSSIBLE`` score and every sharply peaked
distribution produces. A term ``exp(-87)`` times smaller than the largest changes a sum by less than the
float64 epsilon, so clamping there is exact to machine precision in float32 and float64.
"""


def logsumexp(x: torch.Tensor, dim: int, keepdim: bool = False) -> torch.Tensor:
    """``log(sum(exp(x), dim))``, shifted by the max, with ``exp``'s arguments floored at ``EXP_FLOOR``."""
    m = x.amax(dim=dim, keepdim=True)
    out = (x - m).clamp(min=EXP_FLOOR).exp().sum(dim=dim, keepdim=True).log() + m
    return out if keepdim else out.squeeze(dim)


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``softmax(x, dim)``; entries more than ``-EXP_FLOOR`` below the max are exactly 0."""
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = torch.where(shifted < EXP_FLOOR, 0.0, shifted.clamp(min=EXP_FLOOR).exp())
    return e / e.sum(dim=dim, keepdim=True)


def is_impossible(score: torch.Tensor) -> torch.Tensor:
    """Whether a path score contains at least one ``IMPOSSIBLE`` term (or is ``-inf``).

    Real scores are far above ``IMPOSSIBLE / 2``; a path through one forbidden event is below it.
    """
    return score <= IMPOSSIBLE / 2


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the chain recursions run in for inputs of ``dtype``: float64 stays, the rest is float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


@contextlib.contextmanager
def no_autocast(device: torch.device) -> Iterator[None]:
    """Disable autocast on ``device`` for the duration (a no-op when autocast is off)."""
    if torch.is_autocast_enabled(device.type):
        with torch.autocast(device_type=device.type, enabled=False):
            yield
    else:
        yield


def is_tracing() -> bool:
    """Whether ``torch.compile``/``torch.export`` is tracing (data-dependent checks are skipped)."""
    return bool(torch.compiler.is_compiling())
