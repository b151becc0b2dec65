"""The tagger as a plain ``nn.Module``: encoder → emissions ``(B, T, K)`` → head (CRF, MEMM, perceptron, HMM). No Lightning.

The encoder is chosen by a ``{"class_path": ..., "init_args": {...}}`` spec (as in a config file) and
built with the sizes the data imposes (``num_tags``, ``num_features``, ``vocab_size``,
``char_vocab_size``), which :func:`build_encoder` fills in from the vocabularies. An unknown class or
an unknown ``init_args`` key raises ``ValueError`` naming it, before any training.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Protocol, cast

import torch
from torch import Tensor, nn

from crfhead.data.batching import Batch
from crfhead.data.sentence import LabelVocab
from crfhead.head import ChainHead

__all__ = ["DEFAULT_HEAD", "Head", "Tagger", "build_encoder", "build_head"]

DEFAULT_HEAD: dict[str, Any] = {"class_path": "crfhead.crf.CRF"}


class Head(Protocol):
    """What the training code asks of a head (every :class:`~crfhead.head.ChainHead`).

    A head that scores words itself (the HMM) also has ``emissions_from_batch(batch)`` and ``needs``;
    a head fitted by counting has ``accumulate(words, tags, mask)`` instead of gradient steps.
    """

    def loss(self, emissions: Tensor, tags: Tensor, mask: Tensor | None, reduction: str) -> Tensor:
        """The training loss."""
        ...

    def nll(self, emissions: Tensor, tags: Tensor, mask: Tensor | None, reduction: str) -> Tensor:
        """The conditional log-loss ``-log p(z | x)`` (reported as ``log_loss``)."""
        ...

    def decode_labels(self, emissions: Tensor, mask: Tensor | None) -> list[list[str]]:
        """The predicted label strings."""
        ...


def _resolve(class_path: str, what: str) -> type:
    module_name, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as err:
        raise ValueError(f"{what} class_path {class_path!r} cannot be imported: {err}") from None
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ValueError(f"{what} class_path {class_path!r} is not an nn.Module class")
    return cls


def _build(spec: dict[str, Any], provided: dict[str, Any], what: str) -> nn.Module:
    """Instantiate ``spec``'s class with its ``init_args`` plus the ``provided`` data-owned arguments."""
    if "class_path" not in spec:
        raise ValueError(f"{what} spec needs a 'class_path', got keys {sorted(spec)}")
    cls = _resolve(spec["class_path"], what)
    # Overrides such as --model.encoder.init_args.x=1 may arrive flattened next to class_path.
    init_args = dict(spec.get("init_args") or {})
    init_args.update({k: v for k, v in spec.items() if k not in ("class_path", "init_args")})
    params = inspect.signature(cls).parameters
    bad = [k for k in init_args if k not in params]
    if bad:
        allowed = [p for p in params if p not in provided]
        raise ValueError(f"unknown init_args {bad} for {spec['class_path']}; allowed: {allowed}")
    owned = [k for k in init_args if k in provided]
    if owned:
        raise ValueError(f"init_args {owned} are set from the data; remove them from the config")
    init_args.update({k: v for k, v in provided.items() if k in params})
    module: nn.Module = cls(**init_args)
    return module


def build_encoder(spec: dict[str, Any], vocabs: dict[str, Any]) -> nn.Module:
    """Instantiate an encoder from its spec, filling the data-dependent sizes from ``vocabs``.

    Args:
        spec: ``{"class_path": "crfhead.encoders.BiLSTMEncoder", "init_args": {...}}``.
        vocabs: the data module's serialised vocabularies.

    Raises:
        ValueError: unknown class, unknown or data-owned ``init_args`` keys (named).
    """
    sizes = {
        "num_tags": len(vocabs["labels"]["labels"]),
        "num_features": len(vocabs["features"]["items"]) + 2,
        "vocab_size": len(vocabs["words"]["items"]) + 2,
        "char_vocab_size": len(vocabs["chars"]["items"]) + 2,
    }
    return _build(spec, sizes, "encoder")


