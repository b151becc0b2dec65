"""Subword alignment for transformer encoders: words in, subword windows out, word-level scores back.

A tagger over a transformer encoder tags *words* (the tokens of a :class:`~crfhead.data.Sentence`)
while the encoder sees *subword pieces*. :class:`SubwordAligner` tokenises pre-tokenised sentences
with a HuggingFace fast tokenizer (``is_split_into_words=True``) and returns a :class:`SubwordBatch`
that knows, for every word, where its pieces are:

* ``input_ids``, ``attention_mask`` (and ``token_type_ids`` when the tokenizer gives them),
  ``(N, L)`` for ``N`` windows, ready for the encoder (:meth:`SubwordBatch.model_inputs`);
* ``first_subword_mask`` ``(N, L)`` bool, True at the first piece of each word. The CRF links
  consecutive unmasked positions, so when every sentence fits one window (``N == B``,
  :attr:`SubwordBatch.single_window`) subword-level emissions ``(B, L, K)`` go to the CRF with this
  mask as they are: the chain, its partition function and its Viterbi path are those of the
  word-level emissions;
* a word → (window, piece span) index ``(B, T)``: :meth:`SubwordBatch.merge` gathers window-level
  scores ``(N, L, K)`` at each word's first piece into word-level scores ``(B, T, K)``, and
  :meth:`SubwordBatch.pool` pools hidden states ``(N, L, H)`` over each word's pieces (first, mean or
  last) into ``(B, T, H)``.

Sentences longer than the model limit are split into windows of whole words that overlap by
``stride`` words; a word's pieces are never split across windows. A word seen in several windows is
read from the window where it is farthest from a cut (its most central occurrence). A single word
with more pieces than fit in a window is truncated to what fits; words that tokenise to no piece at
all (control characters, zero-width spaces, empty strings) are replaced by a placeholder (the
unknown token) so that word indices stay aligned. Both are counted and warned about.

Shapes: ``B`` sentences, ``T`` words in the longest sentence, ``N`` windows (``N >= B``), ``L``
pieces in the longest window (special tokens and padding included).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from crfhead.data.batching import PAD_LABEL
from crfhead.data.sentence import ReadReport, Sentence

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

__all__ = ["DEFAULT_MAX_LENGTH", "POOLINGS", "SubwordAligner", "SubwordBatch"]

POOLINGS = ("first", "mean", "last")
"""Ways to pool a word's pieces: its first piece, the mean of its pieces, its last piece."""

DEFAULT_MAX_LENGTH = 512
"""Window length used when the tokenizer does not state a real ``model_max_length``."""

_UNSET_MAX_LENGTH = 1_000_000  # tokenizers without a known limit report ~1e30


