"""The tagger as a plain ``nn.Module``: encoder → emissions ``(B, T, K)`` → CRF head. No Lightning.

The encoder is chosen by a ``{"class_path": ..., "init_args": {...}}`` spec (as in a config file) and
built with the sizes the data imposes (``num_tags``, ``num_features``, ``vocab_size``,
``char_vocab_size``), which :func:`build_encoder` fills in from the vocabularies. An unknown class or
an unknown ``init_args`` key raises ``ValueError`` naming it, before any training.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import torch
from torch import Tensor, nn

from crfhead.crf import CRF
from crfhead.data.batching import Batch
from crfhead.data.sentence import LabelVocab

__all__ = ["Tagger", "build_encoder"]

_SIZES = ("num_tags", "num_features", "vocab_size", "char_vocab_size")


def _resolve(class_path: str) -> type:
    module_name, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as err:
        raise ValueError(f"encoder class_path {class_path!r} cannot be imported: {err}") from None
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ValueError(f"encoder class_path {class_path!r} is not an nn.Module class")
    return cls


def build_encoder(spec: dict[str, Any], vocabs: dict[str, Any]) -> nn.Module:
    """Instantiate an encoder from its spec, filling the data-dependent sizes from ``vocabs``.

    Args:
        spec: ``{"class_path": "crfhead.encoders.BiLSTMEncoder", "init_args": {...}}``.
        vocabs: the data module's serialised vocabularies.

    Raises:
        ValueError: unknown class, unknown or data-owned ``init_args`` keys (named).
    """
    if "class_path" not in spec:
        raise ValueError(f"encoder spec needs a 'class_path', got keys {sorted(spec)}")
    cls = _resolve(spec["class_path"])
    # Overrides such as --model.encoder.init_args.x=1 may arrive flattened next to class_path.
    init_args = dict(spec.get("init_args") or {})
    init_args.update({k: v for k, v in spec.items() if k not in ("class_path", "init_args")})
    params = inspect.signature(cls).parameters
    bad = [k for k in init_args if k not in params]
    if bad:
        allowed = [p for p in params if p not in _SIZES]
        raise ValueError(f"unknown init_args {bad} for {spec['class_path']}; allowed: {allowed}")
    owned = [k for k in init_args if k in _SIZES]
    if owned:
        raise ValueError(f"init_args {owned} are set from the data; remove them from the config")
    sizes = {
        "num_tags": len(vocabs["labels"]["labels"]),
        "num_features": len(vocabs["features"]["items"]) + 2,
        "vocab_size": len(vocabs["words"]["items"]) + 2,
        "char_vocab_size": len(vocabs["chars"]["items"]) + 2,
    }
    for name in _SIZES:
        if name in params:
            init_args[name] = sizes[name]
    module: nn.Module = cls(**init_args)
    return module


class Tagger(nn.Module):
    """Encoder → emissions → CRF, with the label vocabulary to decode strings.

    Args:
        encoder: any module mapping a :class:`~crfhead.data.batching.Batch` to emissions ``(B, T, K)``.
        labels: the label vocabulary; its scheme constrains the CRF when ``constrained``.
        constrained: apply the scheme's allowed starts / transitions / ends in training and decoding.
    """

    def __init__(self, encoder: nn.Module, labels: LabelVocab, constrained: bool = True) -> None:
        super().__init__()
        self.encoder = encoder
        self.labels = labels
        self.crf = CRF(
            len(labels), labels=labels.labels, scheme=labels.scheme if constrained else None
        )

    @property
    def needs(self) -> frozenset[str]:
        """The batch fields the encoder reads."""
        needs: frozenset[str] = getattr(self.encoder, "needs", frozenset())
        return needs

    def forward(self, batch: Batch) -> Tensor:
        """Emissions ``(B, T, K)``."""
        emissions: Tensor = self.encoder(batch)
        return emissions

    def loss(self, batch: Batch, reduction: str = "mean") -> Tensor:
        """CRF negative log-likelihood of the batch's gold tags."""
        if batch.tags is None:
            raise ValueError("the batch has no tags to compute a loss on")
        emissions = self(batch)
        return self.crf.nll(
            emissions, batch.tags.to(emissions.device), batch.mask.to(emissions.device), reduction
        )

    def predict(self, batch: Batch) -> list[list[str]]:
        """Viterbi tags as strings, one list per sentence."""
        emissions = self(batch)
        return self.crf.decode_labels(emissions, batch.mask.to(emissions.device))

    @torch.no_grad()
    def decode_with_loss(self, batch: Batch) -> tuple[list[list[str]], float]:
        """Predicted tags and the summed NLL of the gold tags (for metrics)."""
        emissions = self(batch)
        mask = batch.mask.to(emissions.device)
        pred = self.crf.decode_labels(emissions, mask)
        nll = 0.0
        if batch.tags is not None:
            nll = float(
                self.crf.nll(emissions, batch.tags.to(emissions.device), mask, reduction="sum")
            )
        return pred, nll
