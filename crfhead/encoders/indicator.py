"""The classic linear-chain CRF encoder: one learned weight per (indicator feature, tag).

With :class:`~crfhead.data.FeatureTemplates` features, ``emissions[b, t, k]`` is the sum over the
active features ``f`` of token ``t`` of ``weight[f, k]``: the node potentials of Lafferty et al.'s
linear-chain CRF, with no hidden layer. Feature id 0 (padding, or a feature unseen in training) has
a fixed zero weight.

On the CPU the forward sums are a sparse ``(tokens, features)`` 0/1 CSR matrix times the weights,
and the backward is the transposed ``(features, tokens)`` CSR matrix times the upstream gradient
(:class:`_IndicatorSum`), built from the ids directly (one stable sort by feature, no conversion of
the forward matrix); autograd's own backward of the sparse product would convert the matrix, and
``embedding_bag``'s sorts the ids. Both matrices depend only on the batch's ids, so they are kept
with the batch's ``features`` tensor (:class:`_Indicators`, for the last batch seen): evaluating
the same batch again (L-BFGS's line search, a full-batch objective) checks and builds nothing, and
the backward is then a 0.1 ms product instead of a 1.6 ms ``index_add_`` scatter
(``scripts/bench_training.py`` times it). The gradient is bit-identical to that scatter (each
feature's row sums its tokens in the same order). Elsewhere (other devices, half-precision weights,
``torch.compile``/``torch.export``) ``embedding_bag``. Both give the same sums; under autocast both
stay in the weights' dtype.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

import torch
from torch import Tensor, nn

from crfhead.data.batching import Batch
from crfhead.numerics import no_autocast

__all__ = ["IndicatorEncoder"]


class IndicatorEncoder(nn.Module):
    """Emissions as sums of per-(feature, tag) weights over each token's active indicator features.

    Args:
        num_tags: ``K``, the number of tags.
        num_features: size of the feature vocabulary (``len(feature_vocab)``, id 0 = padding/unseen).

    Attributes:
        weight: ``nn.Parameter`` ``(num_features, K)``, the weight of each (feature, tag); initialised
            to zero. Row 0 is never used and gets no gradient.
        needs: the :class:`~crfhead.data.Batch` fields :meth:`forward` reads: ``{"features"}``.
        tag_batch_size: the chains per batch tagging uses by default (a batch's fixed cost, the
            kernel and tensor calls, is most of a short batch's time here; the padded features
            are small).
    """

    needs: frozenset[str] = frozenset({"features"})
    tag_batch_size: int = 256

    def __init__(self, num_tags: int, num_features: int) -> None:
        super().__init__()
        if not isinstance(num_tags, int) or num_tags < 1:
            raise ValueError(f"num_tags must be a positive int, got {num_tags!r}")
        if not isinstance(num_features, int) or num_features < 2:
            raise ValueError(
                f"num_features must be an int >= 2 (id 0 is padding), got {num_features!r}"
            )
        self.num_tags = num_tags
        self.num_features = num_features
        self.weight = nn.Parameter(torch.empty(num_features, num_tags))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """All weights zero: the untrained model scores every tag alike."""
        nn.init.zeros_(self.weight)

    def extra_repr(self) -> str:  # noqa: D102
        return f"num_tags={self.num_tags}, num_features={self.num_features}"

    def parameter_groups(self) -> list[dict[str, Any]]:
        """Optimizer parameter groups: one, ``{"name": "head", "params": [...]}``."""
        return [{"name": "head", "params": [p for p in self.parameters() if p.requires_grad]}]

    def forward(self, batch: Batch) -> Tensor:
        """Emissions of a batch.

        Args:
            batch: a :class:`~crfhead.data.Batch` with ``features`` ``(B, T, F)`` (0 = none).

        Returns:
            ``(B, T, K)`` float emissions on the module's device; 0 at padded positions.

        Raises:
            ValueError: if the batch has no feature ids or an id is ``>= num_features``.
        """
        if batch.features is None:
            raise ValueError(
                "IndicatorEncoder needs feature ids: build the Collator with "
                "features=(templates, feature_vocab)"
            )
        device = self.weight.device
        features = batch.features.to(device)
        if features.dim() != 3:
            raise ValueError(f"features must be (B, T, F), got shape {tuple(features.shape)}")
        B, T, F = features.shape
        if device.type == "cpu" and self.weight.dtype in _CSR_DTYPES and not _tracing():
            # Sparse (B*T, V) 0/1 matrices times the weights: the same sums, with a cheaper
            # backward than embedding_bag's on CPU. The sparse product has no half-precision
            # kernel, so it runs outside autocast (as embedding_bag does: autocast leaves it in
            # the weights' dtype).
            indicators = self._indicators.of(features, self.num_features, self.weight.dtype)
            with no_autocast(device):
                flat: Tensor = _IndicatorSum.apply(self.weight, indicators)  # type: ignore[no-untyped-call]
        else:
            if features.numel() and not torch.compiler.is_compiling():
                _check_ids(features, self.num_features)
            # Sum of the rows of each token's features; id 0 (padding / unseen) is left out.
            ids = features.reshape(B * T, F)
            flat = nn.functional.embedding_bag(ids, self.weight, mode="sum", padding_idx=0)
        return flat.reshape(B, T, self.num_tags)  # (B * T, K) -> (B, T, K)

    @property
    def _indicators(self) -> _LastIndicators:
        cache: _LastIndicators | None = self.__dict__.get("_indicator_cache")
        if cache is None:
            cache = self.__dict__["_indicator_cache"] = _LastIndicators()
        return cache


def _check_ids(features: Tensor, num_features: int) -> None:
    """Raise ``ValueError`` unless every id lies in ``[0, num_features)`` (one pass, one sync)."""
    low, top = torch.stack(torch.aminmax(features)).tolist()
    if top >= num_features or low < 0:
        raise ValueError(
            f"feature ids must lie in [0, num_features={num_features}), got ids up "
            f"to {top}: was the encoder built with the feature vocabulary of this Collator?"
        )


_CSR_DTYPES = (torch.float32, torch.float64)


def _tracing() -> bool:
    """``torch.compile``/``torch.export`` tracing: keep to the dense ``embedding_bag``."""
    return bool(torch.compiler.is_compiling())


class _Indicators:
    """The sparse matrices of one batch's ids ``(N, F)``: ``(N, V)`` for the sums, ``(V, N)`` for the gradient.

    The forward matrix is built at once; the transposed one when a backward first needs it.
    """

    def __init__(self, ids: Tensor, num_features: int, dtype: torch.dtype) -> None:
        self.ids, self.num_features, self.dtype = ids, num_features, dtype
        self.matrix = _indicator_matrix(ids, num_features, dtype)
        self._transposed: Tensor | None = None

    @property
    def transposed(self) -> Tensor:
        """The ``(V, N)`` CSR count matrix: row ``f`` holds the tokens of feature ``f``, in order."""
        if self._transposed is None:
            self._transposed = _transposed_matrix(self.ids, self.num_features, self.dtype)
        return self._transposed


class _LastIndicators:
    """The :class:`_Indicators` of the last ``features`` tensor seen, while it is alive and unchanged.

    Keyed by the tensor itself (a weak reference and its version counter), so a new batch, or the
    same tensor written in place, builds and checks anew; inference tensors (evaluation under
    ``torch.inference_mode``), which have no version counter, are never kept. Copies of the encoder
    start empty.
    """

    def __init__(self) -> None:
        self._key: tuple[weakref.ref[Tensor], int, int, torch.dtype] | None = None
        self._value: _Indicators | None = None

    def of(self, features: Tensor, num_features: int, dtype: torch.dtype) -> _Indicators:
        """The matrices of ``features`` ``(B, T, F)``, checked (``ValueError``) and built if new."""
        key = self._key
        if (
            self._value is not None
            and key is not None
            and key[0]() is features
            and key[1:] == (features._version, num_features, dtype)
        ):
            return self._value
        if features.numel():
            _check_ids(features, num_features)
        B, T, F = features.shape
        value = _Indicators(features.reshape(B * T, F), num_features, dtype)
        if not features.is_inference():  # an inference tensor has no version counter: not kept
            self._key = (weakref.ref(features), features._version, num_features, dtype)
            self._value = value
        return value

    def __deepcopy__(self, memo: dict[int, Any]) -> _LastIndicators:
        return _LastIndicators()

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._key, self._value = None, None


class _IndicatorSum(torch.autograd.Function):
    """``out[n] = sum of weight[ids[n, j]] over j with ids[n, j] > 0``, ``ids`` ``(N, F)``.

    Forward: the CSR product of :func:`_indicator_matrix`. Backward: the transposed matrix of
    :func:`_transposed_matrix` times the upstream gradient, ``grad_weight[f] = sum of grad[n]`` over
    the occurrences of ``f`` (row 0, padding and unseen features, has none), with no conversion of
    the forward matrix. The backward is not itself differentiable.
    """

    @staticmethod
    def forward(ctx: Any, weight: Tensor, indicators: _Indicators) -> Tensor:
        ctx.indicators = indicators
        return indicators.matrix @ weight

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        indicators: _Indicators = ctx.indicators
        if indicators.ids.numel() == 0:
            return grad.new_zeros(indicators.num_features, grad.shape[1]), None
        return indicators.transposed @ grad.contiguous(), None


def _indicator_matrix(ids: Tensor, num_features: int, dtype: torch.dtype) -> Tensor:
    """The ``(N, num_features)`` sparse CSR count matrix of ``ids`` ``(N, F)``, id 0 left out.

    Row ``n`` has a 1 in column ``f`` for each occurrence of ``f`` among ``ids[n]`` (duplicates add up,
    as in ``embedding_bag``); columns within a row are left unsorted, which the CSR product accepts.
    """
    keep = ids > 0  # (N, F)
    crow = torch.zeros(ids.shape[0] + 1, dtype=torch.int64, device=ids.device)
    crow[1:] = keep.sum(1).cumsum(0)
    cols = ids[keep]  # row-major: grouped by row
    values = torch.ones(cols.numel(), dtype=dtype, device=ids.device)
    with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta state"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, cols.long(), values, (ids.shape[0], num_features))


def _transposed_matrix(ids: Tensor, num_features: int, dtype: torch.dtype) -> Tensor:
    """The ``(num_features, N)`` CSR count matrix of ``ids`` ``(N, F)``: the transpose of :func:`_indicator_matrix`.

    Row ``f`` lists the tokens ``n`` with ``f`` among ``ids[n]`` (once per occurrence), in the order of
    the ids (a stable sort by feature), so a product with it sums each feature's tokens in the order
    an ``index_add_`` over the ids would; row 0 (padding / unseen) is empty.
    """
    flat = ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=num_features)
    skip = int(counts[0])  # id 0 sorts first: left out
    tokens = order[skip:] // ids.shape[1]
    crow = torch.zeros(num_features + 1, dtype=torch.int64, device=ids.device)
    crow[2:] = counts[1:].cumsum(0)
    values = torch.ones(tokens.numel(), dtype=dtype, device=ids.device)
    with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta state"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, tokens, values, (num_features, ids.shape[0]))
