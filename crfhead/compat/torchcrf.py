"""pytorch-crf 0.7.2's ``CRF`` API on crfhead's engine: switch by changing one import.

``from crfhead.compat.torchcrf import CRF`` replaces ``from torchcrf import CRF``: same constructor
(``num_tags, batch_first=False``), same parameter names (its ``state_dict`` loads unchanged), ``forward``
returns the log-likelihood (not a loss) reduced by ``"none" | "sum" | "mean" | "token_mean"`` (default
``"sum"``), and ``decode`` returns ``List[List[int]]``. Unlike pytorch-crf, masks need not have the first
time step on (masks with holes are fine) and may be bool or uint8.
"""

from __future__ import annotations

import torch
from torch import Tensor

from crfhead.heads.crf import CRF as _CRF

__all__ = ["CRF"]


class CRF(_CRF):
    """pytorch-crf-compatible CRF layer.

    Args:
        num_tags: number of tags.
        batch_first: whether inputs are ``(B, T, ...)``; if False (the default, as in pytorch-crf)
            they are ``(T, B, ...)``.
    """

    def __init__(self, num_tags: int, batch_first: bool = False) -> None:
        super().__init__(num_tags)
        self.batch_first = batch_first

    def extra_repr(self) -> str:  # noqa: D102
        return f"num_tags={self.num_tags}"

    def _to_batch_first(
        self, emissions: Tensor, tags: Tensor | None, mask: Tensor | None
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        if mask is not None:
            if mask.dtype not in (torch.bool, torch.uint8):
                raise ValueError(f"mask must be bool or uint8, got {mask.dtype}")
            mask = mask.bool()
        if not self.batch_first:
            emissions = emissions.transpose(0, 1)
            tags = tags.transpose(0, 1) if tags is not None else None
            mask = mask.transpose(0, 1) if mask is not None else None
        return emissions, tags, mask

    def forward(
        self,
        emissions: Tensor,
        tags: Tensor,
        mask: Tensor | None = None,
        reduction: str = "sum",
    ) -> Tensor:
        """Log-likelihood of ``tags`` (``-nll``), reduced as pytorch-crf does."""
        emissions, tags_bf, mask = self._to_batch_first(emissions, tags, mask)
        assert tags_bf is not None
        return -self.nll(emissions, tags_bf, mask, reduction=reduction)

    def decode(  # type: ignore[override]
        self, emissions: Tensor, mask: Tensor | None = None
    ) -> list[list[int]]:
        """Viterbi paths as lists of tag ids, one per sequence (masked positions dropped)."""
        emissions, _, mask = self._to_batch_first(emissions, None, mask)
        paths = super().decode(emissions, mask).tolist()
        return [[tag for tag in row if tag >= 0] for row in paths]
