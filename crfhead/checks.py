"""Checks at the public boundary, shared by the engine, the encoders and the heads: id ranges, finite scores.

Errors are ``ValueError``s that name the first offending value and its position.

The non-finite contract (every backend, every op, because it is checked once, in
:func:`crfhead.make_potentials`): a score that is NaN or ``+inf`` raises :class:`NonFiniteError` naming
the tensor and the first bad position; ``-inf`` is allowed and means "forbidden"; emissions at masked
positions are ignored (padding may hold anything; the backends never read it into a result).
"""

from __future__ import annotations

import math
import operator

import torch
from torch import Tensor

from crfhead.threads import serial_torch

__all__ = [
    "MissingPackageError",
    "NonFiniteError",
    "check_tag_range",
    "check_word_ids",
    "refuse_non_finite",
    "require_int",
]


class NonFiniteError(ValueError, FloatingPointError):
    """A score is NaN or ``+inf`` (a ``ValueError``, and a ``FloatingPointError`` for training guards)."""


class MissingPackageError(ModuleNotFoundError):
    """An optional package a component needs is not installed.

    The message is one line that names the command installing it; ``train.py`` reports it as that
    line, before anything is built.
    """


def require_int(name: str, value: object, at_least: int | None = None) -> int:
    """``value`` as an ``int``, refusing anything that is not an integer (a ``bool`` is not one here).

    Integers of other types (NumPy's, a 0-dim integer tensor) are accepted by ``__index__``.

    Raises:
        ValueError: not an integer, or below ``at_least``; the message prints the value and its type.
    """
    if not isinstance(value, bool):
        try:
            number = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            pass
        else:
            if at_least is None or number >= at_least:
                return number
    need = "an int" if at_least is None else f"an int >= {at_least}"
    raise ValueError(f"{name} must be {need}, got {value!r} ({type(value).__name__})")


def refuse_non_finite(name: str, x: Tensor, mask: Tensor | None = None) -> bool:
    """Raise :class:`NonFiniteError` if ``x`` holds NaN or ``+inf`` (where ``mask`` ``(B, T)``, if given).

    One reduction (``aminmax``) unless a value is NaN or ``+inf``; ``-inf`` passes.

    Returns:
        whether every value of ``x`` is finite (masked ones included).
    """
    if x.numel() == 0:
        return True
    x = x.detach()
    # One pass, no temporary: the minimum and maximum (NaN propagates into both). Single-threaded on
    # the CPU up to 4M values: torch splits a reduction over 32K values across threads, and on a
    # busy machine that join waits for a descheduled one.
    with serial_torch(x.device.type == "cpu" and x.numel() < 1 << 22):
        lo, hi = (float(v) for v in torch.stack(torch.aminmax(x)).tolist())  # one host sync
    if hi < math.inf:  # no NaN (it would be the maximum) and no +inf
        return lo > -math.inf
    bad = torch.isnan(x) | (x == float("inf"))
    if mask is not None:
        bad = bad & mask.reshape(*mask.shape, *([1] * (x.dim() - mask.dim())))
    if bool(bad.any()):
        position = tuple(int(i) for i in bad.nonzero()[0])
        value = "NaN" if bool(torch.isnan(x[position])) else "+inf"
        raise NonFiniteError(
            f"{name} is {value} at {position} (shape {tuple(x.shape)}): scores must be finite, "
            "or -inf for a forbidden event"
        )
    return False


def _refuse_out_of_range(ids: Tensor, mask: Tensor, size: int, what: str) -> None:
    """Raise naming the first ``ids`` ``(B, T)`` outside ``[0, size)`` where ``mask``; ``what`` names them."""
    bad = mask & ((ids < 0) | (ids >= size))
    if bool(bad.any()):
        b, t = (int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"{what} {int(ids[b, t])} at {'unmasked position ' if what == 'tag' else ''}"
            f"(batch {b}, time {t}) is out of range [0, {size})"
        )


def check_tag_range(tags: Tensor, mask: Tensor, num_tags: int) -> None:
    """Refuse gold ``tags`` ``(B, T)`` outside ``[0, num_tags)`` at unmasked positions of ``mask``.

    Raises:
        ValueError: naming the first offending tag and its position.
    """
    _refuse_out_of_range(tags, mask, num_tags, "tag")


def check_word_ids(words: Tensor, vocab_size: int, mask: Tensor | None = None) -> Tensor:
    """Validate word ids ``(B, T)`` against ``[0, vocab_size)`` at the unmasked positions.

    Returns:
        the mask, ``(B, T)`` bool (all True when ``mask`` is ``None``).

    Raises:
        ValueError: not an integer ``(B, T)`` tensor, a mask of another shape or dtype, or an id out of
            range (the first one is named with its position).
    """
    if not isinstance(words, Tensor) or words.is_floating_point() or words.dim() != 2:
        got = tuple(words.shape) if isinstance(words, Tensor) else type(words).__name__
        raise ValueError(f"words must be an integer tensor (B, T), got {got}")
    if mask is None:
        mask = torch.ones_like(words, dtype=torch.bool)
    if mask.shape != words.shape or mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be bool (B, T) = {tuple(words.shape)}, got {mask.dtype} {tuple(mask.shape)}"
        )
    mask = mask.to(words.device)
    _refuse_out_of_range(words, mask, vocab_size, "word id")
    return mask
