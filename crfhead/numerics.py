"""Numerical conventions shared by every dynamic program in crfhead.

* ``IMPOSSIBLE`` (``-inf``) is the one log-potential that means "this never happens" (a forbidden
  start, transition or end, a masked-out tag). Forbidden is structural: every recursion excludes
  ``-inf`` terms exactly (``exp(-inf) = 0``, never chosen by a max), whatever the magnitude of the
  other scores, and decides "no such path" by the score being ``-inf``, never by a threshold. The
  recursions never form ``-inf - (-inf)`` or ``0 * -inf``: a shift by a maximum uses 0 where that
  maximum is ``-inf`` (:func:`safe_max`), and a sum that is 0 is never divided by.
* The recursions run in float32 even when emissions arrive in bfloat16/float16 or under autocast, and in
  float64 when given float64 (see :func:`compute_dtype` and :func:`no_autocast`).
"""

from __future__ import annotations

import contextlib
import sys
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
    "onnx_exporting",
    "safe_max",
    "softmax",
    "straight_clamp",
    "without_impossible",
]

IMPOSSIBLE: float = float("-inf")
"""Log-potential of an impossible event: ``-inf``, excluded exactly by every dynamic program."""


EXP_FLOOR: float = -87.0
"""Arguments of ``exp`` below this give exactly 0 (``exp(-87)`` ≈ 1.6e-38 is still a normal float32).

On x86 CPUs the vectorised ``exp`` falls into a slow path (10-30x slower) for arguments below about
-87, where results underflow or are denormal, which every sharply peaked distribution produces. A term
``exp(-87)`` times smaller than the largest changes a sum by less than the float64 epsilon, so the
floor is exact to machine precision in float32 and float64.
"""


def safe_max(x: torch.Tensor, dim: int, keepdim: bool = False) -> torch.Tensor:
    """``x.amax(dim)``, with 0 where every entry is ``-inf``: a shift that never makes NaN."""
    return torch.nan_to_num(x.amax(dim=dim, keepdim=keepdim), neginf=0.0)


def _floored_exp(shifted: torch.Tensor) -> torch.Tensor:
    """``exp(shifted)``, exactly 0 below ``EXP_FLOOR`` (and for ``-inf``)."""
    return torch.where(shifted < EXP_FLOOR, 0.0, shifted.clamp(min=EXP_FLOOR).exp())


def logsumexp(x: torch.Tensor, dim: int, keepdim: bool = False) -> torch.Tensor:
    """``log(sum(exp(x), dim))``, shifted by the max; exactly ``-inf`` where every entry is ``-inf``.

    Terms more than ``-EXP_FLOOR`` below the max count as ``exp(EXP_FLOOR)`` (a relative change far
    below the float64 epsilon, and no gradient), which keeps the recursions' inner loop at three
    elementwise operations; a row of only ``-inf`` is ``-inf`` by a mask, so no forbidden term ever
    adds mass. The gradient is the softmax of ``x``: 0 on ``-inf`` entries, 0 for an all ``-inf`` row.
    """
    top = x.amax(dim=dim, keepdim=True)
    shift = torch.nan_to_num(top, neginf=0.0)
    out = (x - shift).clamp(min=EXP_FLOOR).exp().sum(dim=dim, keepdim=True).log() + shift
    out = out.masked_fill(top == float("-inf"), float("-inf"))
    return out if keepdim else out.squeeze(dim)


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``softmax(x, dim)``; entries more than ``-EXP_FLOOR`` below the max are exactly 0, all 0 if all ``-inf``."""
    e = _floored_exp(x - safe_max(x, dim=dim, keepdim=True))
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s > 0, s, 1.0)


def is_impossible(score: torch.Tensor) -> torch.Tensor:
    """Whether a score is ``-inf``: a path through at least one forbidden event (decided exactly)."""
    return score == float("-inf")


def without_impossible(x: torch.Tensor) -> torch.Tensor:
    """``x`` with ``-inf`` entries set to 0, for products ``p * x`` where ``p`` is exactly 0 there."""
    return torch.where(x == float("-inf"), torch.zeros_like(x), x)


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


def onnx_exporting() -> bool:
    """Whether ``torch.onnx.export`` is tracing (ONNX has no translation of crfhead's custom ops)."""
    onnx = sys.modules.get("torch.onnx")
    return onnx is not None and bool(onnx.is_in_onnx_export())


def straight_clamp(
    x: torch.Tensor, min: float | None = None, max: float | None = None
) -> torch.Tensor:
    """``x`` clamped into ``[min, max]`` in value, with the gradient of ``x`` itself (straight through).

    For a quantity whose exact value lies in the range and whose rounding may leave it (an entropy or
    a loss that is a difference of two large, separately rounded numbers): the value is kept in range,
    the gradient is the quantity's, clamped or not. NaN stays NaN.
    """
    clamped = x.clamp(min=min, max=max)
    if not x.requires_grad:
        return clamped
    return x + (clamped - x).detach()
