"""Word-window indicator emissions: one weight per (offset, word, tag).

``emissions[b, t, k] = sum_o weight[o, x_{t+o}, k]`` over the configured ``offsets``, with a boundary
symbol per side where ``t + o`` falls outside the sentence. ``offsets=(0,)`` is the word-identity
feature of Theorem 3's indicator CRF (*Sequence Labeling: From HMMs to Linear-Chain CRFs*); ``(-1, 0, 1)`` the seed's "CRF ±1 word"; and the
largest offset is the lookahead ``w`` of an MEMM (Definition 4, Proposition 2): ``(-2, -1, 0)`` is the
causal MEMM's "two words to the left", ``(-2, -1, 0, 1)`` one word of lookahead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from crfhead.checks import check_word_ids
from crfhead.data.batching import Batch

__all__ = ["WordWindowEncoder"]


class WordWindowEncoder(nn.Module):
    """Sum of per-(offset, word, tag) weights over a window of word ids.

    Args:
        num_tags: ``K``.
        vocab_size: ``V``, the number of word ids.
        offsets: the relative positions read (distinct ints); ``max(offsets)`` is the lookahead.

    Attributes:
        weight: ``nn.Parameter`` ``(O, V + 2, K)``, zeros at init; row ``V`` is "before the sentence",
            row ``V + 1`` "after it".
        needs: ``{"words"}``.
    """

    needs: frozenset[str] = frozenset({"words"})

    def __init__(self, num_tags: int, vocab_size: int, offsets: Sequence[int] = (0,)) -> None:
        super().__init__()
        if not isinstance(num_tags, int) or num_tags < 1:
            raise ValueError(f"num_tags must be a positive int, got {num_tags!r}")
        if not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
        offs = tuple(int(o) for o in offsets)
        if not offs or len(set(offs)) != len(offs):
            raise ValueError(f"offsets must be distinct ints, at least one, got {offsets!r}")
        self.num_tags, self.vocab_size, self.offsets = num_tags, vocab_size, offs
        self.weight = nn.Parameter(torch.zeros(len(offs), vocab_size + 2, num_tags))

    @property
    def lookahead(self) -> int:
        """``w``: how far right the window reads (0 or less: causal)."""
        return max(self.offsets)

    def extra_repr(self) -> str:  # noqa: D102
        return f"num_tags={self.num_tags}, vocab_size={self.vocab_size}, offsets={self.offsets}"

    def parameter_groups(self) -> list[dict[str, Any]]:
        """Optimizer parameter groups: one, ``{"name": "head", "params": [...]}``."""
        return [{"name": "head", "params": [self.weight]}]

    def emissions(self, words: Tensor, mask: Tensor | None = None) -> Tensor:
        """Emissions ``(B, T, K)`` of word ids ``(B, T)``; positions outside ``mask`` are boundaries.

        Raises:
            ValueError: non-integer or out-of-range word ids (the first bad one is named).
        """
        device = self.weight.device
        if isinstance(words, Tensor) and mask is not None:
            mask = mask.to(words.device)
        mask = check_word_ids(words, self.vocab_size, mask).to(device)
        words = words.to(device).long()
        B, T = words.shape
        V = self.vocab_size
        out = torch.zeros(B, T, self.num_tags, dtype=self.weight.dtype, device=device)
        pos = torch.arange(T, device=device)
        for i, o in enumerate(self.offsets):
            src = pos + o  # (T,)
            inside = (src >= 0) & (src < T)
            src_c = src.clamp(0, max(T - 1, 0))
            ids = words[:, src_c]  # (B, T)
            ok = inside[None, :] & mask[:, src_c]
            ids = torch.where(ok, ids, torch.full_like(ids, V if o < 0 else V + 1))
            out = out + self.weight[i][ids]  # (B, T, K)
        return out * mask[..., None]

    def forward(self, batch: Batch) -> Tensor:
        """Emissions ``(B, T, K)`` of a batch's ``words``."""
        if batch.words is None:
            raise ValueError("WordWindowEncoder needs word ids: the batch has no 'words' field")
        return self.emissions(batch.words, batch.mask)