def build_head(
    spec: dict[str, Any],
    labels: LabelVocab,
    constrained: bool = True,
    vocab_size: int | None = None,
) -> nn.Module:
    """Instantiate a head (``crfhead.CRF`` by default) with ``num_tags``, ``labels`` and ``scheme``.

    A head takes emissions ``(B, T, K)`` and offers ``loss``, ``nll`` and ``decode_labels`` (the
    :class:`Head` protocol); the training code needs nothing else, so new heads slot in by
    ``class_path``: ``crfhead.crf.CRF``, ``crfhead.heads.MEMM``, ``crfhead.heads.StructuredPerceptron``,
    ``crfhead.hmm.HMM`` (which also takes ``vocab_size``).
    """
    provided: dict[str, Any] = {
        "num_tags": len(labels),
        "labels": labels.labels,
        "scheme": labels.scheme if constrained else None,
    }
    if vocab_size is not None:
        provided["vocab_size"] = vocab_size
    return _build(spec, provided, "head")


class Tagger(nn.Module):
    """Encoder → emissions → head, with the label vocabulary to decode strings.

    Args:
        encoder: any module mapping a :class:`~crfhead.data.batching.Batch` to emissions ``(B, T, K)``.
        labels: the label vocabulary.
        head: the structured head (default: a CRF constrained to the labels' scheme).
    """

    def __init__(
        self, encoder: nn.Module, labels: LabelVocab, head: nn.Module | None = None
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.labels = labels
        self.head = head if head is not None else build_head(DEFAULT_HEAD, labels)

    @property
    def structured(self) -> Head:
        """The head, typed by what the training code uses."""
        return cast(Head, self.head)

    @property
    def crf(self) -> ChainHead:
        """The head as a chain head (CRF, MEMM, perceptron or HMM: span probabilities need one)."""
        if not isinstance(self.head, ChainHead):
            raise TypeError(f"the head is a {type(self.head).__name__}, not a chain head")
        return self.head

    @property
    def scores_words(self) -> bool:
        """Whether the head makes its own emissions from word ids (the HMM), bypassing the encoder."""
        return hasattr(self.head, "emissions_from_batch")

    @property
    def counts(self) -> bool:
        """Whether the head is fitted by counting (``accumulate``) rather than by gradient steps."""
        return hasattr(self.head, "accumulate")

    @property
    def needs(self) -> frozenset[str]:
        """The batch fields the encoder (or a word-scoring head) reads."""
        if self.scores_words:
            head_needs: frozenset[str] = getattr(self.head, "needs", frozenset())
            return head_needs
        needs: frozenset[str] = getattr(self.encoder, "needs", frozenset())
        return needs

    def forward(self, batch: Batch) -> Tensor:
        """Emissions ``(B, T, K)``: the encoder's, or the head's own for a word-scoring head."""
        if self.scores_words:
            own: Tensor = self.head.emissions_from_batch(batch)  # type: ignore[operator]
            return own
        emissions: Tensor = self.encoder(batch)
        return emissions

    def loss(self, batch: Batch, reduction: str = "mean") -> Tensor:
        """The head's training loss on the batch's gold tags."""
        if batch.tags is None:
            raise ValueError("the batch has no tags to compute a loss on")
        emissions = self(batch)
        return self.structured.loss(
            emissions, batch.tags.to(emissions.device), batch.mask.to(emissions.device), reduction
        )

    @torch.no_grad()
    def accumulate(self, batch: Batch) -> None:
        """Add a batch's counts to a counting head (the HMM)."""
        if batch.tags is None or batch.words is None:
            raise ValueError("counting needs the batch's words and tags")
        self.head.accumulate(batch.words, batch.tags, batch.mask)  # type: ignore[operator]

    def predict(self, batch: Batch) -> list[list[str]]:
        """Decoded tags (the head's ``decoder``) as strings, one list per sentence."""
        emissions = self(batch)
        return self.structured.decode_labels(emissions, batch.mask.to(emissions.device))

    @torch.no_grad()
    def decode_with_loss(self, batch: Batch) -> tuple[list[list[str]], float]:
        """Predicted tags and the summed conditional log-loss of the gold tags (for metrics)."""
        emissions = self(batch)
        mask = batch.mask.to(emissions.device)
        pred = self.structured.decode_labels(emissions, mask)
        nll = 0.0
        if batch.tags is not None:
            nll = float(
                self.structured.nll(emissions, batch.tags.to(emissions.device), mask, "sum")
            )
        return pred, nll