@dataclass
class SubwordBatch:
    """Subword windows of a batch of sentences and the index from words to pieces.

    Attributes:
        input_ids: ``(N, L)`` int64 piece ids, padded.
        attention_mask: ``(N, L)`` int64, 1 at real pieces (special tokens included).
        token_type_ids: ``(N, L)`` int64, or ``None`` if the tokenizer gives none.
        first_subword_mask: ``(N, L)`` bool, True at the first piece of each word (False at special
            tokens, padding and continuation pieces).
        word_ids: ``(N, L)`` int64, the index in its sentence of the word each piece belongs to,
            ``-1`` at special tokens and padding.
        window_sentence: ``(N,)`` int64, the sentence each window belongs to (non-decreasing).
        window_words: ``(N, 2)`` int64, the words ``[start, end)`` of its sentence each window covers.
        word_window: ``(B, T)`` int64, the window a word is read from (its most central occurrence);
            0 at padding.
        word_start: ``(B, T)`` int64, position of the word's first piece in that window; 0 at padding.
        word_end: ``(B, T)`` int64, one past the position of its last piece; 0 at padding.
        word_mask: ``(B, T)`` bool, True at real words (the mask of :class:`~crfhead.data.Collator`).
        pooling: default pooling of :meth:`pool` (one of :data:`POOLINGS`).
        replaced_words: words that tokenised to no piece and were replaced by the placeholder.
        truncated_words: words with more pieces than fit in a window, truncated.
    """

    input_ids: Tensor
    attention_mask: Tensor
    token_type_ids: Tensor | None
    first_subword_mask: Tensor
    word_ids: Tensor
    window_sentence: Tensor
    window_words: Tensor
    word_window: Tensor
    word_start: Tensor
    word_end: Tensor
    word_mask: Tensor
    pooling: str = "first"
    replaced_words: int = 0
    truncated_words: int = 0

    @property
    def num_sentences(self) -> int:
        """``B``."""
        return int(self.word_mask.shape[0])

    @property
    def num_windows(self) -> int:
        """``N``."""
        return int(self.input_ids.shape[0])

    @property
    def single_window(self) -> bool:
        """Every sentence fits one window: window ``b`` is sentence ``b`` (``N == B``).

        Then subword-level emissions ``(B, L, K)`` with :attr:`first_subword_mask` are a valid CRF
        input, equivalent to the word-level emissions :meth:`merge` returns.
        """
        return self.num_windows == self.num_sentences

    def model_inputs(self) -> dict[str, Tensor]:
        """The encoder's keyword arguments: ``input_ids``, ``attention_mask`` (, ``token_type_ids``)."""
        inputs = {"input_ids": self.input_ids, "attention_mask": self.attention_mask}
        if self.token_type_ids is not None:
            inputs["token_type_ids"] = self.token_type_ids
        return inputs

    def to(self, device: torch.device | str) -> SubwordBatch:
        """The batch with every tensor on ``device``."""
        moved: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            moved[f.name] = value.to(device) if isinstance(value, Tensor) else value
        return SubwordBatch(**moved)

    # ------------------------------------------------------------------ windows → words
    def _gather(self, x: Tensor, position: Tensor, fill: float) -> Tensor:
        """``x[word_window, position]`` for every word, ``fill`` at padding: ``(B, T, *rest)``."""
        N, L = self.input_ids.shape
        if x.dim() < 2 or tuple(x.shape[:2]) != (N, L):
            raise ValueError(
                f"expected window-level values (N, L, ...) = ({N}, {L}, ...), "
                f"got shape {tuple(x.shape)}"
            )
        flat = x.reshape(N * L, *x.shape[2:])
        out = flat[(self.word_window * L + position).to(x.device)]
        keep = self.word_mask.to(x.device).reshape(*self.word_mask.shape, *([1] * (x.dim() - 2)))
        return torch.where(keep, out, torch.full_like(out, fill))

    def merge(self, window_scores: Tensor, fill: float = 0) -> Tensor:
        """Word-level scores: each word's first-piece scores in its most central window.

        Args:
            window_scores: ``(N, L, K)`` (any trailing shape, or ``(N, L)``), e.g. emissions or
                Viterbi paths of the windows.
            fill: value at padded words.

        Returns:
            ``(B, T, K)`` (same trailing shape and dtype), ``fill`` where :attr:`word_mask` is False.
        """
        return self._gather(window_scores, self.word_start, fill)

    def pool(self, hidden: Tensor, pooling: str | None = None) -> Tensor:
        """Word representations pooled over each word's pieces in its most central window.

        Args:
            hidden: ``(N, L, H)`` encoder states (any trailing shape, or ``(N, L)``).
            pooling: ``"first"`` piece, ``"mean"`` of the pieces or ``"last"`` piece; ``None``: the
                batch's :attr:`pooling`.

        Returns:
            ``(B, T, H)``, zeros at padded words. Differentiable with respect to ``hidden``.
        """
        mode = self.pooling if pooling is None else pooling
        if mode == "first":
            return self._gather(hidden, self.word_start, 0)
        if mode == "last":
            return self._gather(hidden, (self.word_end - 1).clamp(min=0), 0)
        if mode != "mean":
            raise ValueError(f"pooling must be one of {POOLINGS}, got {mode!r}")
        N, L = self.input_ids.shape
        if hidden.dim() < 2 or tuple(hidden.shape[:2]) != (N, L):
            raise ValueError(
                f"expected hidden states (N, L, ...) = ({N}, {L}, ...), got shape {tuple(hidden.shape)}"
            )
        B, T = self.word_mask.shape
        rest = hidden.shape[2:]
        if B * T == 0:
            return hidden.new_zeros(B, T, *rest)
        device = hidden.device
        word_ids = self.word_ids.to(device)
        sentence = self.window_sentence.to(device)[:, None].expand(N, L)
        word = word_ids.clamp(min=0)
        # A piece counts if its word is read from this very window.
        chosen = self.word_window.to(device)[sentence, word]
        windows = torch.arange(N, device=device)[:, None].expand(N, L)
        use = (word_ids >= 0) & (chosen == windows)
        target = (sentence * T + word)[use]
        total = torch.zeros(B * T, *rest, dtype=hidden.dtype, device=device)
        total = total.index_add(0, target, hidden[use])
        count = torch.zeros(B * T, dtype=hidden.dtype, device=device)
        count = count.index_add(0, target, torch.ones_like(target, dtype=hidden.dtype))
        mean = total / count.clamp(min=1).reshape(B * T, *([1] * len(rest)))
        return mean.reshape(B, T, *rest)

    # ------------------------------------------------------------------ words → windows
    def scatter(self, word_values: Tensor, fill: float = 0) -> Tensor:
        """Word-level values placed at each word's first piece, in every window that holds the word.

        The inverse of :meth:`merge`: ``merge(scatter(x)) == x`` at real words.

        Args:
            word_values: ``(B, T, K)`` (any trailing shape, or ``(B, T)``).
            fill: value at every other position (special tokens, continuation pieces, padding).

        Returns:
            ``(N, L, K)`` (same trailing shape and dtype).
        """
        B, T = self.word_mask.shape
        if word_values.dim() < 2 or tuple(word_values.shape[:2]) != (B, T):
            raise ValueError(
                f"expected word-level values (B, T, ...) = ({B}, {T}, ...), "
                f"got shape {tuple(word_values.shape)}"
            )
        device = word_values.device
        N, L = self.input_ids.shape
        rest = word_values.shape[2:]
        out = torch.full((N, L, *rest), fill, dtype=word_values.dtype, device=device)
        first = self.first_subword_mask.to(device)
        if bool(first.any()):
            sentence = self.window_sentence.to(device)[:, None].expand(N, L)[first]
            word = self.word_ids.to(device)[first]
            out[first] = word_values[sentence, word]
        return out

    def subword_tags(self, tags: Tensor) -> Tensor:
        """Word-level tag ids ``(B, T)`` at the first piece of each word, ``-100`` elsewhere: ``(N, L)``.

        For training on the windows themselves (e.g. ``crf.nll(emissions, subword_tags(tags),
        first_subword_mask)`` with window-level emissions ``(N, L, K)``).
        """
        return self.scatter(tags, fill=PAD_LABEL)


