"""The classic linear-chain CRF encoder: one learned weight per (indicator feature, tag).

With :class:`~crfhead.data.FeatureTemplates` features, ``emissions[b, t, k]`` is the sum over the
active features ``f`` of token ``t`` of ``weight[f, k]``: the node potentials of Lafferty et al.'s
linear-chain CRF, with no hidden layer. Feature id 0 (padding, or a feature unseen in training) has
a fixed zero weight.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from crfhead.data.batching import Batch

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
        flat = nn.functional.embedding_bag(
            features.reshape(B * T, F), self.weight, mode="sum", padding_idx=0
        )  # (B * T, K)
        return flat.reshape(B, T, self.num_tags)
