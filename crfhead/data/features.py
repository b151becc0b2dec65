"""Indicator feature templates: the strings that describe a token in context (word, affixes, shape, window).

The seed's finance tagger reads the word, its 3-letter prefix and suffix, and the words up to two to
each side; ``shape`` and ``bias`` are the usual additions. Features are strings, computed when a batch
is collated (on the data side, in the loader's workers) and looked up in a feature vocabulary built on
the training split; :class:`~crfhead.encoders.IndicatorEncoder` sums one weight vector per active
feature.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from crfhead.data.sentence import Sentence
from crfhead.data.vocab import Vocab
from crfhead.tensors import long_tensor

__all__ = ["TEMPLATES", "FeatureTemplates", "word_shape"]

_CACHED_WORDS = 1 << 16  # words whose feature ids FeatureTemplates.ids keeps (~30 MB at most)


@functools.lru_cache(maxsize=1 << 16)
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


def _local_features(local: Sequence[str], word: str) -> list[str]:
    """The features of ``word`` alone (no context), in the order of the templates ``local``."""
    feats: list[str] = []
    for t in local:
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
    return feats


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
        self._cache: tuple[Mapping[str, int], int, tuple[str, ...], dict[str, list[int]]] | None = (
            None
        )

    def __call__(self, tokens: Sequence[str]) -> list[list[str]]:
        """The feature strings of every token: ``T`` lists."""
        out: list[list[str]] = []
        n = len(tokens)
        offsets = sorted({d for t in self.templates for d in _OFFSETS.get(t, ())})
        local = [t for t in self.templates if t not in _OFFSETS]
        for i, word in enumerate(tokens):
            feats = _local_features(local, word)
            for d in offsets:
                j = i + d
                ctx = tokens[j] if 0 <= j < n else ("<s>" if j < 0 else "</s>")
                feats.append(f"w{d:+d}={ctx}")
            out.append(feats)
        return out

    def ids(self, token_lists: Sequence[Sequence[str]], stoi: Mapping[str, int]) -> Tensor:
        """The ``(B, T, F)`` feature ids of a batch (0 = padding / unseen), as the Collator builds them.

        Equal to looking up every string of :meth:`__call__` in ``stoi``, but each distinct word's
        own features and each distinct (offset, context word) feature are looked up once per call,
        and the tensor is built in one go. ``T`` is the longest list, ``F`` the number of features
        per token (at least 1).
        """
        local = [t for t in self.templates if t not in _OFFSETS]
        offsets = sorted({d for t in self.templates for d in _OFFSETS.get(t, ())})
        B = len(token_lists)
        T = max((len(x) for x in token_lists), default=0)
        if T == 0 or not (local or offsets):
            return torch.zeros(B, T, 1, dtype=torch.long)  # the Collator's F of no features
        # Each token's distinct-word index; U and U + 1 stand for <s> and </s>, U + 2 for padding.
        index: dict[str, int] = {}
        words: list[int] = []
        for tokens in token_lists:
            words.extend([index.setdefault(w, len(index)) for w in tokens])
            words.extend([-1] * (T - len(tokens)))
        U = len(index)
        vocab = list(index)
        W = long_tensor(words).reshape(B, T)
        lengths = long_tensor([len(x) for x in token_lists])
        valid = torch.arange(T)[None, :] < lengths[:, None]  # (B, T)
        W = torch.where(valid, W, U + 2)
        L = len(local)
        rows = self._rows(vocab, stoi, local, offsets)
        for boundary in ("<s>", "</s>"):  # no features of their own, only as context
            rows.append([0] * L + [stoi.get(f"w{d:+d}={boundary}", 0) for d in offsets])
        rows.append([0] * (L + len(offsets)))  # padding
        width = L + len(offsets)
        table = long_tensor(list(itertools.chain.from_iterable(rows))).reshape(-1, width)
        # (U + 3, L + D)
        parts: list[Tensor] = []
        if local:
            parts.append(table[:, :L][W])  # (B, T, L)
        if offsets:
            # Every offset at once: the word each position sees at each offset, (B, T, D).
            j = torch.arange(T)[:, None] + long_tensor(offsets)[None, :]  # (T, D)
            seen = W[:, j.clamp(0, T - 1)]
            seen = torch.where(j < 0, U, seen)
            seen = torch.where(j >= lengths[:, None, None], U + 1, seen)
            seen = torch.where(valid[:, :, None], seen, U + 2)
            parts.append(table[seen, L + torch.arange(len(offsets))])  # (B, T, D)
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=2)

    def _rows(
        self, words: Sequence[str], stoi: Mapping[str, int], local: list[str], offsets: list[int]
    ) -> list[list[int]]:
        """Each word's feature ids: its own (``local``), then as the context word at each offset.

        Kept across calls in a table per word, so a word's strings are built and looked up once
        while ``stoi`` is the same mapping of the same size (a vocabulary that grows, or another
        one, starts a new table; so does a table past :data:`_CACHED_WORDS` words).
        """
        key = (stoi, len(stoi), self.templates)
        cached = getattr(self, "_cache", None)  # None too for an instance unpickled without it
        if cached is None or cached[0] is not stoi or cached[1:3] != key[1:]:
            cached = self._cache = (stoi, len(stoi), self.templates, {})
        table = cached[3]
        if len(table) + len(words) > _CACHED_WORDS:
            table.clear()
        out: list[list[int]] = []
        for w in words:
            row = table.get(w)
            if row is None:
                row = table[w] = [stoi.get(f, 0) for f in _local_features(local, w)] + [
                    stoi.get(f"w{d:+d}={w}", 0) for d in offsets
                ]
            out.append(row)
        return out

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (to a loader's workers) without the table of :meth:`_rows`."""
        return {**self.__dict__, "_cache": None}

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
