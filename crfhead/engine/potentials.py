"""The potentials of a batch of linear chains: the one input contract of every dynamic program.

The shapes and conventions are the package's (:mod:`crfhead`): ``emissions`` ``(B, T, K)`` are the unary
log-potentials, ``transitions`` ``(K, K)`` or ``(B, T-1, K, K)`` ``[from, to]`` (entry ``t-1`` enters
position ``t`` from the previous *unmasked* one), ``start``/``end`` ``(K,)`` score the first/last
unmasked tag, ``mask`` ``(B, T)`` bool with holes allowed (integer 0/1 masks are converted here, once:
:func:`~crfhead.checks.as_bool_mask`).

:func:`make_potentials` validates at the public boundary (errors print the actual shapes) and upcasts
to the compute dtype (float32, or float64 when given float64). ``-inf`` (:data:`~crfhead.numerics.
IMPOSSIBLE`) means forbidden and is kept as it is: the recursions exclude it exactly. No score is
clamped, whatever its magnitude.

NaN and ``+inf`` are refused in traced graphs too. A data-dependent ``raise`` cannot be traced, so
while ``torch.compile``/``torch.export`` trace, the check is the custom op ``crfhead::refuse_non_finite``
(:func:`refuse_non_finite_op`, any device): opaque to the tracer, it runs at every call of the compiled
or exported graph and raises the eager check's :class:`~crfhead.checks.NonFiniteError`, with the same
message. Its output, a zero scalar, is the fill of the masked emissions, so no graph pass can remove
it as dead code. Under ``torch.onnx.export`` (ONNX has no such op) the check is left out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

from crfhead.checks import (
    as_bool_mask,
    chain_is_clean,
    check_tag_range,
    refuse_non_finite_chain,
)
from crfhead.numerics import IMPOSSIBLE, compute_dtype, is_tracing, onnx_exporting

__all__ = [
    "Chain",
    "ChainPotentials",
    "check_tag_range",
    "constrain",
    "make_potentials",
    "refuse_non_finite_op",
    "restrict",
]

Chain = tuple[Tensor, Tensor, Tensor, Tensor, Tensor]
"""``(emissions, transitions, start, end, mask)``: the potentials as the fused kernels, the custom ops and
the autograd functions take them (:attr:`ChainPotentials.chain`)."""


@dataclass(frozen=True, eq=False)
class ChainPotentials:
    """Validated chain potentials in the compute dtype (build with :func:`make_potentials`).

    Attributes:
        emissions: ``(B, T, K)`` unary log-potentials.
        transitions: ``(K, K)`` or ``(B, T-1, K, K)``, ``[from, to]``.
        start: ``(K,)`` log-potential of the first unmasked tag.
        end: ``(K,)`` log-potential of the last unmasked tag.
        mask: ``(B, T)`` bool, True where the position is part of the chain.
    """

    emissions: Tensor
    transitions: Tensor
    start: Tensor
    end: Tensor
    mask: Tensor

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(B, T, K)``."""
        B, T, K = self.emissions.shape
        return B, T, K

    @property
    def chain(self) -> Chain:
        """The five tensors, as the fused kernels take them (no copy)."""
        return self.emissions, self.transitions, self.start, self.end, self.mask

    @property
    def per_position(self) -> bool:
        """Whether transitions are ``(B, T-1, K, K)`` rather than shared ``(K, K)``."""
        return self.transitions.dim() == 4

    def transitions_into(self, t: int) -> Tensor:
        """The transition scores entering position ``t >= 1``: ``(K, K)`` or ``(B, K, K)``."""
        return self.transitions[:, t - 1] if self.per_position else self.transitions

    def edge_transitions(self) -> Tensor:
        """All edge scores, broadcastable to ``(B, T-1, K, K)``: entry ``t-1`` enters position ``t``."""
        return self.transitions if self.per_position else self.transitions[None, None]

    @property
    def differentiable(self) -> bool:
        """Whether autograd will need gradients of these potentials (gradients on, some input requires them)."""
        return torch.is_grad_enabled() and (
            self.emissions.requires_grad
            or self.transitions.requires_grad
            or self.start.requires_grad
            or self.end.requires_grad
        )

    @cached_property
    def has_prev(self) -> Tensor:
        """``(B, T)`` bool: some position before ``t`` is unmasked (so ``t`` has an incoming edge)."""
        m = self.mask.long()
        return (m.cumsum(1) - m) > 0

    @cached_property
    def has_next(self) -> Tensor:
        """``(B, T)`` bool: some position after ``t`` is unmasked."""
        m = self.mask.long()
        return (m.flip(1).cumsum(1) - m.flip(1)).flip(1) > 0

    @cached_property
    def is_first(self) -> Tensor:
        """``(B, T)`` bool: ``t`` is the first unmasked position of its row."""
        return self.mask & ~self.has_prev

    @cached_property
    def is_last(self) -> Tensor:
        """``(B, T)`` bool: ``t`` is the last unmasked position of its row."""
        return self.mask & ~self.has_next

    @cached_property
    def prev_index(self) -> Tensor:
        """``(B, T)`` int64: the previous unmasked position before ``t``, or -1 if none."""
        B, T = self.mask.shape
        pos = torch.arange(T, device=self.mask.device).expand(B, T)
        # Unmasked positions first, in order (a sort rather than cummax, which ONNX lacks).
        order = torch.sort(torch.where(self.mask, pos, pos + T), dim=1).indices  # (B, T)
        before = self.mask.long().cumsum(1) - self.mask.long()  # unmasked positions before t
        prev = order.gather(1, (before - 1).clamp(min=0))
        return torch.where(before > 0, prev, torch.full_like(prev, -1))

    @cached_property
    def nonempty(self) -> Tensor:
        """``(B,)`` bool: the row has at least one unmasked position."""
        return self.mask.any(dim=1)


