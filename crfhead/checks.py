"""Checks at the public boundary, shared by the engine, the encoders and the heads: id ranges, finite scores, masks.

Errors are ``ValueError``s that name the first offending value and its position.

The non-finite contract (every backend, every op, because it is checked once, in
:func:`crfhead.make_potentials`): a score that is NaN or ``+inf`` raises :class:`NonFiniteError` naming
the tensor and the first bad position; ``-inf`` is allowed and means "forbidden"; emissions at masked
positions are ignored (padding may hold anything; the backends never read it into a result).

Masks (:func:`as_bool_mask`, at every public entry that takes one): bool, or any integer dtype holding
only 0 and 1 (HuggingFace's ``attention_mask`` is int64, pytorch-crf's masks uint8), converted to bool
once there. Other integer values are refused, naming them and their count; float masks are refused
(not rounded). While ``torch.compile``/``torch.export`` trace, the value check is skipped, as the
other data-dependent checks are, and any nonzero value counts as unmasked.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable

import torch
from torch import Tensor

from crfhead.numerics import is_tracing
from crfhead.threads import serial_torch

__all__ = [
    "MissingPackageError",
    "NonFiniteError",
    "as_bool_mask",
    "chain_is_clean",
    "check_tag_range",
    "check_word_ids",
    "refuse_non_finite",
    "refuse_non_finite_chain",
    "register_chain_check",
    "require_int",
]


ChainCheck = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], int | None]
"""``check(emissions, transitions, start, end, mask) -> code``: one fused pass over a chain's scores.

It takes tensors of the shapes :func:`~crfhead.engine.potentials.make_potentials` accepts (and
checks them), one float dtype, contiguous, a bool mask. ``-1``: nothing refused, every masked
emission finite (so the chain passes every check of ``make_potentials`` as it is); ``-2``: nothing refused, but some masked
emission is not finite (the padding must be zeroed); ``4 * flat_index + i`` (``i``: 0 emissions, 1 transitions, 2 start, 3 end):
the first NaN or ``+inf`` refused; ``None``: the check does not take these tensors (device, dtype,
layout), so torch's reductions check them."""

_chain_check: ChainCheck | None = None


def register_chain_check(check: ChainCheck | None) -> None:
    """Install the fused finiteness check (the cpu kernel's ``first_non_finite``, when it loads)."""
    global _chain_check
    _chain_check = check


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


def chain_is_clean(
    emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor, mask: Tensor
) -> bool:
    """Whether one fused pass finds the chain valid as it is: shapes, dtypes, device, every score.

    ``True`` only where the fused check is loaded, takes the tensors (see :data:`ChainCheck`) and
    finds every score finite or ``-inf``, the padding included; ``False`` says nothing (the full
    checks then run and name what is wrong, if anything is).
    """
    check = _chain_check
    return check is not None and check(emissions, transitions, start, end, mask) == -1


def refuse_non_finite_chain(
    emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor, mask: Tensor
) -> bool:
    """:func:`refuse_non_finite` of a chain's four score tensors (emissions where ``mask`` ``(B, T)``).

    One fused native pass where the cpu kernel is loaded and takes the tensors (CPU, float32 or
    float64, contiguous); torch's reductions otherwise. Same errors either way.

    Returns:
        ``False`` where a masked emission may be non-finite (the caller zeroes the padding): the
        fused check says exactly that; torch's says whether every value is finite.
    """
    check = _chain_check
    code = None if check is None else check(emissions, transitions, start, end, mask)
    if code == -1:
        return True
    if code == -2:
        return False
    # Refused (the torch check names the value and its position) or not taken by the fused check.
    finite = refuse_non_finite("emissions", emissions, mask)
    for name, x in (("transitions", transitions), ("start", start), ("end", end)):
        refuse_non_finite(name, x)
    return finite


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


def as_bool_mask(mask: Tensor) -> Tensor:
    """``mask`` ``(B, T)`` as bool: a bool mask as it is, an integer one of 0s and 1s as ``mask != 0``.

    Raises:
        ValueError: not a tensor; a floating-point or complex dtype; an integer mask holding a value
            other than 0 and 1 (the distinct values, up to 10, and how many entries hold them).
    """
    if not isinstance(mask, Tensor):
        raise ValueError(f"mask must be a bool or integer tensor, got {type(mask).__name__}")
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point() or mask.is_complex():
        raise ValueError(
            f"mask must be bool or an integer dtype of 0s and 1s (uint8, int64, ...), got "
            f"{mask.dtype}; a float mask is not rounded: pass mask.bool() or mask > 0.5"
        )
    on = mask != 0
    if not is_tracing():
        bad = on & (mask != 1)
        if bool(bad.any()):
            values = torch.unique(mask[bad]).tolist()
            count = int(bad.sum())
            raise ValueError(
                f"mask must hold only 0 and 1, got {count} {'entry' if count == 1 else 'entries'} "
                f"with other values: "
                f"{values[:10]}{' ...' if len(values) > 10 else ''} (dtype {mask.dtype})"
            )
    return on


def check_word_ids(words: Tensor, vocab_size: int, mask: Tensor | None = None) -> Tensor:
    """Validate word ids ``(B, T)`` against ``[0, vocab_size)`` at the unmasked positions.

    Returns:
        the mask, ``(B, T)`` bool (all True when ``mask`` is ``None``; see :func:`as_bool_mask`).

    Raises:
        ValueError: not an integer ``(B, T)`` tensor, a mask of another shape or refused by
            :func:`as_bool_mask`, or an id out of
            range (the first one is named with its position).
    """
    if not isinstance(words, Tensor) or words.is_floating_point() or words.dim() != 2:
        got = tuple(words.shape) if isinstance(words, Tensor) else type(words).__name__
        raise ValueError(f"words must be an integer tensor (B, T), got {got}")
    mask = torch.ones_like(words, dtype=torch.bool) if mask is None else as_bool_mask(mask)
    if mask.shape != words.shape:
        raise ValueError(f"mask must be (B, T) = {tuple(words.shape)}, got {tuple(mask.shape)}")
    mask = mask.to(words.device)
    _refuse_out_of_range(words, mask, vocab_size, "word id")
    return mask