def _plan_windows(counts: Sequence[int], budget: int, stride: int) -> list[tuple[int, int]]:
    """Windows ``[start, end)`` of whole words of at most ``budget`` pieces, overlapping by <= ``stride``.

    Every count must be at most ``budget``. Each window after the first starts ``stride`` words
    before the end of the previous one, later if needed so that it still takes a new word.
    """
    n = len(counts)
    if n == 0:
        return [(0, 0)]
    windows: list[tuple[int, int]] = []
    start = 0
    while True:
        end, used = start, 0
        while end < n and used + counts[end] <= budget:
            used += counts[end]
            end += 1
        end = max(end, start + 1)
        windows.append((start, end))
        if end >= n:
            return windows
        nxt = max(end - stride, start + 1)
        while sum(counts[nxt : end + 1]) > budget:
            nxt += 1
        start = nxt


class SubwordAligner:
    """Tokenises pre-tokenised sentences into subword windows aligned with their words.

    Args:
        tokenizer: a HuggingFace fast tokenizer (``PreTrainedTokenizerFast``: it must give
            ``word_ids``) with a padding token.
        max_length: pieces per window, special tokens included; default the tokenizer's
            ``model_max_length``, or :data:`DEFAULT_MAX_LENGTH` when that is unset.
        stride: words shared by consecutive windows of a long sentence (fewer when a window holds
            fewer words than that; keep it well below the words per window).
        pooling: default of :meth:`SubwordBatch.pool`: ``"first"``, ``"mean"`` or ``"last"``.
        placeholder: the word substituted for words that tokenise to no piece; default the
            tokenizer's unknown token (``"?"`` if it has none).

    Raises:
        TypeError: for a slow tokenizer.
        ValueError: for a tokenizer without padding token, a ``max_length`` too small for the special
            tokens, a negative ``stride``, an unknown ``pooling``, or a placeholder with no piece.

    Example:
        >>> aligner = SubwordAligner(tokenizer, max_length=128)  # doctest: +SKIP
        >>> batch = aligner([s.tokens for s in sentences])  # doctest: +SKIP
        >>> hidden = encoder(**batch.model_inputs()).last_hidden_state  # (N, L, H)  # doctest: +SKIP
        >>> emissions = batch.merge(head(hidden))  # (B, T, K)  # doctest: +SKIP
        >>> loss = crf(emissions, tags, batch.word_mask)  # doctest: +SKIP
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerFast,
        *,
        max_length: int | None = None,
        stride: int = 16,
        pooling: str = "first",
        placeholder: str | None = None,
    ) -> None:
        if not getattr(tokenizer, "is_fast", False):
            raise TypeError(
                f"{type(tokenizer).__name__} is not a fast tokenizer: subword alignment needs "
                "word_ids(); load it with use_fast=True"
            )
        if tokenizer.pad_token is None:
            raise ValueError(
                f"{type(tokenizer).__name__} has no padding token; set one first "
                "(e.g. tokenizer.pad_token = tokenizer.eos_token)"
            )
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if stride < 0:
            raise ValueError(f"stride must be >= 0, got {stride}")
        if max_length is None:
            model_max = int(min(tokenizer.model_max_length, _UNSET_MAX_LENGTH))
            max_length = model_max if model_max < _UNSET_MAX_LENGTH else DEFAULT_MAX_LENGTH
        special = tokenizer.num_special_tokens_to_add(pair=False)
        if max_length - special < 1:
            raise ValueError(
                f"max_length={max_length} leaves no room for pieces after {special} special tokens"
            )
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.budget = max_length - special
        """Pieces per window, special tokens excluded."""
        self.stride = stride
        self.pooling = pooling
        unk = tokenizer.unk_token
        self.placeholder = placeholder if placeholder is not None else (unk if unk else "?")
        self._placeholder_pieces = self._piece_counts([[self.placeholder]])[0][0]
        if not self._placeholder_pieces:
            raise ValueError(f"the placeholder {self.placeholder!r} tokenises to no piece")

    def __repr__(self) -> str:
        return (
            f"SubwordAligner({type(self.tokenizer).__name__}, max_length={self.max_length}, "
            f"stride={self.stride}, pooling={self.pooling!r})"
        )

    def _piece_counts(self, sentences: list[list[str]]) -> list[list[int]]:
        """Pieces of every word (special tokens excluded), ``B`` lists of ``T_b`` counts."""
        if not sentences:
            return []
        enc = self.tokenizer(
            sentences, is_split_into_words=True, add_special_tokens=False, verbose=False
        )
        counts: list[list[int]] = []
        for i, words in enumerate(sentences):
            row = [0] * len(words)
            for w in enc.word_ids(i):
                if w is not None:
                    row[w] += 1
            counts.append(row)
        return counts

    def lengths(self, sentences: Sequence[Sentence | Sequence[str]]) -> list[int]:
        """Pieces each sentence's longest window holds, special tokens included.

        What a batch is padded to (``L``) is the largest of these; a sentence longer than a window
        counts as a full window. A word without a piece counts its placeholder's pieces.
        """
        words = [list(s.tokens) if isinstance(s, Sentence) else list(s) for s in sentences]
        special = self.max_length - self.budget
        fill = self._placeholder_pieces
        return [
            min(sum(min(c or fill, self.budget) for c in row), self.budget) + special
            for row in self._piece_counts(words)
        ]

    def __call__(
        self,
        sentences: Sequence[Sentence | Sequence[str]],
        *,
        report: ReadReport | None = None,
    ) -> SubwordBatch:
        """Tokenise and align a batch.

        Args:
            sentences: ``B`` :class:`~crfhead.data.Sentence` objects or lists of words.
            report: optional report counting ``zero-piece words replaced`` and
                ``long words truncated`` (with examples).

        Returns:
            The :class:`SubwordBatch`: ``N`` windows of ``L`` pieces, words indexed ``(B, T)``.

        Raises:
            TypeError: if ``sentences`` is one sentence (a list of strings) instead of a batch.
            RuntimeError: if the tokenizer does not keep a word's pieces the same in its window as
                in the whole sentence (context-dependent pre-tokenisation), so a word is lost.
        """
        if isinstance(sentences, str) or any(isinstance(s, str) for s in sentences):
            raise TypeError("sentences must be a batch: Sentence objects or lists of word strings")
        words = [list(s.tokens) if isinstance(s, Sentence) else list(s) for s in sentences]
        if any(not isinstance(w, str) for ws in words for w in ws):
            raise TypeError("sentences must be a batch: Sentence objects or lists of word strings")
        B = len(words)
        T = max((len(ws) for ws in words), default=0)

        # 1. Pieces per word; words without any piece become the placeholder.
        counts = self._piece_counts(words)
        replaced = 0
        redo: list[int] = []
        for b, row in enumerate(counts):
            for i, c in enumerate(row):
                if c == 0:
                    if report is not None:
                        report.count("zero-piece words replaced", f"sentence {b}: {words[b][i]!r}")
                    words[b][i] = self.placeholder
                    replaced += 1
                    if not redo or redo[-1] != b:
                        redo.append(b)
        if redo:
            for b, row in zip(redo, self._piece_counts([words[b] for b in redo]), strict=True):
                counts[b] = row
            warnings.warn(
                f"{replaced} word(s) tokenise to no subword piece; replaced by "
                f"{self.placeholder!r} to keep word indices aligned",
                stacklevel=2,
            )

        # 2. Windows of whole words; a word longer than a window is truncated to fit.
        truncated = 0
        plan: list[tuple[int, int, int]] = []  # (sentence, start, end)
        for b, row in enumerate(counts):
            for i, c in enumerate(row):
                if c > self.budget:
                    truncated += 1
                    row[i] = self.budget
                    if report is not None:
                        report.count(
                            "long words truncated", f"sentence {b}: {words[b][i]!r} ({c} pieces)"
                        )
            plan += [(b, s, e) for s, e in _plan_windows(row, self.budget, self.stride)]
        if truncated:
            warnings.warn(
                f"{truncated} word(s) have more than {self.budget} subword pieces and were "
                f"truncated to fit max_length={self.max_length}",
                stacklevel=2,
            )

        # 3. Tokenise the windows.
        if plan:
            enc = self.tokenizer(
                [words[b][s:e] for b, s, e in plan],
                is_split_into_words=True,
                truncation=True,
                max_length=self.max_length,
                padding="longest",
                return_tensors="pt",
            )
            input_ids = enc["input_ids"].long()
            attention_mask = enc["attention_mask"].long()
            token_type_ids = enc["token_type_ids"].long() if "token_type_ids" in enc else None
            window_word_ids = [enc.word_ids(n) for n in range(len(plan))]
        else:
            input_ids = attention_mask = torch.zeros(0, 0, dtype=torch.long)
            token_type_ids = None
            window_word_ids = []
        N, L = input_ids.shape

        # 4. Where each word's pieces are, in each window; the most central occurrence wins.
        word_ids = torch.full((N, L), -1, dtype=torch.long)
        first = torch.zeros(N, L, dtype=torch.bool)
        word_window = torch.zeros(B, T, dtype=torch.long)
        word_start = torch.zeros(B, T, dtype=torch.long)
        word_end = torch.zeros(B, T, dtype=torch.long)
        best = [[-1.0] * len(ws) for ws in words]
        for n, ((b, s, e), ids) in enumerate(zip(plan, window_word_ids, strict=True)):
            row_ids = [-1 if w is None else s + w for w in ids]
            spans: dict[int, list[int]] = {}
            for pos, g in enumerate(row_ids):
                if g < 0:
                    continue
                if g in spans:
                    if spans[g][1] != pos:
                        raise RuntimeError(f"pieces of word {g} of sentence {b} are not contiguous")
                    spans[g][1] = pos + 1
                else:
                    spans[g] = [pos, pos + 1]
            if sorted(spans) != list(range(s, e)):
                raise RuntimeError(
                    f"window {n} of sentence {b} should hold words {s}..{e - 1} but holds "
                    f"{sorted(spans)}: the tokenizer splits words differently in context"
                )
            word_ids[n] = torch.tensor(row_ids, dtype=torch.long)
            n_words = len(words[b])
            for g, (p0, p1) in spans.items():
                first[n, p0] = True
                left = g - s if s > 0 else math.inf
                right = e - 1 - g if e < n_words else math.inf
                dist = min(left, right)
                if dist > best[b][g]:
                    best[b][g] = dist
                    word_window[b, g], word_start[b, g], word_end[b, g] = n, p0, p1
        word_mask = torch.zeros(B, T, dtype=torch.bool)
        for b, ws in enumerate(words):
            word_mask[b, : len(ws)] = True

        return SubwordBatch(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            first_subword_mask=first,
            word_ids=word_ids,
            window_sentence=torch.tensor([b for b, _, _ in plan], dtype=torch.long),
            window_words=torch.tensor([(s, e) for _, s, e in plan], dtype=torch.long).view(-1, 2),
            word_window=word_window,
            word_start=word_start,
            word_end=word_end,
            word_mask=word_mask,
            pooling=self.pooling,
            replaced_words=replaced,
            truncated_words=truncated,
        )