def _check_float(name: str, x: Tensor) -> None:
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def _check_vector(name: str, vec: Tensor, shape: tuple[int, int, int]) -> None:
    _check_float(name, vec)
    K = shape[2]
    if vec.shape != (K,):
        raise ValueError(
            f"{name} must be (K,) = {(K,)} for emissions of shape {shape}, "
            f"got shape {tuple(vec.shape)}"
        )


def _refuse_chain(
    emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor, mask: Tensor
) -> bool:
    """The eager check of :func:`make_potentials`: raise on NaN or ``+inf``; ``False`` if the padding may need zeroing."""
    return refuse_non_finite_chain(emissions, transitions, start, end, mask)


@torch.library.custom_op("crfhead::refuse_non_finite", mutates_args=())
def refuse_non_finite_op(
    emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor, mask: Tensor
) -> Tensor:
    """Raise :class:`~crfhead.checks.NonFiniteError` as :func:`make_potentials` does; else a zero scalar.

    The check of a traced graph (see the module docstring): shapes as :class:`ChainPotentials`; the
    result is ``0`` in the emissions' dtype.
    """
    _refuse_chain(emissions, transitions, start, end, mask)
    return emissions.new_zeros(())


@refuse_non_finite_op.register_fake
def _refuse_fake(
    emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor, mask: Tensor
) -> Tensor:
    return emissions.new_empty(())


def make_potentials(
    emissions: Tensor,
    transitions: Tensor,
    start: Tensor | None = None,
    end: Tensor | None = None,
    mask: Tensor | None = None,
) -> ChainPotentials:
    """Validate, upcast and package chain potentials.

    Args:
        emissions: ``(B, T, K)`` floating point (bf16/fp16 are upcast to float32).
        transitions: ``(K, K)`` or ``(B, T-1, K, K)``, ``[from, to]``.
        start: ``(K,)``; zeros when ``None``.
        end: ``(K,)``; zeros when ``None``.
        mask: ``(B, T)`` bool, or integer of 0s and 1s (converted:
            :func:`~crfhead.checks.as_bool_mask`); all True when ``None``.

    Raises:
        ValueError: on a wrong shape, dtype or device; the message prints the actual shapes.
        NonFiniteError: (a ``ValueError``) a NaN or ``+inf`` score, at an unmasked position of the
            emissions or anywhere in the transitions, start or end; ``-inf`` means forbidden, and
            emissions at masked positions are ignored (they may hold anything). In a traced graph
            the same error is raised when the graph runs (:func:`refuse_non_finite_op`).
    """
    if (
        isinstance(emissions, Tensor)
        and isinstance(transitions, Tensor)
        and isinstance(start, Tensor)
        and isinstance(end, Tensor)
        and isinstance(mask, Tensor)
        and not is_tracing()
        and chain_is_clean(emissions, transitions, start, end, mask)
    ):  # the eager common case: one native pass stands for every check below
        return ChainPotentials(emissions, transitions, start, end, mask)
    _check_float("emissions", emissions)
    if emissions.dim() != 3:
        raise ValueError(f"emissions must be (B, T, K), got shape {tuple(emissions.shape)}")
    B, T, K = emissions.shape
    dtype = compute_dtype(emissions.dtype)
    device = emissions.device
    _check_float("transitions", transitions)
    if transitions.shape != (K, K) and transitions.shape != (B, max(T - 1, 0), K, K):
        raise ValueError(
            f"transitions must be (K, K) = {(K, K)} or (B, T-1, K, K) = {(B, max(T - 1, 0), K, K)} "
            f"for emissions of shape {(B, T, K)}, got shape {tuple(transitions.shape)}"
        )
    if start is None:
        start = emissions.new_zeros(K, dtype=dtype)
    else:
        _check_vector("start", start, (B, T, K))
    if end is None:
        end = emissions.new_zeros(K, dtype=dtype)
    else:
        _check_vector("end", end, (B, T, K))
    if mask is None:
        mask = torch.ones(B, T, dtype=torch.bool, device=device)
    else:
        mask = as_bool_mask(mask)
        if mask.shape != (B, T):
            raise ValueError(
                f"mask must be (B, T) = {(B, T)} for emissions of shape {(B, T, K)}, "
                f"got shape {tuple(mask.shape)}"
            )
    if (
        transitions.device != device
        or start.device != device
        or end.device != device
        or mask.device != device
    ):
        for name, x in (
            ("transitions", transitions),
            ("start", start),
            ("end", end),
            ("mask", mask),
        ):
            if x.device != device:
                raise ValueError(f"{name} is on {x.device} but emissions are on {device}")

    # Padding may hold anything (NaN, +-inf); it becomes 0, so that no recursion, and no gradient
    # through an unselected branch, ever meets it.
    if is_tracing():
        fill = torch.zeros((), dtype=emissions.dtype, device=device)
        if not onnx_exporting():  # the check at run time; its zero is the fill (never dead code)
            chain = (emissions, transitions, start, end, mask)
            fill = refuse_non_finite_op(*(x.detach() for x in chain))
        emissions = torch.where(mask[..., None], emissions, fill)
    elif not _refuse_chain(emissions, transitions, start, end, mask):
        emissions = torch.where(mask[..., None], emissions, torch.zeros((), dtype=emissions.dtype))

    if emissions.dtype != dtype:
        emissions = emissions.to(dtype)
    if transitions.dtype != dtype or start.dtype != dtype or end.dtype != dtype:
        transitions, start, end = (
            x if x.dtype == dtype else x.to(dtype) for x in (transitions, start, end)
        )
    return ChainPotentials(emissions, transitions, start, end, mask)


