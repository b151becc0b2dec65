"""A BiLSTM over word (and character) embeddings: the Lample et al. / Ma & Hovy tagger's encoder.

Each word is its embedding, concatenated with a character-level representation when a character
vocabulary is given: a CNN max-pooled over the word's characters (Ma & Hovy 2016) or the final states
of a character BiLSTM (Lample et al. 2016). A BiLSTM runs over the words of each sentence as if
packed by length, so padding never reaches the backward direction
(:func:`~crfhead.encoders.rnn.bidirectional_lstm`: on the CPU each direction is one fused call over
rows grouped by length); dropout (:mod:`crfhead.encoders.dropout`) and a linear layer give tag scores.

Padding never changes the scores of real tokens: characters and words are encoded only where they
exist, the character CNN masks padded characters before pooling, and both LSTMs run as if on packed
sequences.

Pretrained word vectors (:mod:`crfhead.encoders.vectors`: a GloVe or word2vec text file, or vectors
distilled from a local transformer) initialise the word embedding when a source is given
(``word_vectors``, with the model's ``word_vocab``, which ``train.py`` fills in from the data).
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from crfhead.data.batching import Batch
from crfhead.data.vocab import Vocab
from crfhead.encoders.dropout import Dropout
from crfhead.encoders.rnn import bidirectional_lstm
from crfhead.encoders.vectors import Coverage, WordVectors, embedding_matrix

__all__ = ["CHAR_ENCODERS", "BiLSTMEncoder"]

_LOG = logging.getLogger("crfhead")

CHAR_ENCODERS = ("cnn", "lstm")
"""Character encoders: a max-pooled CNN or the final states of a BiLSTM."""


def _check_ids(ids: Tensor, size: int, what: str, arg: str) -> None:
    """Raise a ``ValueError`` if ``ids`` fall outside ``[0, size)``."""
    if ids.numel() and not torch.compiler.is_compiling():
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= size:
            raise ValueError(
                f"{what} ids must lie in [0, {arg}={size}), got ids in [{low}, {high}]: was the "
                "encoder built with the vocabulary of this Collator?"
            )


class _CharCNN(nn.Module):
    """Character CNN, max-pooled over each word's characters.

    Args:
        num_chars: character vocabulary size (id 0 = padding).
        dim: character embedding size.
        out: number of filters (the output size).
        kernel: odd filter width.
        dropout: dropout on the character embeddings.
    """

    def __init__(self, num_chars: int, dim: int, out: int, kernel: int, dropout: float) -> None:
        super().__init__()
        self.embed = nn.Embedding(num_chars, dim, padding_idx=0)
        self.dropout = Dropout(dropout)
        self.conv = nn.Conv1d(dim, out, kernel, padding=kernel // 2)
        bound = math.sqrt(3.0 / dim)
        nn.init.uniform_(self.embed.weight, -bound, bound)
        with torch.no_grad():
            self.embed.weight[0].zero_()

    def forward(self, chars: Tensor) -> Tensor:
        """``(M, C)`` character ids (0 = padding) → ``(M, out)``; zeros for words without characters."""
        valid = chars != 0  # (M, C)
        x = self.conv(self.dropout(self.embed(chars)).transpose(1, 2))  # (M, out, C)
        x = x.masked_fill(~valid[:, None, :], torch.finfo(x.dtype).min)
        pooled = x.max(dim=2).values  # (M, out)
        return torch.where(valid.any(dim=1, keepdim=True), pooled, torch.zeros_like(pooled))


class _CharLSTM(nn.Module):
    """Character BiLSTM: the final forward and backward states of each word.

    Args:
        num_chars: character vocabulary size (id 0 = padding).
        dim: character embedding size.
        out: output size, even: ``out // 2`` units per direction.
        dropout: dropout on the character embeddings.
    """

    def __init__(self, num_chars: int, dim: int, out: int, dropout: float) -> None:
        super().__init__()
        self.embed = nn.Embedding(num_chars, dim, padding_idx=0)
        self.dropout = Dropout(dropout)
        self.lstm = nn.LSTM(dim, out // 2, batch_first=True, bidirectional=True)
        self.out = out
        bound = math.sqrt(3.0 / dim)
        nn.init.uniform_(self.embed.weight, -bound, bound)
        with torch.no_grad():
            self.embed.weight[0].zero_()

    def forward(self, chars: Tensor) -> Tensor:
        """``(M, C)`` character ids (0 = padding, after the characters) → ``(M, out)``; zeros for none."""
        lengths = (chars != 0).sum(dim=1)  # (M,)
        x = self.dropout(self.embed(chars))  # (M, C, dim)
        return bidirectional_lstm(self.lstm, x, lengths, outputs=False)[1]


class BiLSTMEncoder(nn.Module):
    """Word (+ character) embeddings → BiLSTM → dropout → linear tag scores.

    Args:
        num_tags: ``K``, the number of tags.
        vocab_size: size of the word vocabulary (``len(word_vocab)``, id 0 = padding).
        char_vocab_size: size of the character vocabulary; ``None``: no character encoder.
        word_dim: word embedding size.
        char_dim: character embedding size.
        char_encoder: ``"cnn"`` (max-pooled convolution) or ``"lstm"`` (final BiLSTM states);
            ``None``: no character encoder even if ``char_vocab_size`` is given.
        char_out: size of a word's character representation (CNN filters; for ``"lstm"``, even:
            half per direction).
        char_kernel: odd width of the character CNN's filters.
        hidden_size: word BiLSTM units *per direction* (the BiLSTM output is ``2 * hidden_size``).
        num_layers: word BiLSTM layers (dropout between them when more than one).
        dropout: dropout on the word representations (and character embeddings) and on the BiLSTM
            output.
        pretrained: optional path to a ``(vocab_size, word_dim)`` float tensor saved with
            ``torch.save`` (see :func:`~crfhead.encoders.vectors.load_word_vectors`), copied into the
            word embeddings (row 0 is zeroed).
        freeze_embeddings: keep the word embeddings fixed during training.
        word_vectors: a source of pretrained vectors for the vocabulary's words
            (:class:`~crfhead.encoders.TextVectors` for a GloVe or word2vec text file,
            :class:`~crfhead.encoders.DistilledVectors` for a local transformer; or its
            ``class_path``/``init_args`` spec), copied into their embedding rows; the other rows
            are random at the vectors' scale (:func:`~crfhead.encoders.vectors.embedding_matrix`).
            Its width must be ``word_dim`` (distilled vectors are reduced to it by PCA). Needs
            ``word_vocab``; not with ``pretrained``.
        word_vocab: the word vocabulary (``len(word_vocab) == vocab_size``), set from the data by
            ``train.py``; read only to look up ``word_vectors``. With ``word_vectors`` the data
            module's vocabulary also holds the dev/test words the source covers
            (:class:`~crfhead.data.datamodule.TaggingDataModule`), so their pretrained rows are
            here. A checkpoint stores the spec without ``word_vectors`` (and ``pretrained``): the
            rows are in its weights, and loading reads no source.

    Attributes:
        needs: ``{"words"}``, plus ``"chars"`` when a character encoder is used.
        tag_batch_size: the chains per batch tagging uses by default.
        coverage: how many vocabulary words ``word_vectors`` gave a vector (also logged at INFO on
            the ``crfhead`` logger); ``None`` without ``word_vectors``.

    Raises:
        ValueError: on non-positive sizes, an unknown ``char_encoder``, an even ``char_kernel``, an odd
            ``char_out`` for ``"lstm"``, a dropout outside ``[0, 1)``, a pretrained tensor of the
            wrong shape, ``word_vectors`` without a ``word_vocab`` of ``vocab_size`` words, with
            ``pretrained``, or of another width than ``word_dim``.
        FileNotFoundError: if ``pretrained`` does not exist.
    """

    needs: frozenset[str] = frozenset({"words"})
    tag_batch_size: int = 256

    @classmethod
    def needs_for(cls, init_args: Mapping[str, Any]) -> frozenset[str]:
        """The fields an encoder of these config ``init_args`` reads (the data's sizes not yet known).

        ``{"words", "chars"}`` with a character encoder (the default ``"cnn"``), else ``{"words"}``:
        the data module builds only those vocabularies (``train.py`` asks before loading the data).
        """
        default = inspect.signature(cls).parameters["char_encoder"].default
        char_encoder = init_args.get("char_encoder", default)
        return frozenset({"words", "chars"} if char_encoder is not None else {"words"})

    def __init__(
        self,
        num_tags: int,
        vocab_size: int,
        char_vocab_size: int | None = None,
        word_dim: int = 100,
        char_dim: int = 30,
        char_encoder: Literal["cnn", "lstm"] | None = "cnn",
        char_out: int = 50,
        char_kernel: int = 3,
        hidden_size: int = 200,
        num_layers: int = 1,
        dropout: float = 0.5,
        pretrained: str | None = None,
        freeze_embeddings: bool = False,
        word_vectors: WordVectors | dict[str, Any] | None = None,
        word_vocab: Vocab | None = None,
    ) -> None:
        super().__init__()
        sizes = {
            "num_tags": num_tags,
            "word_dim": word_dim,
            "char_dim": char_dim,
            "char_out": char_out,
            "char_kernel": char_kernel,
            "hidden_size": hidden_size,
            "num_layers": num_layers,
        }
        for name, value in sizes.items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        for name, size in (("vocab_size", vocab_size), ("char_vocab_size", char_vocab_size)):
            if size is not None and (not isinstance(size, int) or size < 2):
                raise ValueError(f"{name} must be an int >= 2 (id 0 is padding), got {size!r}")
        if char_encoder is not None and char_encoder not in CHAR_ENCODERS:
            raise ValueError(
                f"char_encoder must be one of {CHAR_ENCODERS} or None, got {char_encoder!r}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout!r}")
        self.num_tags = num_tags
        self.vocab_size = vocab_size
        self.char_vocab_size = char_vocab_size
        self.hidden_size = hidden_size

        self.embed = nn.Embedding(vocab_size, word_dim, padding_idx=0)
        bound = math.sqrt(3.0 / word_dim)
        nn.init.uniform_(self.embed.weight, -bound, bound)
        if pretrained is not None:
            vectors = _load_tensor(pretrained)
            if tuple(vectors.shape) != (vocab_size, word_dim):
                raise ValueError(
                    f"pretrained vectors {pretrained!r} have shape {tuple(vectors.shape)}, "
                    f"expected (vocab_size, word_dim) = ({vocab_size}, {word_dim})"
                )
            with torch.no_grad():
                self.embed.weight.copy_(vectors)
        self.coverage: Coverage | None = None
        if word_vectors is not None:
            source = WordVectors.from_spec(word_vectors)
            self.coverage = self._load_vectors(source, word_vocab, pretrained, word_dim)
        with torch.no_grad():
            self.embed.weight[0].zero_()
        self.embed.weight.requires_grad_(not freeze_embeddings)

        self.chars: _CharCNN | _CharLSTM | None = None
        if char_vocab_size is not None and char_encoder == "cnn":
            if char_kernel % 2 == 0:
                raise ValueError(f"char_kernel must be odd, got {char_kernel}")
            self.chars = _CharCNN(char_vocab_size, char_dim, char_out, char_kernel, dropout)
        elif char_vocab_size is not None and char_encoder == "lstm":
            if char_out % 2:
                raise ValueError(f"char_out must be even for the character BiLSTM, got {char_out}")
            self.chars = _CharLSTM(char_vocab_size, char_dim, char_out, dropout)
        self.needs = frozenset({"words", "chars"} if self.chars is not None else {"words"})

        in_dim = word_dim + (char_out if self.chars is not None else 0)
        self.dropout = Dropout(dropout)
        self.lstm = nn.LSTM(
            in_dim,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.out = nn.Linear(2 * hidden_size, num_tags)

    def _load_vectors(
        self,
        source: WordVectors,
        word_vocab: Vocab | None,
        pretrained: str | None,
        word_dim: int,
    ) -> Coverage:
        """Copy ``source``'s vectors of the vocabulary's words into the embedding."""
        if pretrained is not None:
            raise ValueError("give pretrained (a saved table) or word_vectors (a source), not both")
        if word_vocab is None or len(word_vocab) != self.vocab_size:
            got = None if word_vocab is None else len(word_vocab)
            raise ValueError(
                f"word_vectors need the word vocabulary of vocab_size={self.vocab_size} words "
                f"(word_vocab, filled in by train.py), got {got}"
            )
        lookup = source.lookup(word_vocab.itos[2:], word_dim)
        if lookup.dim != word_dim:
            raise ValueError(
                f"{source!r} gave {lookup.dim}-dimensional vectors, word_dim={word_dim}"
            )
        with torch.no_grad():
            self.embed.weight.copy_(embedding_matrix(lookup))
        _LOG.info("%s", lookup.coverage)
        if lookup.coverage.words and not lookup.coverage.found:
            _LOG.warning("%s: no vocabulary word has a vector", lookup.coverage.source)
        return lookup.coverage

    def extra_repr(self) -> str:  # noqa: D102
        vectors = (
            ""
            if self.coverage is None
            else f", vectors={self.coverage.found}/{self.coverage.words}"
        )
        return f"num_tags={self.num_tags}, needs={sorted(self.needs)}{vectors}"

    def parameter_groups(self) -> list[dict[str, Any]]:
        """Optimizer parameter groups: one, ``{"name": "head", "params": [...]}`` (trainable only)."""
        return [{"name": "head", "params": [p for p in self.parameters() if p.requires_grad]}]

    def forward(self, batch: Batch) -> Tensor:
        """Emissions of a batch.

        Args:
            batch: a :class:`~crfhead.data.Batch` with ``mask`` ``(B, T)`` (real tokens first in each
                row, as the :class:`~crfhead.data.Collator` makes it), ``words`` ``(B, T)`` and, with a
                character encoder, ``chars`` ``(B, T, C)``.

        Returns:
            ``(B, T, K)`` float emissions on the module's device; 0 at padded positions.

        Raises:
            ValueError: if a field in :attr:`needs` is missing, ids are out of range, or the mask has
                holes (a padded position before a real token).
        """
        device = self.out.weight.device
        if batch.words is None:
            raise ValueError("BiLSTMEncoder needs word ids: build the Collator with words=Vocab")
        mask = batch.mask.to(device)
        words = batch.words.to(device)
        B, T = mask.shape
        if tuple(words.shape) != (B, T):
            raise ValueError(
                f"words must be (B, T) = ({B}, {T}) like the mask, got {tuple(words.shape)}"
            )
        _check_ids(words, self.vocab_size, "word", "vocab_size")
        lengths = mask.sum(dim=1)  # (B,)
        if not torch.compiler.is_compiling():
            prefix = torch.arange(T, device=device)[None, :] < lengths[:, None]
            if not bool(torch.equal(prefix, mask)):
                raise ValueError(
                    "mask must be True at the first tokens of each row only (no holes)"
                )

        x = self.embed(words)  # (B, T, word_dim)
        if self.chars is not None:
            if batch.chars is None:
                raise ValueError(
                    "this BiLSTMEncoder has a character encoder and needs character ids: build "
                    "the Collator with chars=Vocab"
                )
            chars = batch.chars.to(device)
            if chars.dim() != 3 or tuple(chars.shape[:2]) != (B, T):
                raise ValueError(
                    f"chars must be (B, T, C) = ({B}, {T}, C), got {tuple(chars.shape)}"
                )
            assert self.char_vocab_size is not None
            _check_ids(chars, self.char_vocab_size, "character", "char_vocab_size")
            real = mask.reshape(-1).nonzero().flatten()  # the M real tokens
            flat = chars.reshape(B * T, chars.shape[2]).index_select(0, real)  # (M, C)
            per_word = self.chars(flat)  # (M, char_out)
            char_x = per_word.new_zeros(B * T, per_word.shape[-1]).index_copy(0, real, per_word)
            x = torch.cat([x, char_x.reshape(B, T, per_word.shape[-1]).to(x.dtype)], dim=-1)
        x = self.dropout(x)

        hidden = bidirectional_lstm(self.lstm, x, lengths)[0]
        assert hidden is not None  # (B, T, 2H)
        emissions: Tensor = self.out(self.dropout(hidden))
        return emissions.masked_fill(~mask[..., None], 0.0)


def _load_tensor(path: str) -> Tensor:
    """A tensor saved with ``torch.save`` at ``path`` (float)."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"pretrained word vectors {str(file)!r} not found")
    value = torch.load(file, map_location="cpu", weights_only=True)
    if not isinstance(value, Tensor) or value.dim() != 2 or not value.is_floating_point():
        raise ValueError(f"{str(file)!r} must hold a 2-D float tensor (vocab_size, word_dim)")
    return value.float()
