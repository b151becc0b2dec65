"""From sentences to padded tensors: the :class:`Batch` and the :class:`Collator` that builds it.

:class:`Collator` is a ``DataLoader`` ``collate_fn``: ``(B, T)`` word ids, ``(B, T, C)`` character ids,
``(B, T, F)`` feature ids (:mod:`crfhead.data.features`; unseen features are 0, ignored), ``(B, T)``
tag ids (``-100`` at padding) and the ``(B, T)`` bool mask, with the vocabularies of
:mod:`crfhead.data.vocab`.

Partial labels (issue 29): when some sentence of the batch has a label set
(:attr:`Sentence.allowed <crfhead.data.sentence.Sentence.allowed>`), the batch carries
``allowed``, ``(B, T, K)`` bool: one label at a known position, the set at a partial one, every
label at ``*`` and at padding (ignored there); ``tags`` holds ``-100`` at partial positions, as at
padding, so nothing reads a placeholder as gold. A batch of fully labelled sentences has
``allowed=None`` and costs nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from crfhead.data.features import FeatureTemplates
from crfhead.data.sentence import ANY, LabelVocab, Sentence
from crfhead.data.vocab import Vocab

__all__ = ["PAD_LABEL", "Batch", "Collator", "collator_for"]

PAD_LABEL = -100


@dataclass
class Batch:
    """A padded batch (``B`` sentences, ``T`` = longest, ``C`` = longest word, ``F`` = most features).

    Attributes:
        mask: ``(B, T)`` bool, True at real tokens.
        words: ``(B, T)`` word ids (0 at padding) or ``None``.
        chars: ``(B, T, C)`` character ids or ``None``.
        features: ``(B, T, F)`` feature ids (0 = padding / unseen) or ``None``.
        tags: ``(B, T)`` tag ids, ``-100`` at padding, or ``None`` for unlabelled text.
        sentences: the sentences themselves (tokens for transformer encoders, ids for output).
        groups: the groups a higher-order decoder decodes jointly, as lists of row indices into the
            batch (every row in exactly one), or ``None`` when the data is not grouped
            (:mod:`crfhead.data.grouping`).
        allowed: ``(B, T, K)`` bool, the labels each position may take, when some sentence has
            partial labels; ``None`` when every position has one gold tag (see the module doc).
    """

    mask: Tensor
    words: Tensor | None
    chars: Tensor | None
    features: Tensor | None
    tags: Tensor | None
    sentences: list[Sentence]
    groups: list[list[int]] | None = None
    allowed: Tensor | None = None

    def to(self, device: torch.device | str) -> Batch:
        """The batch with its tensors on ``device``."""

        def move(x: Tensor | None) -> Tensor | None:
            return None if x is None else x.to(device)

        return Batch(
            mask=self.mask.to(device),
            words=move(self.words),
            chars=move(self.chars),
            features=move(self.features),
            tags=move(self.tags),
            sentences=self.sentences,
            groups=self.groups,
            allowed=move(self.allowed),
        )


class Collator:
    """``collate_fn`` turning a list of :class:`Sentence` into a :class:`Batch`.

    Args:
        labels: tag vocabulary (``None``: no tags).
        words: word vocabulary (``None``: no word ids).
        chars: character vocabulary (``None``: no character ids).
        features: ``(templates, feature vocabulary)`` (``None``: no feature ids).
        max_word_len: characters kept per word.
    """

    def __init__(
        self,
        labels: LabelVocab | None = None,
        words: Vocab | None = None,
        chars: Vocab | None = None,
        features: tuple[FeatureTemplates, Vocab] | None = None,
        max_word_len: int = 24,
    ) -> None:
        self.labels = labels
        self.words = words
        self.chars = chars
        self.features = features
        self.max_word_len = max_word_len

    def __call__(self, sentences: Sequence[Sentence]) -> Batch:
        """Pad and encode ``sentences``."""
        sentences = list(sentences)
        B = len(sentences)
        T = max((len(s) for s in sentences), default=0)
        mask = torch.zeros(B, T, dtype=torch.bool)
        for i, s in enumerate(sentences):
            mask[i, : len(s)] = True
        words = chars = feats = tags = None
        if self.words is not None:
            words = torch.zeros(B, T, dtype=torch.long)
            for i, s in enumerate(sentences):
                words[i, : len(s)] = torch.tensor(self.words.encode(s.tokens), dtype=torch.long)
        if self.chars is not None:
            C = max(
                (min(len(w), self.max_word_len) for s in sentences for w in s.tokens), default=1
            )
            chars = torch.zeros(B, T, max(C, 1), dtype=torch.long)
            for i, s in enumerate(sentences):
                for j, w in enumerate(s.tokens):
                    ids = self.chars.encode(w[: self.max_word_len])
                    chars[i, j, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        if self.features is not None:
            templates, vocab = self.features
            feats = templates.ids([s.tokens for s in sentences], vocab.stoi)
        allowed = None
        if self.labels is not None and all(s.tags is not None for s in sentences):
            tags = torch.full((B, T), PAD_LABEL, dtype=torch.long)
            for i, s in enumerate(sentences):
                assert s.tags is not None
                tags[i, : len(s)] = torch.tensor(self.labels.encode(s.tags), dtype=torch.long)
            if any(s.is_partial for s in sentences):
                allowed = self._allowed(sentences, tags, T)
        return Batch(
            mask=mask,
            words=words,
            chars=chars,
            features=feats,
            tags=tags,
            sentences=sentences,
            allowed=allowed,
        )

    def _allowed(self, sentences: list[Sentence], tags: Tensor, T: int) -> Tensor:
        """``(B, T, K)`` label sets; sets ``tags`` to ``-100`` at partial positions, in place."""
        assert self.labels is not None
        K = len(self.labels)
        allowed = torch.ones(len(sentences), T, K, dtype=torch.bool)
        for i, s in enumerate(sentences):
            sets = s.allowed or [None] * len(s)
            for j, a in enumerate(sets):
                if a is None:
                    allowed[i, j] = False
                    allowed[i, j, int(tags[i, j])] = True
                    continue
                tags[i, j] = PAD_LABEL
                if a == ANY:
                    continue
                allowed[i, j] = False
                try:
                    ids = self.labels.encode(a)
                except ValueError as err:
                    raise ValueError(f"sentence {s.id or i}, token {j + 1}: {err}") from None
                allowed[i, j, ids] = True
        return allowed


def collator_for(vocabs: dict[str, Any], needs: frozenset[str] | set[str]) -> Collator:
    """The collator that builds what an encoder ``needs`` from serialised ``vocabs`` (the data module's)."""
    features = None
    if "features" in needs:
        features = (
            FeatureTemplates(vocabs["templates"]),
            Vocab.from_dict(vocabs["features"]),
        )
    return Collator(
        labels=LabelVocab.from_dict(vocabs["labels"]),
        words=Vocab.from_dict(vocabs["words"]) if "words" in needs else None,
        chars=Vocab.from_dict(vocabs["chars"]) if "chars" in needs else None,
        features=features,
    )
