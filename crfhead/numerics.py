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

__all__ = ["IMPOSSIBLE", "compute_dtype", "is_impossible", "no_autocast"]

IMPOSSIBLE: float = -1.0e4
"""Log-potential of an impossible event: finite in every floating dtype, ``exp`` of it is 0."""


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
