"""Tagged sentences as a window tagger's tensors: a word vocabulary cut by count, word and tag ids.

The experiments on real text (the finance taggers of :mod:`crfhead.theory.label_bias`, the lab's
MSM2013 chain) read words through one vocabulary: the training words seen at least ``min_count``
times, alphabetical, with ids from 1; id 0 is the unknown word (the rarer training words, so that its
weights are learned, and every word never seen). Padding is id 0 too, outside the mask.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor

from crfhead.data.sentence import Sentence

__all__ = ["encode", "encode_tagged", "word_vocab"]


def word_vocab(sentences: Iterable[Sequence[str]], min_count: int) -> dict[str, int]:
    """Word → id (from 1, alphabetical) of the words seen at least ``min_count`` times."""
    counts = Counter(w for s in sentences for w in s)
    return {w: i + 1 for i, w in enumerate(sorted(w for w, c in counts.items() if c >= min_count))}


def encode(sentences: Sequence[Sequence[str]], vocab: dict[str, int]) -> tuple[Tensor, Tensor]:
    """Word ids ``(B, T)`` int64 (0 for unknown words and padding) and the mask ``(B, T)`` bool.

    Raises:
        ValueError: no sentence, or an empty one.
    """
    if not sentences or any(len(s) == 0 for s in sentences):
        raise ValueError("encode needs at least one sentence, none of them empty")
    T = max(len(s) for s in sentences)
    words = torch.zeros(len(sentences), T, dtype=torch.long)
    mask = torch.zeros(len(sentences), T, dtype=torch.bool)
    for b, s in enumerate(sentences):
        words[b, : len(s)] = torch.tensor([vocab.get(w, 0) for w in s])
        mask[b, : len(s)] = True
    return words, mask


def encode_tagged(
    sentences: Sequence[Sentence],
    vocab: dict[str, int],
    labels: Sequence[str],
    lowercase: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    """Word ids, gold tag ids (``labels``' indices; 0 where padded) and the mask, each ``(B, T)``.

    Args:
        sentences: tagged sentences.
        vocab: from :func:`word_vocab` (of lowercased words with ``lowercase``).
        labels: the label list, index = tag id.
        lowercase: look the words up lowercased.

    Raises:
        ValueError: no sentence, or an empty one.
        KeyError: a gold tag outside ``labels``.
    """
    index = {t: i for i, t in enumerate(labels)}
    words, mask = encode(
        [[w.lower() for w in s.tokens] if lowercase else s.tokens for s in sentences], vocab
    )
    tags = torch.zeros_like(words)
    for b, s in enumerate(sentences):
        tags[b, : len(s.tokens)] = torch.tensor([index[t] for t in s.tags or []])
    return words, tags, mask
