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
from crfhead.tensors import long_tensor

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
        """Pad and encode ``sentences``.

        Each field is built from one flat list of ids (the ``N`` tokens of the batch, row by row)
        scattered under the mask, and the characters from a table of the batch's distinct words:
        a few tensor calls a batch, not one per sentence or word.
        """
        sentences = list(sentences)
        lengths = [len(s) for s in sentences]
        T = max(lengths, default=0)
        mask = torch.arange(T)[None, :] < torch.tensor(lengths, dtype=torch.long)[:, None]
        tokens = [w for s in sentences for w in s.tokens]  # the N real tokens, row by row
        words = chars = feats = tags = None
        if self.words is not None:
            words = self._scatter(mask, self.words.encode(tokens), 0)
        if self.chars is not None:
            chars = self._chars(mask, tokens)
        if self.features is not None:
            templates, vocab = self.features
            feats = templates.ids([s.tokens for s in sentences], vocab.stoi)
        allowed = None
        if self.labels is not None and all(s.tags is not None for s in sentences):
            gold = [t for s in sentences for t in (s.tags or ())]
            tags = self._scatter(mask, self.labels.encode(gold), PAD_LABEL)
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

    @staticmethod
    def _scatter(mask: Tensor, ids: list[int], fill: int) -> Tensor:
        """``(B, T)`` long: ``ids`` (one per real token, row by row) under ``mask``, ``fill`` elsewhere."""
        out = torch.full(mask.shape, fill, dtype=torch.long)
        out[mask] = long_tensor(ids)
        return out

    def _chars(self, mask: Tensor, tokens: list[str]) -> Tensor:
        """``(B, T, C)`` character ids of ``tokens`` under ``mask`` (0 = padding)."""
        assert self.chars is not None
        distinct: dict[str, int] = {}
        index = [distinct.setdefault(w, len(distinct)) for w in tokens]
        cut = self.max_word_len
        C = max((min(len(w), cut) for w in distinct), default=1) or 1
        table = [
            ids + [0] * (C - len(ids)) for ids in (self.chars.encode(w[:cut]) for w in distinct)
        ]
        chars = torch.zeros(*mask.shape, C, dtype=torch.long)
        if table:
            rows = torch.tensor(table, dtype=torch.long)  # (U, C), one row per distinct word
            chars[mask] = rows.index_select(0, long_tensor(index))
        return chars

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