def constrain(scores: Tensor, allowed: Tensor) -> Tensor:
    """``scores`` where ``allowed``, ``IMPOSSIBLE`` (``-inf``) elsewhere (``allowed`` broadcasts to ``scores``).

    The gradient to a forbidden entry is exactly 0.
    """
    return torch.where(allowed, scores, IMPOSSIBLE)


def restrict(pot: ChainPotentials, allowed: Tensor) -> ChainPotentials:
    """``pot`` conditioned on per-position label sets: every disallowed emission becomes ``-inf``.

    The labellings of the result are exactly those of ``pot`` whose tag at every unmasked position
    ``t`` lies in ``allowed[b, t]``, with the same scores; so its ``log Z`` is ``log Z_allowed`` (the
    partial-label likelihood's numerator, Tsuboi et al. 2008) and every decoder, marginal and sample
    is conditioned on the sets. Masked positions ignore ``allowed``. The gradient to a disallowed
    emission is exactly 0.

    Args:
        pot: the chain potentials, emissions ``(B, T, K)``.
        allowed: ``(B, T, K)`` bool (or integer 0/1), on the potentials' device.

    Raises:
        ValueError: ``allowed`` not a bool/0-1 tensor of shape ``(B, T, K)`` on the potentials'
            device; an unmasked position with no allowed label (naming the sequence and position).
    """
    B, T, K = pot.shape
    if not isinstance(allowed, Tensor):
        raise ValueError(f"allowed must be a (B, T, K) bool tensor, got {type(allowed).__name__}")
    if tuple(allowed.shape) != (B, T, K):
        raise ValueError(
            f"allowed must be (B, T, K) = {(B, T, K)} for emissions of shape {(B, T, K)}, "
            f"got shape {tuple(allowed.shape)}"
        )
    if allowed.device != pot.emissions.device:
        raise ValueError(
            f"allowed is on {allowed.device} but emissions are on {pot.emissions.device}"
        )
    try:
        allowed = as_bool_mask(allowed)
    except ValueError as err:
        raise ValueError(str(err).replace("mask", "allowed", 1)) from None
    if not is_tracing():
        empty = pot.mask & ~allowed.any(dim=-1)  # (B, T)
        if bool(empty.any()):
            where = empty.nonzero().tolist()
            shown = ", ".join(f"sequence {b} position {t}" for b, t in where[:5])
            raise ValueError(
                f"allowed leaves {len(where)} unmasked position(s) with no label ({shown}"
                f"{', ...' if len(where) > 5 else ''}): every position needs at least one allowed "
                "label (all True means unknown)"
            )
    keep = allowed | ~pot.mask[..., None]
    emissions = torch.where(keep, pot.emissions, torch.full_like(pot.emissions, IMPOSSIBLE))
    return dataclasses.replace(pot, emissions=emissions)
