"""The classic linear-chain CRF encoder: one learned weight per (indicator feature, tag).

With :class:`~crfhead.data.FeatureTemplates` features, ``emissions[b, t, k]`` is the sum over the
active features ``f`` of token ``t`` of ``weight[f, k]``: the node potentials of Lafferty et al.'s
linear-chain CRF, with no hidden layer. Feature id 0 (padding, or a feature unseen in training) has
a fixed zero weight.

On the CPU the forward sums are a sparse ``(tokens, features)`` 0/1 CSR matrix times the weights,
and the backward scatters each token's upstream gradient onto its features' rows with one
``index_add_`` (:class:`_IndicatorSum`): autograd's own backward of the sparse product would
transpose the matrix (a conversion and a sort), and ``embedding_bag``'s sorts the ids; the scatter
needs neither (``scripts/bench_training.py`` times a training step). Elsewhere (other devices,
half-precision weights, ``torch.compile``/``torch.export``) ``embedding_bag``. Both give the same
sums; under autocast both stay in the weights' dtype.
"""

from __future__ import annotations

import warnings
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
    """

    needs: frozenset[str] = frozenset({"features"})

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
        if features.numel() and not torch.compiler.is_compiling():
            top = int(features.max())
            if top >= self.num_features or int(features.min()) < 0:
                raise ValueError(
                    f"feature ids must lie in [0, num_features={self.num_features}), got ids up "
                    f"to {top}: was the encoder built with the feature vocabulary of this Collator?"
                )
        # Sum of the rows of each token's features; id 0 (padding / unseen) is left out.
        ids = features.reshape(B * T, F)
        if device.type == "cpu" and self.weight.dtype in _CSR_DTYPES and not _tracing():
            # A sparse (B*T, V) 0/1 matrix times the weights: the same sums, with a cheaper
            # backward than embedding_bag's on CPU (building the matrix included). The
            # sparse product has no half-precision kernel, so it runs outside autocast (as
            # embedding_bag does: autocast leaves it in the weights' dtype).
            with no_autocast(device):
                flat: Tensor = _IndicatorSum.apply(ids, self.weight)  # type: ignore[no-untyped-call]
        else:
            flat = nn.functional.embedding_bag(ids, self.weight, mode="sum", padding_idx=0)
        return flat.reshape(B, T, self.num_tags)  # (B * T, K) -> (B, T, K)


_CSR_DTYPES = (torch.float32, torch.float64)


def _tracing() -> bool:
    """``torch.compile``/``torch.export`` tracing: keep to the dense ``embedding_bag``."""
    return bool(torch.compiler.is_compiling())


class _IndicatorSum(torch.autograd.Function):
    """``out[n] = sum of weight[ids[n, j]] over j with ids[n, j] > 0``, ``ids`` ``(N, F)``.

    Forward: the CSR product of :func:`_indicator_matrix`. Backward: ``grad_weight[f] += grad[n]``
    for every occurrence of ``f`` in ``ids[n]``, one ``index_add_`` over all ``N * F`` ids (row 0,
    padding and unseen features, is then zeroed), so no transpose or sort of the ids. The gradient
    with respect to ``ids`` is ``None`` (integer ids); the backward is not itself differentiable.
    """

    @staticmethod
    def forward(ctx: Any, ids: Tensor, weight: Tensor) -> Tensor:
        ctx.save_for_backward(ids)
        ctx.num_features = weight.shape[0]
        return _indicator_matrix(ids, weight.shape[0], weight.dtype) @ weight

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[None, Tensor]:
        (ids,) = ctx.saved_tensors
        N, F = ids.shape
        K = grad.shape[1]
        grad_weight = grad.new_zeros(ctx.num_features, K)
        # (N, K) -> (N, F, K) as a view, then (N * F, K): one row per id occurrence.
        grad_weight.index_add_(0, ids.reshape(-1), grad.unsqueeze(1).expand(N, F, K).reshape(-1, K))
        grad_weight[0] = 0  # id 0 is padding / unseen: never trained
        return None, grad_weight


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
