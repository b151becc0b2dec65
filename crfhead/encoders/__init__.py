"""Emission encoders: a :class:`~crfhead.data.Batch` in, emissions ``(B, T, K)`` out.

Every encoder is a plain ``nn.Module`` built from typed keyword arguments (so a YAML config with
``class_path`` and ``init_args`` can choose it) and follows one protocol, :class:`EmissionEncoder`:

* ``forward(batch) -> Tensor``: float emissions ``(B, T, K)`` on the encoder's device (the encoder
  moves the batch tensors it reads; the batch may stay on the CPU), 0 at padded positions, for the
  CRF with ``batch.mask``;
* ``needs``: the :class:`~crfhead.data.Batch` fields it reads, a subset of
  ``{"words", "chars", "features", "sentences"}`` -- configure the
  :class:`~crfhead.data.Collator` to build them. The class declares them too, before any data is
  loaded (``train.py`` then builds only those vocabularies): its class attribute ``needs``, or a
  ``needs_for(init_args)`` class method where they depend on the config
  (:meth:`BiLSTMEncoder.needs_for`);
* ``parameter_groups()``: optimizer groups ``[{"name": ..., "params": [...]}]`` (``"head"``, and
  ``"backbone"`` for a pretrained transformer) so the training code can give each its learning rate.

The encoders:

* :class:`IndicatorEncoder` -- the classic linear-chain CRF: one weight per (indicator feature, tag),
  summed over each token's active features (``needs = {"features"}``).
* :class:`BiLSTMEncoder` -- word embeddings (+ a character CNN or BiLSTM) → BiLSTM → linear
  (``needs = {"words"}`` or ``{"words", "chars"}``).
* :class:`WordWindowEncoder` -- one weight per (offset, word, tag) over a window of word ids: the
  indicator CRF of Theorem 3 (``offsets=(0,)``) and the MEMM's lookahead (``needs = {"words"}``).
* :class:`TransformerEncoder` -- a local HuggingFace model over subword windows, pooled to words →
  linear (``needs = {"sentences"}``); ``transformers`` is imported when one is built.

Pretrained word vectors for the BiLSTM's embedding (:mod:`crfhead.encoders.vectors`, its
``word_vectors``): :class:`TextVectors` (GloVe / word2vec text files) and :class:`DistilledVectors`
(static vectors distilled from a local transformer, cached on disk).
"""

from typing import Any, Protocol

from torch import Tensor

from crfhead.data.batching import Batch
from crfhead.encoders.bilstm import CHAR_ENCODERS, BiLSTMEncoder
from crfhead.encoders.indicator import IndicatorEncoder
from crfhead.encoders.transformer import TransformerEncoder, default_model_dir
from crfhead.encoders.vectors import (
    Coverage,
    DistilledVectors,
    TextVectors,
    WordVectors,
    load_word_vectors,
)
from crfhead.encoders.window import WordWindowEncoder

__all__ = [
    "BATCH_FIELDS",
    "CHAR_ENCODERS",
    "BiLSTMEncoder",
    "Coverage",
    "DistilledVectors",
    "EmissionEncoder",
    "IndicatorEncoder",
    "TextVectors",
    "TransformerEncoder",
    "WordVectors",
    "WordWindowEncoder",
    "default_model_dir",
    "load_word_vectors",
]

BATCH_FIELDS = frozenset({"words", "chars", "features", "sentences"})
"""The :class:`~crfhead.data.Batch` fields an encoder may need (``mask`` is always there)."""


class EmissionEncoder(Protocol):
    """What the tagger expects of an encoder (every class here satisfies it).

    Optional, read where present: ``tag_batch_size: int``, the chains per batch
    :class:`~crfhead.inference.TextTagger` uses by default (else
    :data:`~crfhead.inference.text_tagger.BATCH_SIZE`; the indicator and BiLSTM encoders name 256,
    their batches' fixed cost outweighing the padding).
    """

    needs: frozenset[str]
    num_tags: int

    def __call__(self, batch: Batch) -> Tensor:
        """Emissions ``(B, T, K)`` of ``batch`` on the encoder's device."""
        ...

    def parameter_groups(self) -> list[dict[str, Any]]:
        """Optimizer parameter groups ``[{"name": ..., "params": [...]}]``."""
        ...
