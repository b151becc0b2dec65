"""The tagger as a plain ``nn.Module``: encoder → emissions ``(B, T, K)`` → head (CRF, MEMM, perceptron, HMM). No Lightning.

Components come from config specs (:mod:`crfhead.model.build`); the head is any
:class:`~crfhead.heads.base.ChainHead`, whose contract says where a batch's emissions come from and
how it is fitted (:attr:`Tagger.fit`, a strategy of :mod:`crfhead.heads.fit`). An optional
:class:`~crfhead.model.group_decoder.GroupDecoder` decodes each group of a batch jointly in place of
the head's decoder (higher-order CRFs); one that learns its weights trains them with the
cost-augmented loss of the group, which the head's fit must give (the structured perceptron's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from crfhead.data.batching import Batch
from crfhead.data.sentence import LabelVocab, Sentence
from crfhead.data.vocab import Vocab
from crfhead.engine.potentials import ChainPotentials
from crfhead.heads.base import ChainHead, path_labels, reduce_loss
from crfhead.heads.fit import Fit
from crfhead.model.build import (
    DEFAULT_ENCODER,
    DEFAULT_HEAD,
    build_decoder,
    build_encoder,
    build_head,
)
from crfhead.model.group_decoder import GroupDecoder

__all__ = ["Tagger"]


class Tagger(nn.Module):
    """Encoder → emissions → head, with the label vocabulary to decode strings.

    Args:
        encoder: any module mapping a :class:`~crfhead.data.batching.Batch` to emissions ``(B, T, K)``.
        labels: the label vocabulary.
        head: the structured head (default: a CRF constrained to the labels' scheme).
        decoder: decodes each group of a batch jointly instead of the head's decoder (``None``: the
            head decodes every sentence alone).

    Attributes:
        fit: how the head is fitted (its class's :attr:`~crfhead.heads.base.ChainHead.fitting`).

    Raises:
        TypeError: a decoder that learns its weights with a head whose fit has no cost-augmented
            loss (any head but the perceptron).
    """

    def __init__(
        self,
        encoder: nn.Module,
        labels: LabelVocab,
        head: ChainHead | None = None,
        decoder: GroupDecoder | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.labels = labels
        self.head: ChainHead = head if head is not None else build_head(DEFAULT_HEAD, labels)
        self.fit: Fit = self.head.fitting(self.head)
        if decoder is not None and decoder.learns:
            self.fit.require_cost_augmentation(type(decoder).__name__)
        self.decoder = decoder

    @classmethod
    def build(
        cls,
        vocabs: dict[str, Any],
        encoder: dict[str, Any] | None = None,
        head: dict[str, Any] | None = None,
        constrained: bool = True,
        decoder: dict[str, Any] | None = None,
    ) -> Tagger:
        """The tagger a configuration describes (``train.py``'s, a checkpoint's, a saved model's).

        Args:
            vocabs: the data module's serialised vocabularies.
            encoder: the encoder's ``{"class_path", "init_args"}`` spec (default: indicator features).
            head: the head's spec (default: the CRF).
            constrained: constrain the head to the labels' scheme.
            decoder: a group decoder's spec, or ``None``.
        """
        labels = LabelVocab.from_dict(vocabs["labels"])
        return cls(
            build_encoder(encoder or dict(DEFAULT_ENCODER), vocabs),
            labels,
            build_head(
                head or dict(DEFAULT_HEAD),
                labels,
                constrained,
                vocab_size=Vocab.size_of(vocabs["words"]) if "words" in vocabs else None,
            ),
            None if decoder is None else build_decoder(decoder, labels),
        )

    @property
    def needs(self) -> frozenset[str]:
        """The batch fields the encoder (or a word-scoring head) reads."""
        return self.head.reads(getattr(self.encoder, "needs", frozenset()))

    def lengths(self, sentences: Sequence[Sentence]) -> list[int]:
        """How long each sentence is in a padded batch (what ``length_window`` batching sorts by).

        The encoder's ``lengths`` where it has one (a transformer's subword pieces), else words.
        """
        lengths = getattr(self.encoder, "lengths", None)
        if callable(lengths):
            return list(lengths(sentences))
        return [len(s.tokens) for s in sentences]

    def forward(self, batch: Batch) -> Tensor:
        """Emissions ``(B, T, K)``: the encoder's, or the head's own for a word-scoring head."""
        return self.head.emissions_for(batch, self.encoder)

    def fit_step(self, batch: Batch, reduction: str = "mean") -> Tensor | None:
        """One training batch as the head's fit takes it: the loss to step on, ``None`` for counting."""
        if self.decoder is not None and self.decoder.learns:
            return self.loss(batch, reduction)
        return self.fit.step(batch, lambda: self(batch), reduction)

    def loss(self, batch: Batch, reduction: str = "mean") -> Tensor:
        """The head's training loss on the batch's gold tags."""
        if batch.tags is None:
            raise ValueError("the batch has no tags to compute a loss on")
        emissions = self(batch)
        tags, mask = batch.tags.to(emissions.device), batch.mask.to(emissions.device)
        if batch.allowed is not None:
            # Partial labels (issue 29): the loss of the allowed paths (log Z - log Z_allowed for
            # the CRF); tags are -100 at partial positions, so the sets alone are the gold. A head
            # that cannot train on them (the HMM) raises its own message, passed on as is.
            if self.decoder is not None and self.decoder.learns:
                raise ValueError(
                    f"the group decoder {type(self.decoder).__name__} learns its weights from whole "
                    "gold labellings; it cannot train on partial labels (label sets or * cells in "
                    f"sentences {[s.id for s in batch.sentences if s.is_partial][:5]}): train "
                    "without the learning decoder or on fully labelled data"
                )
            return self.head.loss(
                emissions, None, mask, reduction, allowed=batch.allowed.to(emissions.device)
            )
        if self.decoder is None or not self.decoder.learns:
            return self.head.loss(emissions, tags, mask, reduction)
        pot = self.head.potentials(emissions, mask)
        self.head.gold_score(pot, emissions, tags)  # validates the gold tags
        losses = self.decoder.loss(pot, self.fit.cost_augmented(pot, tags.long()), batch)  # (G,)
        return reduce_loss(losses, torch.ones_like(losses, dtype=torch.bool), reduction)

    def decode_labels(self, emissions: Tensor, batch: Batch) -> list[list[str]]:
        """The group decoder's labelling, or the head's, as strings, one list per sentence."""
        return self.labels_from(
            self.head.potentials(emissions, batch.mask.to(emissions.device)), batch
        )

    def labels_from(self, pot: ChainPotentials, batch: Batch) -> list[list[str]]:
        """:meth:`decode_labels` on the head's potentials already built for ``batch``.

        Raises:
            ValueError: a sentence with no allowed tag path (the head's message).
        """
        if self.decoder is None:
            return path_labels(self.head.predict_from(pot), pot.mask, self.labels.labels)
        tags = self.decoder.decode(pot, batch)
        return [[self.labels.labels[k] for k in row if k >= 0] for row in tags.tolist()]

    def predict(self, batch: Batch) -> list[list[str]]:
        """Decoded tags (the group decoder's, else the head's ``decoder``) as strings, per sentence."""
        return self.decode_labels(self(batch), batch)

    @torch.no_grad()
    def decode_with_loss(self, batch: Batch) -> tuple[list[list[str]], float]:
        """Predicted tags and the summed conditional log-loss of the gold tags (for metrics)."""
        emissions = self(batch)
        pred = self.decode_labels(emissions, batch)
        return pred, self.gold_nll(emissions, batch)

    def gold_nll(self, emissions: Tensor, batch: Batch) -> float:
        """The summed log-loss of the batch's gold (0.0 without tags).

        With partial labels (``batch.allowed``), the loss of the allowed paths; else of the tags.
        """
        if batch.tags is None:
            return 0.0
        mask = batch.mask.to(emissions.device)
        if batch.allowed is not None:
            allowed = batch.allowed.to(emissions.device)
            return float(self.head.nll(emissions, mask=mask, reduction="sum", allowed=allowed))
        return float(self.head.nll(emissions, batch.tags.to(emissions.device), mask, "sum"))
