"""Indicator feature templates: the strings that describe a token in context (word, affixes, shape, window).

The seed's finance tagger reads the word, its 3-letter prefix and suffix, and the words up to two to
each side; ``shape`` and ``bias`` are the usual additions. Features are strings, computed when a batch
is collated (on the data side, in the loader's workers) and looked up in a feature vocabulary built on
the training split; :class:`~crfhead.encoders.IndicatorEncoder` sums one weight vector per active
feature.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from crfhead.data.sentence import Sentence
from crfhead.data.vocab import Vocab

__all__ = ["TEMPLATES", "FeatureTemplates", "word_shape"]


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
