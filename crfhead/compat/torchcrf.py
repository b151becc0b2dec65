"""pytorch-crf 0.7.2's ``CRF`` API on crfhead's engine: switch by changing one import.

``from crfhead.compat.torchcrf import CRF`` replaces ``from torchcrf import CRF``: same constructor
(``num_tags, batch_first=False``), same parameters registered in the same order
(``start_transitions``, ``end_transitions``, ``transitions``: its ``state_dict`` *and* an optimizer's
``state_dict`` built over ``crf.parameters()`` load unchanged), the same initialisation draws,
``forward`` returns the log-likelihood (not a loss) reduced by ``"none" | "sum" | "mean" |
"token_mean"`` (default ``"sum"``), and ``decode`` returns ``List[List[int]]``. Unlike pytorch-crf,
masks need not have the first time step on (masks with holes are fine) and may be bool, uint8 or any
integer dtype of 0s and 1s.

Every other public method of :class:`crfhead.heads.CRF` (``loss``, ``nll``, ``marginals``, ``topk``,
``sample``...) is inherited *and honours* ``batch_first``. With ``batch_first=False`` the inputs are
time-first: ``emissions`` ``(T, B, K)``, ``tags`` and ``mask`` ``(T, B)``; every output that has both
a batch and a time axis comes back with exactly those two axes swapped, everything else in place:

- ``forward``: the log-likelihood, ``(B,)`` or a scalar by ``reduction``; ``decode``:
  ``list[list[int]]``, one list per sequence; ``decode_labels``: ``list[list[str]]``, likewise.
- ``loss``, ``nll`` (``(B,)`` or a scalar), ``score``, ``log_partition``, ``entropy`` (``(B,)``):
  no time axis, the same in both layouts.
- ``marginals``, ``max_marginals``: ``(B, T, K)`` batch-first, ``(T, B, K)`` time-first.
- ``edge_marginals``: ``(B, T-1, K, K)``, ``(T-1, B, K, K)``.
- ``viterbi``: scores ``(B,)`` and paths ``(B, T)``; paths ``(T, B)``.
- ``topk``: scores ``(B, k)`` and paths ``(B, k, T)``; paths ``(T, k, B)``.
- ``posterior_decode``, ``predict``: ``(B, T)``, ``(T, B)``.
- ``sample``: ``(S, B, T)``, ``(S, T, B)``.
- ``sequence_nll``, ``sequence_losses``: ``(B,)`` and the mask used ``(B, T)``; the mask ``(T, B)``.

(So ``topk(...)[1][:, j]`` and ``sample(...)[s]`` are ``(T, B)`` path tensors, like ``viterbi``'s.)

Refused with ``batch_first=False`` (``NotImplementedError``): ``potentials``, ``gold_score`` and
``check_gold``.
They hand out or take :class:`~crfhead.engine.potentials.ChainPotentials`, the engine's batch-first
structure, so a time-first layer has no unambiguous layout for them; use ``batch_first=True`` (or
:class:`crfhead.heads.CRF`) to work at the engine level. A public method added to the base classes
later and not yet classified here is refused the same way instead of silently misreading ``(T, B)``.

Decision: the transposition lives in one place (:func:`_layout_method`), applied to the inherited
methods by a table (:data:`_OUTPUTS`); a method of the base that calls another public method (``nll``
calls ``sequence_nll``, ``marginals`` calls ``potentials``, ``predict`` calls ``decode``...) reaches
the plain batch-first ``ChainHead`` behaviour, never the time-first surface, through a per-module
scope (a :class:`contextvars.ContextVar`, so it is thread- and task-safe).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ClassVar, TypeVar

from torch import Tensor, nn

from crfhead.checks import as_bool_mask
from crfhead.heads.crf import CRF as _CRF

__all__ = ["CRF"]

_F = TypeVar("_F", bound=Callable[..., Any])
_Output = Callable[[Any], Any]

# The arguments laid out (T, B, ...) when batch_first=False; the base names them so in every method.
_LAYOUT_ARGS = ("emissions", "tags", "mask", "allowed")

# ids of the modules now running a public call: nested calls see the batch-first ChainHead contract.
_INSIDE: ContextVar[frozenset[int]] = ContextVar("crfhead_compat_torchcrf", default=frozenset())


@contextmanager
def _batch_first_scope(module: nn.Module) -> Iterator[None]:
    token = _INSIDE.set(_INSIDE.get() | {id(module)})
    try:
        yield
    finally:
        _INSIDE.reset(token)


def _same(out: Any) -> Any:
    """An output without a time axis (``(B,)``, a scalar, per-sequence lists): unchanged."""
    return out


def _swap(batch_axis: int, time_axis: int) -> _Output:
    """An output tensor with a batch and a time axis: swap those two, keep every other axis."""

    def swap(out: Tensor) -> Tensor:
        return out.transpose(batch_axis, time_axis)

    return swap


def _each(*outputs: _Output) -> _Output:
    """A tuple output: transform element ``i`` by ``outputs[i]``."""

    def each(out: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(f(o) for f, o in zip(outputs, out, strict=True))

    return each


_TIME_LEADS = _swap(0, 1)  # (B, T, ...) -> (T, B, ...)

# Every inherited public method: how its batch-first output maps to the time-first layout, and
# that layout (appended to the method's docstring). Decision: one rule for every output, swap the
# batch and time axes and leave the rest; so topk's paths are (T, k, B), not (T, B, k), and
# ``paths[:, j]`` (like ``sample(...)[s]``) is a (T, B) decode, as viterbi's paths are.
_OUTPUTS: dict[str, tuple[_Output, str]] = {
    "loss": (_same, "``(B,)`` or a scalar, as batch-first"),
    "nll": (_same, "``(B,)`` or a scalar, as batch-first"),
    "score": (_same, "``(B,)``, as batch-first"),
    "log_partition": (_same, "``(B,)``, as batch-first"),
    "entropy": (_same, "``(B,)``, as batch-first"),
    "decode_labels": (_same, "one list per sequence, as batch-first"),
    "marginals": (_TIME_LEADS, "``(T, B, K)``"),
    "max_marginals": (_TIME_LEADS, "``(T, B, K)``"),
    "edge_marginals": (_TIME_LEADS, "``(T-1, B, K, K)``"),
    "posterior_decode": (_TIME_LEADS, "``(T, B)``"),
    "predict": (_TIME_LEADS, "``(T, B)``"),
    "viterbi": (_each(_same, _TIME_LEADS), "scores ``(B,)``, paths ``(T, B)``"),
    "topk": (_each(_same, _swap(0, 2)), "scores ``(B, k)``, paths ``(T, k, B)``"),
    "sample": (_swap(1, 2), "``(S, T, B)``"),
    "sequence_nll": (_each(_same, _TIME_LEADS), "losses ``(B,)``, the mask used ``(T, B)``"),
    "sequence_losses": (_each(_same, _TIME_LEADS), "losses ``(B,)``, the mask used ``(T, B)``"),
    "partial_nll": (_each(_same, _TIME_LEADS), "losses ``(B,)``, the mask used ``(T, B)``"),
}

# Public methods that take or give no (B, T) layout at all: inherited as they are.
_LAYOUT_FREE = frozenset(
    {"emissions_from_batch", "emissions_for", "reads", "fitting", "reset_parameters", "extra_repr"}
)

_ENGINE_LEVEL = (
    "works on ChainPotentials, the engine's batch-first structure, which has no time-first layout; "
    "use batch_first=True (or crfhead.heads.CRF) at the engine level"
)
# Public methods refused with batch_first=False, and why.
_REFUSED: dict[str, str] = {
    "predict_from": _ENGINE_LEVEL,
    "potentials": _ENGINE_LEVEL,
    "chain": _ENGINE_LEVEL,
    "gold_score": _ENGINE_LEVEL,
    "check_gold": _ENGINE_LEVEL,
}
_UNCLASSIFIED = (
    "is not yet classified by crfhead.compat.torchcrf, so it could misread (T, B) inputs; "
    "use batch_first=True"
)


def _check_mask(mask: Any) -> Any:
    """pytorch-crf masks are uint8 or bool: accept those and every integer mask of 0s and 1s, as bool.

    :func:`crfhead.checks.as_bool_mask`, here before the ``(T, B)`` transpose, so its errors are the
    core's.
    """
    return as_bool_mask(mask) if isinstance(mask, Tensor) else mask


def _layout_method(
    output: _Output, *, inner: Callable[..., Any] | None = None
) -> Callable[[_F], _F]:
    """Make a batch-first method honour ``batch_first``.

    The decorated ``fn`` is written batch-first. Called from outside (``batch_first=False``), its
    ``emissions`` ``(T, B, K)``, ``tags`` and ``mask`` ``(T, B)`` are transposed to ``(B, T, ...)``,
    ``fn`` runs in the batch-first scope and ``output`` maps its result back. Called from inside
    that scope (another method of the same module), ``inner`` (default ``fn``) runs untouched, so
    the base's internal calls keep the batch-first ``ChainHead`` contract. Masks may be bool or
    integer 0/1 (uint8...) either way.
    """

    def decorate(fn: _F) -> _F:
        signature = inspect.signature(fn)
        nested = inner if inner is not None else fn

        @functools.wraps(fn)
        def method(self: CRF, *args: Any, **kwargs: Any) -> Any:
            if id(self) in _INSIDE.get():
                return nested(self, *args, **kwargs)
            bound = signature.bind(self, *args, **kwargs)
            if "mask" in bound.arguments:
                bound.arguments["mask"] = _check_mask(bound.arguments["mask"])
            if self.batch_first:
                with _batch_first_scope(self):
                    return fn(*bound.args, **bound.kwargs)
            for name in _LAYOUT_ARGS:
                value = bound.arguments.get(name)
                if isinstance(value, Tensor) and value.dim() >= 2:
                    bound.arguments[name] = value.transpose(0, 1)  # (T, B, ...) -> (B, T, ...)
            try:
                with _batch_first_scope(self):
                    result = fn(*bound.args, **bound.kwargs)
            except ValueError as error:  # the base names shapes batch-first: say so
                raise ValueError(
                    f"{error} [batch_first=False: the shapes above are after transposing the "
                    "(T, B, ...) inputs to (B, T, ...)]"
                ) from error
            return output(result)

        return method  # type: ignore[return-value]

    return decorate


def _refused(name: str, fn: _F, reason: str) -> _F:
    """``fn`` as it is with ``batch_first=True`` or inside a call; with ``batch_first=False`` it raises."""

    @functools.wraps(fn)
    def method(self: CRF, *args: Any, **kwargs: Any) -> Any:
        if self.batch_first or id(self) in _INSIDE.get():
            return fn(self, *args, **kwargs)
        raise NotImplementedError(f"{type(self).__name__}(batch_first=False).{name} {reason}")

    return method  # type: ignore[return-value]


class CRF(_CRF):
    """pytorch-crf-compatible CRF layer; every public method honours ``batch_first``.

    Args:
        num_tags: ``K``, the number of tags.
        batch_first: whether inputs are ``(B, T, ...)``; if False (the default, as in pytorch-crf)
            they are ``(T, B, ...)`` and outputs are laid out as the module docstring's table says.
        labels: optional tag names (crfhead extension, not in pytorch-crf), for
            :meth:`decode_labels` and with ``scheme`` for constraints.
        scheme: optional tagging scheme constraining training and decoding (crfhead extension).
        decoder: what :meth:`predict` and :meth:`decode_labels` use (crfhead extension);
            :meth:`decode` is always Viterbi, as in pytorch-crf.

    Attributes:
        start_transitions: ``nn.Parameter`` ``(K,)``, registered first, as in pytorch-crf.
        end_transitions: ``nn.Parameter`` ``(K,)``, second.
        transitions: ``nn.Parameter`` ``(K, K)``, ``[from, to]``, third.
    """

    # pytorch-crf's registration (and initialisation) order. crfhead.heads.CRF registers
    # transitions first and other code depends on it, so the drop-in owns its order: ChainHead
    # registers and initialises ``scores`` in the order given, which makes ``parameters()`` (hence
    # optimizer state indices) and the uniform draws of reset_parameters match pytorch-crf's.
    scores: ClassVar[dict[str, tuple[str, ...]]] = {
        "start_transitions": ("K",),
        "end_transitions": ("K",),
        "transitions": ("K", "K"),
    }

    def __init__(
        self,
        num_tags: int,
        batch_first: bool = False,
        *,
        labels: Sequence[str] | None = None,
        scheme: str | None = None,
        decoder: str = "viterbi",
    ) -> None:
        super().__init__(num_tags, labels=labels, scheme=scheme, decoder=decoder)
        self.batch_first = batch_first

    def extra_repr(self) -> str:  # noqa: D102
        return f"num_tags={self.num_tags}"

    @_layout_method(_same, inner=_CRF.forward)
    def forward(
        self,
        emissions: Tensor,
        tags: Tensor | None = None,
        mask: Tensor | None = None,
        reduction: str = "sum",
        *,
        allowed: Tensor | None = None,
    ) -> Tensor:
        """Log-likelihood of ``tags`` (``-nll``), reduced as pytorch-crf does: ``(B,)`` or a scalar.

        Args:
            emissions: ``(T, B, K)`` (``(B, T, K)`` with ``batch_first``).
            tags: ``(T, B)`` integer (``(B, T)``).
            mask: ``(T, B)`` bool or integer 0/1, e.g. uint8 (``(B, T)``), or ``None``.
            reduction: ``"none"`` → ``(B,)``, ``"sum"`` (default), ``"mean"``, ``"token_mean"``.
            allowed: ``(T, B, K)`` bool (``(B, T, K)``), the labels each position may take
                (crfhead extension): the log-probability of the partial annotation; ``tags`` may
                then be ``None``.
        """
        return -self.nll(emissions, tags, mask, reduction=reduction, allowed=allowed)

    # Nested calls (the base's predict) get ChainHead.decode's (B, T) tensor, not these lists.
    @_layout_method(_same, inner=_CRF.decode)
    def decode(  # type: ignore[override]
        self, emissions: Tensor, mask: Tensor | None = None, *, allowed: Tensor | None = None
    ) -> list[list[int]]:
        """Viterbi paths as lists of tag ids, one per sequence (masked positions dropped).

        Args:
            emissions: ``(T, B, K)`` (``(B, T, K)`` with ``batch_first``).
            mask: ``(T, B)`` bool or integer 0/1, e.g. uint8 (``(B, T)``), or ``None``.
            allowed: ``(T, B, K)`` bool (``(B, T, K)``), the labels each position may take
                (crfhead extension), or ``None``.
        """
        paths = _CRF.decode(self, emissions, mask, allowed=allowed).tolist()
        return [[tag for tag in row if tag >= 0] for row in paths]


def _public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """The public methods ``cls`` defines or inherits below :class:`torch.nn.Module`."""
    methods: dict[str, Callable[..., Any]] = {}
    for klass in reversed(cls.__mro__[: cls.__mro__.index(nn.Module)]):
        for name, value in vars(klass).items():
            if not name.startswith("_") and inspect.isfunction(value):
                methods[name] = value
    return methods


def _install() -> None:
    """Wrap every public method :class:`CRF` inherits, by :data:`_OUTPUTS` or :data:`_REFUSED`."""
    for name, fn in _public_methods(_CRF).items():
        if name in vars(CRF) or name in _LAYOUT_FREE:
            continue  # defined here (forward, decode, extra_repr) or layout-free
        if name in _OUTPUTS:
            output, layout = _OUTPUTS[name]
            wrapped = _layout_method(output)(fn)
            wrapped.__doc__ = (
                f"{fn.__doc__ or ''}\n\ncrfhead.compat.torchcrf: with ``batch_first=False`` the inputs "
                f"are ``emissions`` ``(T, B, K)``, ``tags``/``mask`` ``(T, B)``; returns {layout}."
            )
        else:
            wrapped = _refused(name, fn, _REFUSED.get(name, _UNCLASSIFIED))
        setattr(CRF, name, wrapped)


_install()
