"""Pretrained word vectors for the BiLSTM: read from a text file, or distilled from a transformer.

A source (:class:`WordVectors`) gives each word of a vocabulary a vector, or none;
:class:`~crfhead.encoders.BiLSTMEncoder` copies them into its embedding (``word_vectors=...``,
chosen by config with ``class_path``/``init_args``), and the words without one keep random rows.

* :class:`TextVectors` reads GloVe (Pennington et al. 2014: ``word v1 ... vD`` per line) or word2vec
  text files (Mikolov et al. 2013: the same after a ``N D`` header line). A vocabulary word takes
  the file's vector of the same spelling, else of its lowercased form, else of the first file word
  equal to it up to case; :class:`Coverage` counts each.
* :class:`DistilledVectors` makes static vectors from a local transformer, as model2vec does
  (Tulkens & van Dongen 2024, https://github.com/MinishLab/model2vec): each vocabulary word is run
  through the model alone (``[CLS] word [SEP]``) and its vector is the mean of its pieces' last
  hidden states, reduced by PCA to the embedding's width. The raw vectors are cached on disk under
  ``$CRFHEAD_CACHE/word_vectors`` (default ``~/.cache/crfhead``), keyed by a hash of the model
  folder's files and one of the word list, so a later run with the same model and vocabulary reads
  them back.

A source also says which words it :meth:`~WordVectors.covers`: with ``extend_vocab`` (the default)
the data module (:class:`~crfhead.data.datamodule.TaggingDataModule`, given the source by
``train.py``) adds the dev and test words the source has a vector for to the word vocabulary, after
the training words, as a pretrained vocabulary would (Lample et al. 2016); a word without a vector
stays unknown. No label is read, only which words the source knows.

``transformers`` is imported only when vectors are distilled (or a distilled source's coverage is
asked, which loads only the tokenizer).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib
import json
import logging
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import torch
from torch import Tensor

from crfhead.data.vocab import Vocab

__all__ = [
    "Coverage",
    "DistilledVectors",
    "Lookup",
    "TextVectors",
    "WordVectors",
    "embedding_matrix",
    "load_word_vectors",
]

_LOG = logging.getLogger("crfhead")

CACHE_FOLDER = "word_vectors"
"""The folder under ``$CRFHEAD_CACHE`` that holds distilled vectors."""
_FORMAT = 1
"""Bumped when the distillation changes, so that older cached vectors are not reused."""
_MAX_PIECES = 64
"""A word longer than this many pieces (special tokens included) is cut to its first ones."""


@dataclass(frozen=True)
class Coverage:
    """How many vocabulary words a source gave a vector.

    Attributes:
        words: vocabulary words looked up.
        exact: found with their own spelling.
        lowercased: found only after lowercasing (the word, or the word and the file's words).
        source: what the vectors came from (a file, a model folder).
    """

    words: int
    exact: int
    lowercased: int
    source: str

    @property
    def found(self) -> int:
        """Words that got a vector."""
        return self.exact + self.lowercased

    @property
    def rate(self) -> float:
        """``found / words`` (0 for an empty vocabulary)."""
        return self.found / self.words if self.words else 0.0

    def __str__(self) -> str:
        return (
            f"word vectors from {self.source}: {self.found} of {self.words} vocabulary words "
            f"({100 * self.rate:.1f}%; {self.exact} exact, {self.lowercased} lowercased)"
        )


@dataclass(frozen=True)
class Lookup:
    """The vectors a source gives a word list.

    Attributes:
        vectors: ``(N, D)`` float32, one row per word; zeros where none was found.
        found: ``(N,)`` bool, which words got a vector.
        coverage: the counts.
    """

    vectors: Tensor
    found: Tensor
    coverage: Coverage

    @property
    def dim(self) -> int:
        """``D``, the vectors' width."""
        return int(self.vectors.shape[1])


class WordVectors(ABC):
    """A source of pretrained word vectors: a vector (or none) for each word of a list.

    Attributes:
        extend_vocab: whether the data module adds the words of the evaluation splits that this
            source :meth:`covers` to the word vocabulary (``True`` unless a subclass's constructor
            is given ``extend_vocab=False``); the training words keep their ids either way.
    """

    extend_vocab: bool = True

    @staticmethod
    def from_spec(spec: WordVectors | dict[str, Any]) -> WordVectors:
        """A source, or one built from its ``{"class_path": ..., "init_args": {...}}`` spec.

        Raises:
            ValueError: if the spec has no ``class_path``, names no importable
                :class:`WordVectors` class, or has arguments the class does not take.
        """
        if isinstance(spec, WordVectors):
            return spec
        if not isinstance(spec, dict) or "class_path" not in spec:
            raise ValueError(
                "word_vectors must be a WordVectors (TextVectors, DistilledVectors) or its "
                f"{{'class_path': ..., 'init_args': {{...}}}} spec, got {spec!r}"
            )
        module, _, name = str(spec["class_path"]).rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError) as error:
            raise ValueError(
                f"word_vectors class_path {spec['class_path']!r} cannot be imported: {error}"
            ) from None
        if not (isinstance(cls, type) and issubclass(cls, WordVectors)):
            raise ValueError(f"word_vectors class_path {spec['class_path']!r} is not a WordVectors")
        try:
            source: WordVectors = cls(**dict(spec.get("init_args") or {}))
        except TypeError as error:
            raise ValueError(f"word_vectors {spec['class_path']}: {error}") from None
        return source

    @abstractmethod
    def lookup(self, words: Sequence[str], dim: int | None = None) -> Lookup:
        """The vectors of ``words``.

        Args:
            words: the vocabulary's words (``<pad>`` and ``<unk>`` left out).
            dim: the width wanted (the embedding's); ``None``: the source's own.

        Raises:
            ValueError: if the source cannot give vectors of width ``dim``.
        """

    def covers(self, words: Sequence[str]) -> Tensor:
        """``(N,)`` bool: which of ``words`` :meth:`lookup` would give a vector.

        This default looks them up; a subclass may answer more cheaply (without building vectors).
        """
        return self.lookup(words).found


