"""The tagger as a plain ``nn.Module``: encoder → emissions ``(B, T, K)`` → head (CRF, MEMM, perceptron, HMM). No Lightning.

Components come from config specs (:mod:`crfhead.training.build`); the head is any
:class:`~crfhead.heads.base.ChainHead`, whose contract says whether it scores words itself and
whether it is fitted by counting (:class:`~crfhead.heads.base.CountingHead`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from crfhead.data.batching import Batch
from crfhead.data.sentence import LabelVocab
from crfhead.heads.base import ChainHead, CountingHead
from crfhead.training.build import DEFAULT_HEAD, build_head

__all__ = ["Tagger"]


class Tagger(nn.Module):
    """Encoder → emissions → head, with the label vocabulary to decode strings.

    Args:
        encoder: any module mapping a :class:`~crfhead.data.batching.Batch` to emissions ``(B, T, K)``.
        labels: the label vocabulary.
        head: the structured head (default: a CRF constrained to the labels' scheme).
    """

    def __init__(
        self, encoder: nn.Module, labels: LabelVocab, head: ChainHead | None = None
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.labels = labels
        self.head: ChainHead = head if head is not None else build_head(DEFAULT_HEAD, labels)

    @property
    def counting(self) -> CountingHead | None:
        """The head, if it is fitted by counting (the HMM) rather than by gradient steps."""
        return self.head if isinstance(self.head, CountingHead) else None

    @property
    def needs(self) -> frozenset[str]:
        """The batch fields the encoder (or a word-scoring head) reads."""
        if self.head.scores_words:
            return self.head.needs
        needs: frozenset[str] = getattr(self.encoder, "needs", frozenset())
        return needs

    def forward(self, batch: Batch) -> Tensor:
        """Emissions ``(B, T, K)``: the encoder's, or the head's own for a word-scoring head."""
        if self.head.scores_words:
            return self.head.emissions_from_batch(batch)
        emissions: Tensor = self.encoder(batch)
        return emissions

    def loss(self, batch: Batch, reduction: str = "mean") -> Tensor:
        """The head's training loss on the batch's gold tags."""
        if batch.tags is None:
            raise ValueError("the batch has no tags to compute a loss on")
        emissions = self(batch)
        return self.head.loss(
            emissions, batch.tags.to(emissions.device), batch.mask.to(emissions.device), reduction
        )

    @torch.no_grad()
    def accumulate(self, batch: Batch) -> None:
        """Add a batch's counts to a counting head (the HMM)."""
        if batch.tags is None or batch.words is None:
            raise ValueError("counting needs the batch's words and tags")
        if self.counting is None:
            raise TypeError(f"the {type(self.head).__name__} head is not fitted by counting")
        self.counting.accumulate(batch.words, batch.tags, batch.mask)

    def predict(self, batch: Batch) -> list[list[str]]:
        """Decoded tags (the head's ``decoder``) as strings, one list per sentence."""
        emissions = self(batch)
        return self.head.decode_labels(emissions, batch.mask.to(emissions.device))

    @torch.no_grad()
    def decode_with_loss(self, batch: Batch) -> tuple[list[list[str]], float]:
        """Predicted tags and the summed conditional log-loss of the gold tags (for metrics)."""
        emissions = self(batch)
        mask = batch.mask.to(emissions.device)
        pred = self.head.decode_labels(emissions, mask)
        nll = 0.0
        if batch.tags is not None:
            nll = float(self.head.nll(emissions, batch.tags.to(emissions.device), mask, "sum"))
        return pred, nll
