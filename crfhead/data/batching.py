"""From sentences to padded tensors: vocabularies, indicator feature templates and the collator.

* :class:`Vocab` -- strings ↔ ids with ``<pad>`` = 0 and ``<unk>`` = 1 (words, characters, features).
* :class:`FeatureTemplates` -- the classic linear-CRF indicator templates (the seed's finance tagger
  uses the word, its 3-letter prefix and suffix and two words each side; word shape and a bias are
  there too). Each token gets a list of feature strings; a feature :class:`Vocab` built on training data
  maps them to ids, unseen features to 0 (ignored).
* :class:`Collator` -- a ``DataLoader`` ``collate_fn``: ``(B, T)`` word ids, ``(B, T, C)`` character
  ids, ``(B, T, F)`` feature ids, ``(B, T)`` tag ids (``-100`` at padding) and the ``(B, T)`` bool mask.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from crfhead.data.sentence import LabelVocab, Sentence

__all__ = [
    "TEMPLATES",
    "Batch",
    "Collator",
    "FeatureTemplates",
    "Vocab",
    "check_word_ids",
    "word_shape",
]

PAD_LABEL = -100


class Vocab:
    """Strings ↔ ids; id 0 is padding and id 1 the unknown symbol.

    Args:
        items: the known strings, in id order after ``<pad>`` and ``<unk>``.
        lower: lowercase strings before lookup.
    """

    PAD = "<pad>"
    UNK = "<unk>"

    def __init__(self, items: Iterable[str] = (), lower: bool = False) -> None:
        self.lower = lower
        self.itos: list[str] = [self.PAD, self.UNK]
        self.stoi: dict[str, int] = {self.PAD: 0, self.UNK: 1}
        for item in items:
            self.add(item)

    @classmethod
    def build(
        cls,
        items: Iterable[str],
        *,
        min_count: int = 1,
        max_size: int | None = None,
        lower: bool = False,
    ) -> Vocab:
        """The strings seen at least ``min_count`` times, most frequent first (ties: first seen)."""
        counts = Counter(x.lower() if lower else x for x in items)
        kept = [x for x, n in counts.most_common() if n >= min_count]
        return cls(kept[:max_size] if max_size is not None else kept, lower=lower)

    def add(self, item: str) -> int:
        """Add ``item`` if new; return its id."""
        key = item.lower() if self.lower else item
        if key not in self.stoi:
            self.stoi[key] = len(self.itos)
            self.itos.append(key)
        return self.stoi[key]

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, item: object) -> bool:
        return isinstance(item, str) and (item.lower() if self.lower else item) in self.stoi

    def id(self, item: str) -> int:
        """The id of ``item``, 1 (``<unk>``) if unknown."""
        return self.stoi.get(item.lower() if self.lower else item, 1)

    def encode(self, items: Iterable[str]) -> list[int]:
        """Ids of ``items`` (unknown → 1)."""
        return [self.id(x) for x in items]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form, stored in checkpoints."""
        return {"items": self.itos[2:], "lower": self.lower}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Vocab:
        """Inverse of :meth:`to_dict`."""
        return cls(data["items"], lower=bool(data.get("lower", False)))


def word_shape(word: str) -> str:
    """Collapsed word shape: ``"Kestrel"`` → ``"Xx"``, ``"Q3"`` → ``"Xd"``, ``"$12.5"`` → ``"$d.d"``."""
    shape = re.sub(r"[A-Z]", "X", word)
    shape = re.sub(r"[a-z]", "x", shape)
    shape = re.sub(r"[0-9]", "d", shape)
    return re.sub(r"(.)\1+", r"\1", shape)


TEMPLATES = (
    "bias",
    "word",
    "lower",
    "prefix3",
    "suffix3",
    "shape",
    "window1",
    "window2",
    "left1",
    "left2",
    "right1",
    "right2",
)
"""Template names: ``window1`` adds the words at ±1, ``window2`` at ±2 (and ±1); ``left1``/``left2``
the words up to 1/2 to the left only, ``right1``/``right2`` up to 1/2 to the right only. A causal
(lookahead 0) MEMM uses ``left2``; one word of lookahead adds ``right1`` (Proposition 2 of the seed)."""

_OFFSETS = {
    "window1": (-1, 1),
    "window2": (-2, -1, 1, 2),
    "left1": (-1,),
    "left2": (-2, -1),
    "right1": (1,),
    "right2": (1, 2),
}