def embedding_matrix(lookup: Lookup, specials: int = 2, generator: Any = None) -> Tensor:
    """An embedding table ``(specials + N, D)`` from a lookup: row 0 zero, found vectors in place.

    The other rows (``<unk>`` and the words without a vector) are drawn from ``U(-a, a)`` with the
    standard deviation of the found vectors' entries (``a = sqrt(3) * std``), so that they sit at
    the same scale; ``a = sqrt(3 / D)`` when none was found.

    Args:
        lookup: the vectors of the vocabulary's words after its ``specials`` (``<pad>``, ``<unk>``).
        specials: ids before the first word.
        generator: an optional ``torch.Generator`` for the random rows.
    """
    found = lookup.vectors[lookup.found]
    std = float(found.std()) if found.numel() > 1 else 0.0
    bound = math.sqrt(3.0) * std if std > 0 else math.sqrt(3.0 / lookup.dim)
    size = specials + lookup.vectors.shape[0]
    table = torch.empty(size, lookup.dim).uniform_(-bound, bound, generator=generator)
    rows = specials + torch.nonzero(lookup.found).flatten()
    table[rows] = found
    table[0] = 0.0
    return table


# ----------------------------------------------------------------------------- text files
def _open(path: Path) -> BinaryIO:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class TextVectors(WordVectors):
    """Word vectors in a GloVe or word2vec text file (``.gz`` read as gzip).

    One word and its ``D`` numbers per line, separated by single spaces; word2vec's optional first
    line ``N D`` (its count is not checked). The file is UTF-8. A word may hold spaces (as a few of
    GloVe 840B's do): the last ``D`` fields are the numbers, ``D`` from the header or the first
    line. Blank lines are skipped; the first occurrence of a word wins. Every line's field count is
    checked, the numbers only of the lines used.

    Args:
        path: the text file.
        extend_vocab: add the dev and test words the file has a vector for to the word vocabulary
            (:attr:`WordVectors.extend_vocab`); ``False``: the training words only.

    Raises:
        FileNotFoundError: if ``path`` is not a file.
    """

    def __init__(self, path: str, extend_vocab: bool = True) -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise FileNotFoundError(f"word vectors {str(self.path)!r} not found")
        self.extend_vocab = bool(extend_vocab)

    def __repr__(self) -> str:
        return f"TextVectors(path={str(self.path)!r})"

    def _lines(self) -> Iterator[tuple[int, list[str]]]:
        """``(line number, fields)`` of every non-blank line, the header included."""
        with _open(self.path) as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as error:
                    raise ValueError(f"{self.path}:{number}: not UTF-8 ({error})") from None
                line = line.rstrip()
                if line:
                    yield number, line.split(" ")

    def lookup(self, words: Sequence[str], dim: int | None = None) -> Lookup:
        """The file's vectors of ``words``: same spelling, else lowercased, else equal up to case.

        Raises:
            ValueError: naming ``file:line`` for a line with a word and no numbers, a number count
                other than the header's (or the first line's), a field that is not a finite number;
                if the file holds no vectors, or vectors of another width than ``dim``.
        """
        exact_want = {w: i for i, w in enumerate(words)}
        lower_want = {w.lower() for w in words}
        exact: dict[int, Tensor] = {}
        lowered: dict[str, Tensor] = {}  # the file's word is the lowercased vocabulary word
        folded: dict[str, Tensor] = {}  # the file's word lowercased is
        width: int | None = None
        for number, fields in self._lines():
            if (
                width is None
                and number == 1
                and len(fields) == 2
                and all(f.isdigit() for f in fields)
            ):
                width = int(fields[1])  # word2vec header "N D"
                if width < 1:
                    raise ValueError(f"{self.path}:1: header {' '.join(fields)!r} states D = 0")
                self._check_width(width, dim)
                continue
            if len(fields) < 2:
                raise ValueError(
                    f"{self.path}:{number}: a word and its numbers expected, got {fields[0]!r}"
                )
            if width is None:  # the first line's trailing numbers (its word may hold spaces)
                numbers = next(
                    (i for i, f in enumerate(reversed(fields)) if not _is_number(f)), len(fields)
                )
                width = min(numbers, len(fields) - 1)
                self._check_width(width, dim)
            count = len(fields) - 1
            if count == width:
                word = fields[0]
            elif count > width and not _is_number(fields[-width - 1]):
                word = " ".join(fields[:-width])  # a word with spaces
            else:
                raise ValueError(
                    f"{self.path}:{number}: {count} numbers, expected {width} (dimension mismatch)"
                )
            key = word.lower()
            if key not in lower_want:
                continue
            need = word in exact_want and exact_want[word] not in exact
            need_lower = word == key and key not in lowered
            need_fold = key not in folded
            if not (need or need_lower or need_fold):
                continue
            vector = self._parse(fields[-width:], number)
            if need:
                exact[exact_want[word]] = vector
            if need_lower:
                lowered[key] = vector
            if need_fold:
                folded[key] = vector
        if width is None:
            raise ValueError(f"{self.path} holds no word vectors")
        vectors = torch.zeros(len(words), width)
        found = torch.zeros(len(words), dtype=torch.bool)
        n_exact = n_lower = 0
        for i, w in enumerate(words):
            key = w.lower()
            row = exact.get(i)
            if row is not None:
                n_exact += 1
            else:
                row = lowered.get(key, folded.get(key))
                if row is None:
                    continue
                n_lower += 1
            vectors[i] = row
            found[i] = True
        return Lookup(vectors, found, Coverage(len(words), n_exact, n_lower, str(self.path)))

    def _check_width(self, width: int, dim: int | None) -> None:
        """Raise at once (not after reading a large file) if ``dim`` is not the file's width."""
        if dim is not None and dim != width:
            raise ValueError(
                f"{self.path} holds {width}-dimensional vectors but the embedding has "
                f"word_dim={dim}: set word_dim: {width}"
            )

    def _parse(self, fields: list[str], number: int) -> Tensor:
        try:
            values = [float(f) for f in fields]
        except ValueError:
            bad = next(f for f in fields if not _is_number(f))
            raise ValueError(f"{self.path}:{number}: {bad!r} is not a number") from None
        vector = torch.tensor(values, dtype=torch.float32)
        if not bool(torch.isfinite(vector).all()):
            raise ValueError(f"{self.path}:{number}: the vector holds a NaN or an infinity")
        return vector


