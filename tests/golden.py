"""Committed results (lab payloads, figure data) against their recomputation, on any machine.

A committed float was computed on one machine. Another CPU (its vector width, its BLAS, the fused
kernel compiled for it), another thread count or another build of torch rounds differently, and an
optimiser (L-BFGS, Adam, the perceptron) carries that difference through its iterations: a float64
fit moves in its 12th digit. So floats are compared at a stated tolerance, and exactly only what is
computed exactly: the structure, the keys, strings, integers, booleans and ``None``.

Payload floats are rounded to a number of decimals; a recomputation whose value moved by 1e-15
across a rounding boundary prints one more or one less in the last decimal. ``digits`` allows that
one unit beside the relative tolerance.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["FIT_RTOL", "assert_recomputes", "mismatches"]

FIT_RTOL = 1e-9
"""Relative tolerance for a float64 fit recomputed on another machine (observed drift: 5e-13)."""


def _float_close(a: float, b: float, rtol: float, atol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)


def mismatches(
    committed: Any,
    recomputed: Any,
    *,
    rtol: float = FIT_RTOL,
    digits: int | None = None,
    loose: Mapping[str, float] | None = None,
    where: str = "$",
) -> list[str]:
    """Every place where ``recomputed`` differs from ``committed``, as ``path: committed != recomputed``.

    Args:
        committed: a JSON-like tree (dicts, lists, str, int, float, bool, None).
        recomputed: the same tree computed again.
        rtol: the relative tolerance of floats.
        digits: the decimals the floats were rounded to (one unit of the last is allowed).
        loose: an absolute tolerance, beside that unit, for the floats whose path (such as
            ``$.worlds[0].acc``) matches a regular expression; its reason stated where it is used.
        where: the path of the root in the messages.
    """
    unit = 10.0**-digits * (1 + 1e-9) if digits is not None else 0.0
    patterns = [(re.compile(k), v) for k, v in (loose or {}).items()]

    def tolerance(path: str) -> float:
        return max([0.0, *(v for pattern, v in patterns if pattern.search(path))]) + unit

    out: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        numbers = (int, float)
        if (
            isinstance(a, bool)
            or isinstance(b, bool)
            or not (isinstance(a, numbers) and isinstance(b, numbers))
        ):
            if type(a) is not type(b):
                out.append(f"{path}: {a!r} != {b!r} (types {type(a).__name__}, {type(b).__name__})")
            elif isinstance(a, dict):
                if a.keys() != b.keys():
                    out.append(f"{path}: keys {sorted(a.keys() ^ b.keys())} on one side only")
                for key in a:
                    if key in b:
                        walk(a[key], b[key], f"{path}.{key}")
            elif isinstance(a, list):
                if len(a) != len(b):
                    out.append(f"{path}: length {len(a)} != {len(b)}")
                for i, (x, y) in enumerate(zip(a, b, strict=False)):
                    walk(x, y, f"{path}[{i}]")
            elif a != b:
                out.append(f"{path}: {a!r} != {b!r}")
        elif isinstance(a, int) and isinstance(b, int):
            if a != b:
                out.append(f"{path}: {a} != {b}")
        elif not _float_close(float(a), float(b), rtol, tolerance(path)):
            out.append(f"{path}: {a!r} != {b!r} (rtol {rtol:g}, atol {tolerance(path):g})")

    walk(committed, recomputed, where)
    return out


def assert_recomputes(
    committed: Any,
    recomputed: Any,
    *,
    rtol: float = FIT_RTOL,
    digits: int | None = None,
    loose: Mapping[str, float] | None = None,
) -> None:
    """Fail, listing the first differences, unless :func:`mismatches` finds none."""
    found = mismatches(committed, recomputed, rtol=rtol, digits=digits, loose=loose)
    shown = "\n  ".join(found[:20])
    more = f"\n  ... and {len(found) - 20} more" if len(found) > 20 else ""
    assert not found, f"{len(found)} differences:\n  {shown}{more}"