class FeatureTemplates:
    """Indicator feature templates for one token in context.

    Args:
        templates: names from :data:`TEMPLATES`; the default is the seed's finance tagger plus shape
            and bias.
    """

    def __init__(
        self,
        templates: Sequence[str] = ("bias", "word", "prefix3", "suffix3", "shape", "window2"),
    ) -> None:
        unknown = [t for t in templates if t not in TEMPLATES]
        if unknown:
            raise ValueError(f"unknown feature templates {unknown}; known: {list(TEMPLATES)}")
        self.templates = tuple(templates)

    def __call__(self, tokens: Sequence[str]) -> list[list[str]]:
        """The feature strings of every token: ``T`` lists."""
        out: list[list[str]] = []
        n = len(tokens)
        offsets = sorted({d for t in self.templates for d in _OFFSETS.get(t, ())})
        for i, word in enumerate(tokens):
            feats: list[str] = []
            for t in self.templates:
                if t == "bias":
                    feats.append("bias")
                elif t == "word":
                    feats.append(f"w={word}")
                elif t == "lower":
                    feats.append(f"lw={word.lower()}")
                elif t == "prefix3":
                    feats.append(f"p3={word[:3]}")
                elif t == "suffix3":
                    feats.append(f"s3={word[-3:]}")
                elif t == "shape":
                    feats.append(f"sh={word_shape(word)}")
            for d in offsets:
                j = i + d
                ctx = tokens[j] if 0 <= j < n else ("<s>" if j < 0 else "</s>")
                feats.append(f"w{d:+d}={ctx}")
            out.append(feats)
        return out

    @property
    def lookahead(self) -> int:
        """How many words to the right a token's features read (0: causal)."""
        return max([0, *(d for t in self.templates for d in _OFFSETS.get(t, ()))])

    def build_vocab(self, sentences: Iterable[Sentence], min_count: int = 1) -> Vocab:
        """The feature vocabulary of training sentences."""
        return Vocab.build(
            (f for s in sentences for feats in self(s.tokens) for f in feats), min_count=min_count
        )

    def to_dict(self) -> dict[str, Any]:  # noqa: D102
        return {"templates": list(self.templates)}


def check_word_ids(words: Tensor, vocab_size: int, mask: Tensor | None = None) -> Tensor:
    """Validate word ids ``(B, T)`` against ``[0, vocab_size)`` at the unmasked positions.

    Returns:
        the mask, ``(B, T)`` bool (all True when ``mask`` is ``None``).

    Raises:
        ValueError: not an integer ``(B, T)`` tensor, a mask of another shape or dtype, or an id out of
            range (the first one is named with its position).
    """
    if not isinstance(words, Tensor) or words.is_floating_point() or words.dim() != 2:
        got = tuple(words.shape) if isinstance(words, Tensor) else type(words).__name__
        raise ValueError(f"words must be an integer tensor (B, T), got {got}")
    if mask is None:
        mask = torch.ones_like(words, dtype=torch.bool)
    if mask.shape != words.shape or mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be bool (B, T) = {tuple(words.shape)}, got {mask.dtype} {tuple(mask.shape)}"
        )
    mask = mask.to(words.device)
    bad = mask & ((words < 0) | (words >= vocab_size))
    if bool(bad.any()):
        b, t = (int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"word id {int(words[b, t])} at (batch {b}, time {t}) is out of range [0, {vocab_size})"
        )
    return mask


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
    """

    mask: Tensor
    words: Tensor | None
    chars: Tensor | None
    features: Tensor | None
    tags: Tensor | None
    sentences: list[Sentence]

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
            per = [
                [[vocab.stoi.get(f, 0) for f in fs] for fs in templates(s.tokens)]
                for s in sentences
            ]
            F = max((len(fs) for sent in per for fs in sent), default=1)
            feats = torch.zeros(B, T, max(F, 1), dtype=torch.long)
            for i, sent in enumerate(per):
                for j, fs in enumerate(sent):
                    feats[i, j, : len(fs)] = torch.tensor(fs, dtype=torch.long)
        if self.labels is not None and all(s.tags is not None for s in sentences):
            tags = torch.full((B, T), PAD_LABEL, dtype=torch.long)
            for i, s in enumerate(sentences):
                assert s.tags is not None
                tags[i, : len(s)] = torch.tensor(self.labels.encode(s.tags), dtype=torch.long)
        return Batch(
            mask=mask, words=words, chars=chars, features=feats, tags=tags, sentences=sentences
        )