def load_word_vectors(path: str | Path, vocab: Vocab) -> tuple[Tensor, int]:
    """A text file's vectors as an embedding table for ``vocab``: ``(table, words found)``.

    The table is :func:`embedding_matrix` of :meth:`TextVectors.lookup` (row 0 zero, missing words
    random at the vectors' scale). To train with the vectors, give the encoder the source instead:
    ``BiLSTMEncoder(..., word_vectors=TextVectors(path), word_vocab=vocab)``; this table can also be
    saved with ``torch.save`` for ``BiLSTMEncoder(pretrained=file)``.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        ValueError: as :meth:`TextVectors.lookup`.
    """
    lookup = TextVectors(str(path)).lookup(vocab.itos[2:])
    return embedding_matrix(lookup), lookup.coverage.found


# ----------------------------------------------------------------------------- distillation
def cache_dir() -> Path:
    """``$CRFHEAD_CACHE/word_vectors`` (default ``~/.cache/crfhead/word_vectors``)."""
    root = os.environ.get("CRFHEAD_CACHE") or Path.home() / ".cache" / "crfhead"
    return Path(root) / CACHE_FOLDER


_FOLDER_HASHES: dict[tuple[str, tuple[tuple[str, int, int], ...]], str] = {}


def folder_hash(folder: str | Path) -> str:
    """SHA-256 of a folder's files (relative paths and contents), remembered in-process by mtime."""
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"model folder {str(root)!r} does not exist")
    files = sorted(p for p in root.rglob("*") if p.is_file())
    stamp = tuple(
        (p.relative_to(root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in files
    )
    key = (str(root.resolve()), stamp)
    if key not in _FOLDER_HASHES:
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            digest.update(b"\0")
        _FOLDER_HASHES[key] = digest.hexdigest()
    return _FOLDER_HASHES[key]


def _encode(tokenizer: Any, words: Sequence[str], max_length: int) -> tuple[Any, Tensor]:
    """``(encoded, pieces (n, L))``: each word alone as ``[CLS] word [SEP]``; its real pieces' mask."""
    encoded = tokenizer(
        list(words),
        padding=True,
        truncation=True,
        max_length=max_length,
        return_special_tokens_mask=True,
        return_tensors="pt",
    )
    special = encoded.pop("special_tokens_mask").bool()
    pieces: Tensor = encoded["attention_mask"].bool() & ~special
    return encoded, pieces


def _distil(
    folder: str, words: Sequence[str], batch_size: int, device: str
) -> tuple[Tensor, Tensor]:
    """``(vectors (N, H), found (N,))``: each word alone through the model, its pieces' mean.

    A word the tokenizer gives no piece (an empty or control-character string) is not found.
    """
    from transformers.utils import logging as hf_logging

    from crfhead.encoders.transformer import _load

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # "Loading weights" bar
    try:
        tokenizer, model = _load(folder, True)
    finally:
        if bar:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
    model.to(device).eval()
    hidden = int(model.config.hidden_size)
    vectors = torch.zeros(len(words), hidden)
    found = torch.zeros(len(words), dtype=torch.bool)
    order = sorted(range(len(words)), key=lambda i: len(words[i]))  # similar lengths together
    positions = getattr(model.config, "max_position_embeddings", None) or _MAX_PIECES
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            encoded, pieces = _encode(
                tokenizer, [words[i] for i in rows], min(_MAX_PIECES, int(positions))
            )  # pieces: (n, L)
            inputs = {k: v.to(device) for k, v in encoded.items()}
            states = model(**inputs).last_hidden_state.float().cpu()  # (n, L, H)
            counts = pieces.sum(dim=1, keepdim=True)  # (n, 1)
            mean = (states * pieces[..., None]).sum(dim=1) / counts.clamp(min=1)
            index = torch.tensor(rows)
            vectors[index] = mean
            found[index] = counts[:, 0] > 0
    return vectors, found


def _pca(vectors: Tensor, found: Tensor, dim: int) -> Tensor:
    """The found rows on their ``dim`` first principal axes (signs fixed); zeros elsewhere."""
    rows = vectors[found].double()
    mean = rows.mean(dim=0, keepdim=True)
    _, _, vh = torch.linalg.svd(rows - mean, full_matrices=False)
    axes = vh[:dim]  # (dim, H)
    signs = torch.sign(axes.gather(1, axes.abs().argmax(dim=1, keepdim=True)))
    axes = axes * torch.where(signs == 0, torch.ones_like(signs), signs)
    out = torch.zeros(vectors.shape[0], dim)
    out[found] = ((rows - mean) @ axes.T).float()
    return out


class DistilledVectors(WordVectors):
    """Static word vectors distilled from a local transformer (model2vec's recipe), cached on disk.

    Each word runs through the model alone; its vector is the mean over its subword pieces of the
    last hidden state (special tokens left out). When the embedding is narrower than the model, the
    vectors are reduced to its width by PCA (centred, fitted on the vocabulary), as model2vec does;
    a wider embedding is an error. The raw vectors are cached as
    ``<cache_dir()>/distilled-<model hash>-<words hash>.pt`` (written atomically) and read back on
    later runs without loading the model; a damaged cache file is recomputed.

    Args:
        model: a local HuggingFace model folder (``config.json``, weights, fast tokenizer);
            ``None``: the default MiniLM (:func:`~crfhead.encoders.default_model_dir`).
        batch_size: words per forward pass.
        device: where the model runs; ``None``: ``cuda`` when available, else the CPU.
        cache: read and write the cache (``False``: distil every time, write nothing).
        extend_vocab: add the dev and test words the model gives a vector (those its tokenizer
            splits into at least one piece: in practice all) to the word vocabulary
            (:attr:`WordVectors.extend_vocab`); ``False``: the training words only.

    Raises:
        FileNotFoundError: if ``model`` is not a folder.
        MissingPackageError: if ``model`` is ``None`` and the default model's package is not
            installed.
        ValueError: if the folder has no ``config.json``, or ``batch_size < 1``.
    """

    @staticmethod
    def check_requirements(init_args: Mapping[str, Any]) -> None:
        """The default model's package, where ``model`` is left to it (``train.py``, before building).

        Raises:
            MissingPackageError: if it is not installed.
        """
        from crfhead.encoders.transformer import check_default_model

        check_default_model(init_args)

    def __init__(
        self,
        model: str | None = None,
        batch_size: int = 256,
        device: str | None = None,
        cache: bool = True,
        extend_vocab: bool = True,
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        self.model = model
        _ = self.folder  # checked now: a config fails before anything is built
        self.batch_size = batch_size
        self.device = device
        self.cache = cache
        self.extend_vocab = bool(extend_vocab)

    def __repr__(self) -> str:
        return f"DistilledVectors(model={self.model!r}, cache={self.cache})"

    @property
    def folder(self) -> str:
        """The model folder (for ``model=None`` the default model's, found where it is loaded).

        Raises:
            FileNotFoundError: if ``model`` is not a folder.
            MissingPackageError: if the default model's package is not installed.
            ValueError: if the folder has no ``config.json``.
        """
        from crfhead.encoders.transformer import _source

        source, local = _source(self.model)
        if not local:
            raise FileNotFoundError(
                f"DistilledVectors needs a local model folder, got {self.model!r} (not a folder): "
                "write one with save_pretrained"
            )
        return source

    def cache_path(self, words: Sequence[str]) -> Path:
        """Where the raw vectors of ``words`` distilled from this model are cached."""
        settings = {"format": _FORMAT, "pooling": "mean", "max_pieces": _MAX_PIECES}
        digest = hashlib.sha256(json.dumps([settings, list(words)]).encode("utf-8")).hexdigest()
        return cache_dir() / f"distilled-{folder_hash(self.folder)[:16]}-{digest[:16]}.pt"

    def raw(self, words: Sequence[str]) -> tuple[Tensor, Tensor]:
        """``(vectors (N, H), found (N,))`` at the model's width, from the cache if it has them."""
        path = self.cache_path(words) if self.cache else None
        if path is not None and path.is_file():
            try:
                saved = torch.load(path, map_location="cpu", weights_only=True)
                vectors, found = saved["vectors"], saved["found"]
                if vectors.shape[0] == len(words) == found.shape[0]:
                    _LOG.info("distilled word vectors read from %s", path)
                    return vectors, found
            except Exception as error:  # a truncated or foreign file: distil again
                _LOG.warning("distilled word vectors %s unreadable (%s); recomputing", path, error)
        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        vectors, found = _distil(self.folder, words, self.batch_size, device)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # one per process: ranks race
            try:
                torch.save({"vectors": vectors, "found": found}, tmp)
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
        return vectors, found

    def covers(self, words: Sequence[str]) -> Tensor:
        """``(N,)`` bool: the words the tokenizer splits into at least one piece (the model unrun).

        The same words :meth:`lookup` finds: a word's vector is the mean of its pieces.
        """
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(self.folder, local_files_only=True)
        found = torch.zeros(len(words), dtype=torch.bool)
        step = max(self.batch_size, 1024)
        for start in range(0, len(words), step):
            _, pieces = _encode(tokenizer, words[start : start + step], _MAX_PIECES)
            found[start : start + step] = pieces.any(dim=1)
        return found

    def lookup(self, words: Sequence[str], dim: int | None = None) -> Lookup:
        """Every word's distilled vector, PCA-reduced to ``dim`` when below the model's width.

        Raises:
            ValueError: if ``dim`` exceeds the model's hidden size, or if the vocabulary has fewer
                words with a vector than ``dim`` (PCA needs at least ``dim``).
        """
        vectors, found = self.raw(words)
        hidden = int(vectors.shape[1])
        if dim is not None and dim > hidden:
            raise ValueError(
                f"the model {self.folder!r} gives {hidden}-dimensional vectors; word_dim={dim} is "
                f"wider: set word_dim to at most {hidden}"
            )
        if dim is not None and dim < hidden:
            if int(found.sum()) < dim:
                raise ValueError(
                    f"PCA to word_dim={dim} needs at least {dim} words with a vector, got "
                    f"{int(found.sum())}"
                )
            vectors = _pca(vectors, found, dim)
        n = int(found.sum())
        return Lookup(vectors, found, Coverage(len(words), n, 0, self.folder))
