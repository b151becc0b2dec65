"""Tag raw text with a trained model: :func:`load` and :class:`TextTagger` (what ``crfhead.load`` returns).

Modelled on Flair's ``SequenceTagger.load(...).predict(sentence)`` and HuggingFace's token-classification
``pipeline`` (entities with character offsets), with what only a structured model gives: each entity's
*exact* probability, the marginal probability that the span is an entity of that type under
``p(z | x)`` (:func:`crfhead.evaluation.spans.span_probabilities`), not a softmax of one token's score.

Raw text is split by the tokenizer the model was trained with (it travels in the vocabularies:
:mod:`crfhead.data.tokenize`), so the finance model sees lowercase letter runs and a CoNLL model
sees punctuation as separate tokens; pre-tokenised input (a list of tokens) skips it. Decoding is the
model's own (the head's decoder, or the group decoder of a higher-order model), batched, under
``torch.inference_mode``, on any device. A higher-order model decodes each text alone unless told
which texts form a group (``group=``: all of them, their documents, a
:class:`~crfhead.data.grouping.Grouping` such as the tweet clusters it was trained with, or explicit
index lists); each jointly decoded text then says whether its group's labelling was certified.

A raw text is tokenised once (offsets always into the original text) and cut into chains: its
sentences by default (``split="sentences"``, :func:`~crfhead.inference.documents.sentence_ranges`),
each chain longer than ``max_length`` tokens into overlapping windows merged back so that entities
are never cut and the tags stay a valid path (:mod:`~crfhead.inference.documents`). The chains of
many texts share a batch; any iterable of texts is read lazily, a batch at a time
(:meth:`TextTagger.iter_annotate`), so a stream of any length is tagged in constant memory.

What the user already knows conditions all of it: ``tag(text, spans=[(start, end, type)],
forbid=[...])`` pins entities by character offsets and excludes labels or types
(:mod:`~crfhead.inference.pins`); the chains are the head's restricted to those label sets, so the
decoded path, the span probabilities (a pin's is 1.0), the marginals and the best paths are
conditioned on them. A pin across a sentence boundary keeps those sentences one chain; no window
seam cuts a pin.

Each batch runs the encoder once (in ``dtype=``, under autocast, for bf16/fp16) and builds the
head's chain potentials once; the decoded path, the span probabilities, the node marginals and the
``k`` best paths (``annotate(..., marginals=True, k=k)``, :meth:`TextTagger.trellis`) are all read
from those potentials, whose recursions run in float32.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, overload

import torch

from crfhead import engine
from crfhead.data.batching import Batch, collator_for
from crfhead.data.grouping import DocumentGroups, Grouping
from crfhead.data.sentence import Sentence
from crfhead.data.tokenize import Token, Tokenizer, tokenizer_from_dict
from crfhead.engine.potentials import ChainPotentials
from crfhead.evaluation.spans import span_probabilities_from
from crfhead.inference.collector import collector_paused
from crfhead.inference.documents import (
    join_ranges,
    merge_kbest,
    merge_windows,
    sentence_ranges,
    token_ranges,
    uncuttable_seams,
    windows,
)
from crfhead.inference.entities import Entity, Tagged, Trellis, entities_of
from crfhead.inference.pins import ChainConstraint, Forbid, Pin, TextConstraint, text_constraint
from crfhead.inference.saved import ModelFiles, read_model, save_folder
from crfhead.model.build import build_grouping
from crfhead.model.tagger import Tagger
from crfhead.numerics import IMPOSSIBLE
from crfhead.schemes import Span, entity_types, is_valid, tags_to_spans

__all__ = [
    "BATCH_SIZE",
    "BATCH_TOKENS",
    "GROUP_MODES",
    "PROGRESS_FROM",
    "SPLITS",
    "Forbids",
    "GroupBy",
    "Spans",
    "TextTagger",
    "load",
]

GROUP_MODES = ("none", "all", "document", "auto")
"""``group=`` by name: each text alone, all texts one group, one group per ``doc_id``, the grouping
the model was trained with."""

GroupBy: TypeAlias = bool | str | Grouping | Sequence[Sequence[int]]
"""What ``group=`` takes: ``False``/``"none"``, ``True``/``"all"``, ``"document"``, ``"auto"``, a
:class:`~crfhead.data.grouping.Grouping`, or the groups as lists of indices into the texts."""

Spans: TypeAlias = Iterable[Sequence[Pin] | None]
"""What ``spans=`` takes for several texts: one list of ``(start, end, type)`` per text (``None``
or ``[]``: none), in the texts' order (:mod:`~crfhead.inference.pins`)."""

Forbids: TypeAlias = Sequence[str] | Iterable[Sequence[Forbid] | None]
"""What ``forbid=`` takes for several texts: labels and types (str) excluded in every text, or one
list per text of labels, types and ``(start, end, label)`` ranges."""

PROGRESS_FROM = 1000
"""With ``progress=None``, a progress bar is shown when tagging at least this many texts."""

BATCH_SIZE = 64
"""Chains per batch when tagging with a model whose encoder names no ``tag_batch_size`` of its own
(the indicator and BiLSTM encoders name 256: their batches' fixed cost outweighs the padding)."""

BATCH_TOKENS = 64 * 512
"""With the default ``batch_size=None``, the padded tokens (chains times the longest) a batch holds
at most: a batch of long windows is never larger than 64 chains of the default ``max_length``, so
the larger batches of short sentences cost no memory where chains are long."""

SPLITS = ("sentences", "none")
"""``split=``: each sentence of a raw text its own chain, or the whole text one chain."""


@dataclass(frozen=True)
class _Plan:
    """How texts are cut into chains and what is read from them (``annotate``'s options)."""

    split: str
    max_length: int
    overlap: int
    marginals: bool
    k: int | None


@dataclass(frozen=True)
class _Doc:
    """One item tokenised and cut: its chains (token ranges), each as its windows (token ranges)."""

    index: int
    text: str
    tokens: list[Token]
    chains: list[range]
    windows: list[list[range]]
    constraint: TextConstraint | None = None


@dataclass(frozen=True)
class _Decoded:
    """One chain decoded: tags, chain-local entities and what was asked of it."""

    tags: list[str]
    spans: list[Span]
    probabilities: list[float] | None
    marginals: list[list[float]] | None
    best: list[tuple[float, list[int]]] | None
    certified: bool | None


def _kind(item: object) -> str:
    """``None``, ``a bytes``, ``an int``: an object's type for an error message."""
    if item is None:
        return "None"
    name = type(item).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _refuse_not_iterable(items: object) -> None:
    """Refuse ``None``, bytes and what cannot be iterated as a collection of texts.

    Raises:
        ValueError: naming what was given.
    """
    if items is None or isinstance(items, bytes | bytearray) or not isinstance(items, Iterable):
        raise ValueError(
            f"texts is {_kind(items)}: give a str, or an iterable of str (a list, a generator, "
            "a file's lines)"
        )


def _refuse_one_text(items: object) -> None:
    """Refuse a bare str where an iterable of items is wanted (it would be tagged char by char).

    Raises:
        ValueError: naming the text's start.
    """
    if isinstance(items, str):
        raise ValueError(
            f"annotate() takes an iterable of texts, got one str ({items[:40]!r}); "
            "pass [text], or use tag(text)"
        )


def _only_text(texts: Iterable[object]) -> Iterator[str]:
    """``texts`` checked lazily to be str each (:meth:`TextTagger.tag` takes raw text only).

    Raises:
        ValueError: naming the first item that is not a str, by index and type.
    """
    _refuse_not_iterable(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            hint = "; use annotate() for token lists" if isinstance(t, list | tuple) else ""
            raise ValueError(f"texts[{i}] is {_kind(t)}: tag() takes str{hint}")
        yield t


def _check_dtype(dtype: torch.dtype | None, device: torch.device) -> torch.dtype:
    """``dtype`` as the encoder runs in it on ``device`` (``None``: float32).

    Raises:
        ValueError: not a floating dtype, or float16 on a CPU whose torch cannot compute in it.
    """
    if dtype is None:
        return torch.float32
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(
            f"dtype must be a floating torch.dtype (torch.bfloat16, torch.float16, torch.float32), "
            f"got {dtype!r}"
        )
    if dtype == torch.float16 and device.type == "cpu":
        try:
            x = torch.ones(2, 2, dtype=torch.float16)
            with torch.autocast("cpu", dtype=torch.float16):
                torch.nn.functional.linear(x, x)
        except (RuntimeError, TypeError) as err:
            raise ValueError(
                f"dtype=torch.float16 on this CPU: torch cannot compute in it here ({err}); "
                "use torch.bfloat16, or a GPU"
            ) from None
    return dtype


def _joined(tokens: Sequence[object], index: int = 0) -> tuple[str, list[Token]]:
    """Pre-tokenised input as a text: the tokens joined by single spaces, with their offsets.

    Raises:
        ValueError: a token that is not a str (naming the text's index and the token's type).
    """
    out, pos = [], 0
    words: list[str] = []
    for j, w in enumerate(tokens):
        if not isinstance(w, str):
            raise ValueError(
                f"texts[{index}][{j}] is {_kind(w)}: a pre-tokenised text must be a list of str"
            )
        words.append(w)
        out.append(Token(w, pos, pos + len(w)))
        pos += len(w) + 1
    return " ".join(words), out


def _is_triple(item: object) -> bool:
    """Whether ``item`` looks like one ``(start, end, label)`` (not a list of them)."""
    return isinstance(item, tuple | list) and len(item) == 3 and isinstance(item[0], int)


class _PerText:
    """Each text's ``(spans, forbid)`` in order, read lazily from ``annotate``'s ``spans=``/``forbid=``.

    Raises (at construction, :meth:`take` and :meth:`finish`):
        ValueError: ``spans``/``forbid`` that is a str or not iterable; a per-text entry that is
            one triple or a str rather than a list; fewer or more entries than texts.
    """

    def __init__(self, spans: Spans | None, forbid: Forbids | None) -> None:
        for name, value in (("spans", spans), ("forbid", forbid)):
            if isinstance(value, str | bytes) or (
                value is not None and not isinstance(value, Iterable)
            ):
                raise ValueError(
                    f"{name}= is {_kind(value)}: give one list per text (for one text, "
                    f"tag(text, {name}=[...]))"
                )
        self.shared: list[Forbid] | None = None
        self.iters: dict[str, Iterator[Any]] = {}
        if isinstance(forbid, Sequence) and all(isinstance(f, str) for f in forbid):
            self.shared = list(forbid)  # labels and types: the same for every text
        elif forbid is not None:
            self.iters["forbid"] = iter(forbid)
        if spans is not None:
            self.iters["spans"] = iter(spans)

    def take(self, i: int) -> tuple[list[Pin] | None, list[Forbid] | None]:
        """Text ``i``'s spans and forbids."""
        got: dict[str, Any] = {"spans": None, "forbid": self.shared}
        done = object()
        for name, it in self.iters.items():
            entry = next(it, done)
            if entry is done:
                raise ValueError(
                    f"{name}= ran out at texts[{i}] (it has {i} entries): give one list per text"
                )
            if entry is not None and (
                _is_triple(entry) or isinstance(entry, str) or not isinstance(entry, Iterable)
            ):
                raise ValueError(
                    f"{name}[{i}] is {entry!r}: give each text's {name} as a list "
                    f"({name}=[[...], [...]] for several texts; tag(text, {name}=[...]) for one)"
                )
            got[name] = None if entry is None else list(entry)
        return got["spans"], got["forbid"]

    def finish(self, n: int) -> None:
        """Refuse entries left after the ``n`` texts."""
        done = object()
        for name, it in self.iters.items():
            if next(it, done) is not done:
                raise ValueError(f"{name}= has more entries than the {n} texts: one list per text")


class TextTagger:
    """A trained model ready to tag text (build with :func:`load`).

    Args:
        model: the tagger (encoder → emissions → head).
        vocabs: its serialised vocabularies.
        config: its encoder / head / decoder specs (as saved).
        device: where to run (default: the CPU).
        report: its test report, if saved with it.
        dtype: the dtype the encoder computes in (``torch.bfloat16``, ``torch.float16``; default
            float32): its weights are cast and it runs under autocast; the head and the chain
            recursions stay float32.

    Attributes:
        model: the :class:`~crfhead.model.tagger.Tagger`, in eval mode.
        vocabs: the vocabularies.
        tokenizer: the model's tokenizer, or ``None`` when its checkpoint predates tokenizers being
            saved (then raw text is refused; pre-tokenised input works).
        grouping: the grouping the model was trained with (``group="auto"``), ``None`` if none.
        dtype: the encoder's dtype.

    Raises:
        ValueError: a device the machine lacks; a dtype that is not floating, or float16 on a CPU
            that cannot compute in it.
    """

    def __init__(
        self,
        model: Tagger,
        vocabs: dict[str, Any],
        config: dict[str, Any],
        device: str | torch.device | None = None,
        report: dict[str, Any] | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        self.model = model.eval()
        self.vocabs = vocabs
        self.config = config
        self.report = report
        spec = vocabs.get("tokenizer")
        self.tokenizer: Tokenizer | None = None if spec is None else tokenizer_from_dict(spec)
        self._collate = collator_for(vocabs, model.needs)
        self.grouping: Grouping | None = build_grouping(config.get("grouping"))
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self.to(device or "cpu")
        self.dtype = _check_dtype(dtype, self.device)
        if self.dtype != torch.float32:
            self.model.encoder.to(self.dtype)

    @property
    def labels(self) -> list[str]:
        """The label vocabulary."""
        return list(self.model.labels.labels)

    @property
    def scheme(self) -> str | None:
        """The tagging scheme of the labels."""
        return self.model.labels.scheme

    @property
    def batch_size(self) -> int:
        """The chains per batch tagging uses when not told.

        The encoder's ``tag_batch_size`` where it names one, else :data:`BATCH_SIZE`.
        """
        size = getattr(self.model.encoder, "tag_batch_size", BATCH_SIZE)
        return size if isinstance(size, int) and size >= 1 else BATCH_SIZE

    @property
    def entity_types(self) -> list[str]:
        """The entity types of the labels, in order of first appearance."""
        return entity_types(self.model.labels.labels, self.model.labels.scheme)

    def collate(self, sentences: Sequence[Sentence]) -> Batch:
        """The model's batch of ``sentences`` (its own collate), on the model's device."""
        return self._collate(list(sentences)).to(self.device)

    def to(self, device: str | torch.device) -> TextTagger:
        """Move the model to ``device``; returns ``self``.

        Raises:
            ValueError: a device this machine does not have (named).
        """
        dev = torch.device(device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {dev} asked for, but CUDA is not available on this machine")
        if dev.type == "mps" and not torch.backends.mps.is_available():
            raise ValueError(f"device {dev} asked for, but MPS is not available on this machine")
        self.device = dev
        self.model.to(self.device)
        return self

    # ------------------------------------------------------------------------------ tagging
    @overload
    def tag(  # type: ignore[overload-overlap]  # a str is an Iterable[str]: this one comes first
        self,
        texts: str,
        *,
        batch_size: int | None = ...,
        progress: bool | None = ...,
        group: GroupBy = ...,
        split: str | None = ...,
        max_length: int = ...,
        overlap: int | None = ...,
        spans: Sequence[Pin] | None = ...,
        forbid: Sequence[Forbid] | None = ...,
    ) -> list[Entity]: ...

    @overload
    def tag(
        self,
        texts: Iterable[str],
        *,
        batch_size: int | None = ...,
        progress: bool | None = ...,
        group: GroupBy = ...,
        split: str | None = ...,
        max_length: int = ...,
        overlap: int | None = ...,
        spans: Spans | None = ...,
        forbid: Forbids | None = ...,
    ) -> list[list[Entity]]: ...

    def tag(
        self,
        texts: str | Iterable[str],
        *,
        batch_size: int | None = None,
        progress: bool | None = None,
        group: GroupBy = False,
        split: str | None = None,
        max_length: int = 512,
        overlap: int | None = None,
        spans: Sequence[Pin] | Spans | None = None,
        forbid: Sequence[Forbid] | Forbids | None = None,
    ) -> list[Entity] | list[list[Entity]]:
        """The entities of a raw text, or of each of an iterable of texts (one list per text).

        Args:
            texts: a raw text, or any iterable of them (a list, a generator, a file's lines).
            batch_size: chains (sentences, windows) per batch; many short ones share a batch.
                ``None``: the model's own, :attr:`batch_size`, in batches of at most
                :data:`BATCH_TOKENS` padded tokens (an explicit size is taken as given).
            progress: show a progress bar (``None``: from :data:`PROGRESS_FROM` texts).
            group: which texts a higher-order model decodes jointly (:data:`GroupBy`; default:
                each alone). :meth:`annotate` also says whether each group was certified.
            split: ``"sentences"`` (the default): each sentence of a text its own chain
                (:func:`~crfhead.inference.documents.sentence_ranges`); ``"none"``: the whole text
                one chain (the only choice, and the default, with ``group=``).
            max_length: the longest chain, in tokens; a longer one is cut into overlapping windows
                merged back as :mod:`~crfhead.inference.documents` says.
            overlap: the least overlap of consecutive windows, in tokens (``None``:
                ``max_length // 4``).
            spans: known entities to pin, ``(start, end, type)`` by character offsets (``end``
                exclusive): for one text a list of them, for several texts one list per text
                (:data:`Spans`). Decoding, probabilities, marginals and best paths are then
                conditioned on them; each comes out as an entity with probability 1.0
                (:mod:`~crfhead.inference.pins` says what pinning means in each scheme).
            forbid: labels (``"B-MISC"``) or entity types (``"MISC"``) excluded at every token,
                and, per text, ``(start, end, label or type)`` excluded on a character range: for
                one text a list of them, for several texts a list of labels/types for all, or one
                list per text (:data:`Forbids`).

        Raises:
            ValueError: the model's tokenizer is unknown; ``texts`` is not an iterable of str
                (naming the first item that is not, by index and type); an invalid option; or
                ``group`` is invalid or given to a model without a group decoder; a span or
                forbid that is invalid for its text (:func:`~crfhead.inference.pins.text_constraint`:
                offsets outside the text or cutting a token, overlapping spans, an unknown type),
                or constraints that leave a text no valid tag path (naming the text); ``spans``
                or ``forbid`` with ``group``.
        """
        opts = dict(
            batch_size=batch_size,
            progress=progress,
            group=group,
            split=split,
            max_length=max_length,
            overlap=overlap,
        )
        if isinstance(texts, str):
            one = dict(
                spans=None if spans is None else [spans],
                forbid=None if forbid is None else [forbid],
            )
            return self.annotate([texts], **opts, **one)[0].entities  # type: ignore[arg-type]
        many = dict(spans=spans, forbid=forbid)
        # Paused here too, so the tokens and tags, dropped when the entities are taken, are freed
        # before the collector is back: its first young collection then sees the entities alone.
        with collector_paused():
            return [t.entities for t in self.annotate(_only_text(texts), **opts, **many)]  # type: ignore[arg-type]

    def iter_tag(
        self,
        texts: Iterable[str],
        *,
        batch_size: int | None = None,
        progress: bool | None = None,
        split: str | None = None,
        max_length: int = 512,
        overlap: int | None = None,
        spans: Spans | None = None,
        forbid: Forbids | None = None,
    ) -> Iterator[list[Entity]]:
        """:meth:`tag` as a generator: each text's entities in input order, batch by batch.

        ``texts`` is read lazily (a batch's texts at a time) so an unbounded stream is tagged in
        constant memory; so are ``spans`` and per-text ``forbid`` lists, in step with it. Options
        as :meth:`tag` (``group=`` needs all texts at once: use :meth:`tag`).

        Raises:
            ValueError: as :meth:`tag`; an item's error when the stream reaches it.
        """
        tagged = self.iter_annotate(
            _only_text(texts),
            batch_size=batch_size,
            progress=progress,
            split=split,
            max_length=max_length,
            overlap=overlap,
            spans=spans,
            forbid=forbid,
        )
        return (t.entities for t in tagged)

    def annotate(
        self,
        items: Iterable[str | Sequence[str]],
        *,
        batch_size: int | None = None,
        progress: bool | None = None,
        group: GroupBy = False,
        split: str | None = None,
        max_length: int = 512,
        overlap: int | None = None,
        marginals: bool = False,
        k: int | None = None,
        spans: Spans | None = None,
        forbid: Forbids | None = None,
    ) -> list[Tagged]:
        """Tag each item: a raw text (``str``, split by the model's tokenizer) or a list of tokens.

        A token list's character offsets index its tokens joined by single spaces; it is not
        split into sentences, but is cut into windows beyond ``max_length``. With ``group``
        (:meth:`tag`), each text of a group decoded jointly has :attr:`Tagged.certified` set.
        Python's cyclic garbage collector is paused for the call, and :meth:`tag`'s
        (:func:`~crfhead.inference.collector.collector_paused`; not for the streaming calls).

        Args:
            items: any iterable of raw texts and token lists.
            batch_size: as :meth:`tag`; ``progress``, ``group``, ``split``, ``max_length`` and
                ``overlap`` too.
            progress: as :meth:`tag`.
            group: as :meth:`tag`.
            split: as :meth:`tag`.
            max_length: as :meth:`tag`.
            overlap: as :meth:`tag`.
            marginals: fill :attr:`Tagged.marginals` (node marginals of each token).
            k: fill :attr:`Tagged.best` with the ``k`` most probable labellings of each text (its
                chains' k-best lists merged exactly; a text cut into windows has none: refused).
            spans: one list of pinned ``(start, end, type)`` per item (:meth:`tag`); a token
                list's offsets index its tokens joined by single spaces. The marginals and ``k``
                best labellings are then conditioned on them too.
            forbid: as :meth:`tag`, per item.

        Raises:
            ValueError: raw text for a model whose tokenizer is unknown; a single str (not an
                iterable of texts); an item of another type (naming its index and type); an
                invalid option; ``marginals``/``k`` for a head
                that is not a probability model or with ``group``; ``k`` for a text whose chain
                is longer than ``max_length``; an invalid ``group``, or one given to a model
                without a group decoder.
        """
        with collector_paused():  # no cycles are made; full collections would free nothing
            _refuse_one_text(items)
            if group is not False and group != "none":
                if spans is not None or forbid is not None:
                    raise ValueError(
                        f"spans=/forbid= with group={group!r}: the group decoder does not take "
                        "constraints; tag without group= to pin spans or forbid labels"
                    )
                _refuse_not_iterable(items)
                prepared = self._prepare(items)
                plan = self._options(split, max_length, overlap, marginals, k, grouped=True)
                for i, (_, toks) in enumerate(prepared):
                    if len(toks) > plan.max_length:
                        raise ValueError(
                            f"group={group!r}: a group decoder takes each text whole, but texts[{i}] "
                            f"has {len(toks)} tokens > max_length={plan.max_length}; raise "
                            "max_length, or cut the text into several texts yourself"
                        )
                groups = self._groups_of_prepared(group, prepared)
                return self._run_groups(prepared, groups or [])
            return list(
                self.iter_annotate(
                    items,
                    batch_size=batch_size,
                    progress=progress,
                    split=split,
                    max_length=max_length,
                    overlap=overlap,
                    marginals=marginals,
                    k=k,
                    spans=spans,
                    forbid=forbid,
                )
            )

    def iter_annotate(
        self,
        items: Iterable[str | Sequence[str]],
        *,
        batch_size: int | None = None,
        progress: bool | None = None,
        split: str | None = None,
        max_length: int = 512,
        overlap: int | None = None,
        marginals: bool = False,
        k: int | None = None,
        spans: Spans | None = None,
        forbid: Forbids | None = None,
    ) -> Iterator[Tagged]:
        """:meth:`annotate` as a generator: each item tagged, in input order, batch by batch.

        The items are read lazily: texts are taken until they make ``batch_size`` chains (or the
        input ends), those chains are decoded (sorted by length, ``batch_size`` at a time), and
        those texts are yielded; so memory stays that of one batch of texts whatever the length
        of the stream (a single text is always held whole).

        Raises:
            ValueError: as :meth:`annotate` (the options at once; an item's error when the stream
                reaches it).
        """
        _refuse_not_iterable(items)
        _refuse_one_text(items)
        plan = self._options(split, max_length, overlap, marginals, k, grouped=False)
        max_tokens = BATCH_TOKENS if batch_size is None else None
        batch_size = self.batch_size if batch_size is None else batch_size
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1 or None, got {batch_size!r}")
        total = len(items) if isinstance(items, Sized) else None
        for name, value in (("spans", spans), ("forbid", forbid)):
            if (
                total is not None
                and isinstance(value, Sized)
                and not isinstance(value, str)
                and not (name == "forbid" and all(isinstance(f, str) for f in value))
                and len(value) != total
            ):
                raise ValueError(
                    f"{name}= has {len(value)} entries for {total} texts: give one list per text"
                )
        per_text = None if spans is None and forbid is None else _PerText(spans, forbid)
        return self._stream(iter(items), plan, batch_size, progress, total, per_text, max_tokens)

    def _options(
        self,
        split: str | None,
        max_length: int,
        overlap: int | None,
        marginals: bool,
        k: int | None,
        *,
        grouped: bool,
    ) -> _Plan:
        """The chain options checked (:meth:`annotate`'s arguments)."""
        if split is None:
            split = "none" if grouped else "sentences"
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if grouped and split != "none":
            raise ValueError(
                f"split={split!r} with group=: a group decoder decodes each text whole; split "
                "the texts into sentences yourself (each then a text of the group), or drop group="
            )
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
            raise ValueError(f"max_length must be an int >= 1, got {max_length!r}")
        ov = max_length // 4 if overlap is None else overlap
        if isinstance(ov, bool) or not isinstance(ov, int) or not 0 <= ov <= max_length // 2:
            raise ValueError(
                f"overlap must be an int in [0, max_length // 2] = [0, {max_length // 2}], "
                f"got {overlap!r}"
            )
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ValueError(f"k must be an int >= 1, got {k!r}")
        if (marginals or k is not None) and not self.model.head.calibrated:
            raise ValueError(
                f"marginals= and k= give probabilities, but the {type(self.model.head).__name__} "
                "head is not a probability model"
            )
        if (marginals or k is not None) and grouped:
            raise ValueError(
                "marginals= and k= are the chain's, not the group decoder's: ask them without "
                "group= (or use trellis())"
            )
        return _Plan(split, max_length, ov, marginals, k)

    def _item(self, i: int, item: object) -> tuple[str, list[Token]]:
        """Item ``i`` as ``(text, tokens)``: a raw text tokenised, a token list joined by spaces."""
        if isinstance(item, str):
            if self.tokenizer is None:
                raise ValueError(
                    "this model's tokenizer is unknown (its checkpoint was written before "
                    "crfhead saved tokenizers): pass pre-tokenised input, lists of tokens"
                )
            return item, self.tokenizer.tokenize(item)
        if isinstance(item, list | tuple):
            return _joined(list(item), i)
        raise ValueError(
            f"texts[{i}] is {_kind(item)}: cannot tag it; give a str or a list of str"
            + (
                " (decode bytes first, e.g. line.decode('utf-8'))"
                if isinstance(item, bytes)
                else ""
            )
        )

    def _prepare(self, items: Iterable[str | Sequence[str]]) -> list[tuple[str, list[Token]]]:
        """Each item as ``(text, tokens)`` (:meth:`_item`)."""
        return [self._item(i, item) for i, item in enumerate(items)]

    def _constraint(
        self, i: int, text: str, toks: list[Token], pins: Any, bans: Any
    ) -> TextConstraint | None:
        """Item ``i``'s pins and forbids over its tokens (:func:`~crfhead.inference.pins.text_constraint`)."""
        return text_constraint(text, toks, self.labels, self.scheme, pins, bans, index=i)

    def _chains(
        self, i: int, item: object, plan: _Plan, pins: Any = None, bans: Any = None
    ) -> _Doc:
        """Item ``i`` tokenised and cut into chains (sentences), each into windows.

        With pins, the sentences a pinned span crosses stay one chain
        (:func:`~crfhead.inference.documents.join_ranges`).

        Raises:
            ValueError: invalid pins or forbids; a pinned span covering a whole window overlap.
        """
        text, toks = self._item(i, item)
        constraint = self._constraint(i, text, toks, pins, bans)
        whole = () if constraint is None else constraint.pinned
        if not toks:
            chains: list[range] = []
        elif plan.split == "sentences" and isinstance(item, str):
            chains = join_ranges(token_ranges(toks, sentence_ranges(text)), whole)
        else:
            chains = [range(0, len(toks))]
        wins = [
            [
                range(c.start + w.start, c.start + w.stop)
                for w in windows(len(c), plan.max_length, plan.overlap)
            ]
            for c in chains
        ]
        if plan.k is not None:
            for c, w in zip(chains, wins, strict=True):
                if len(w) > 1:
                    raise ValueError(
                        f"k={plan.k}: texts[{i}] has a chain of {len(c)} tokens > max_length="
                        f"{plan.max_length}, cut into windows, whose best labellings are not "
                        "exact; raise max_length"
                    )
        for c, w in zip(chains, wins, strict=True):
            if len(w) < 2 or not whole:
                continue  # no seam, or no pinned span a seam could cut
            local = [range(x.start - c.start, x.stop - c.start) for x in w]
            inside = [
                Span(s.label, s.start - c.start, s.end - c.start) for s in whole if s.start in c
            ]
            for seam in uncuttable_seams(local, inside):
                left, right = w[seam], w[seam + 1]
                over = [s for s in whole if s.start <= left.stop - 1 and s.end >= right.start]
                shown = ", ".join(
                    f"tokens {s.start}..{s.end} ({text[toks[s.start].start : toks[s.end].end]!r})"
                    for s in over
                )
                raise ValueError(
                    f"texts[{i}]: the pinned span(s) {shown} cover the whole overlap of two "
                    f"windows (tokens {right.start}..{left.stop - 1}), so no window holds them "
                    "whole; raise max_length or overlap"
                )
        return _Doc(i, text, toks, chains, wins, constraint)

    def _stream(
        self,
        items: Iterator[object],
        plan: _Plan,
        batch_size: int,
        progress: bool | None,
        total: int | None,
        per_text: _PerText | None = None,
        max_tokens: int | None = None,
    ) -> Iterator[Tagged]:
        bar = None
        if progress or (progress is None and total is not None and total >= PROGRESS_FROM):
            from tqdm.auto import tqdm  # type: ignore[import-untyped]

            bar = tqdm(total=total, desc="tagging", unit="text")
        buffer: list[_Doc] = []
        pieces = count = 0
        for i, item in enumerate(items):
            count = i + 1
            pins, bans = (None, None) if per_text is None else per_text.take(i)
            doc = self._chains(i, item, plan, pins, bans)
            buffer.append(doc)
            pieces += sum(len(w) for w in doc.windows)
            if pieces >= batch_size:
                yield from self._finish(buffer, plan, batch_size, max_tokens)
                if bar is not None:
                    bar.update(len(buffer))
                buffer, pieces = [], 0
        if buffer:
            yield from self._finish(buffer, plan, batch_size, max_tokens)
            if bar is not None:
                bar.update(len(buffer))
        if per_text is not None:
            per_text.finish(count)
        if bar is not None:
            bar.close()

    def _finish(
        self, docs: list[_Doc], plan: _Plan, batch_size: int, max_tokens: int | None = None
    ) -> list[Tagged]:
        """Decode every window of ``docs``, longest first, in batches, then merge.

        A batch holds ``batch_size`` windows, fewer where that many of its longest would pass
        ``max_tokens`` padded tokens.
        """
        pieces = [(d, w) for d, doc in enumerate(docs) for chain in doc.windows for w in chain]
        order = sorted(range(len(pieces)), key=lambda p: -len(pieces[p][1]))
        decoded: dict[tuple[int, int, int], _Decoded] = {}
        start = 0
        while start < len(order):
            size = batch_size
            if max_tokens is not None:  # the batch's first piece is its longest
                size = max(1, min(size, max_tokens // max(1, len(pieces[order[start]][1]))))
            rows = [pieces[p] for p in order[start : start + size]]
            start += size
            limits = [docs[d].constraint for d, _ in rows]
            with torch.inference_mode():
                _, out = self._decode(
                    [docs[d].tokens[w.start : w.stop] for d, w in rows],
                    [f"{docs[d].index}:{w.start}" for d, w in rows],
                    marginals=plan.marginals,
                    k=plan.k,
                    constraints=None
                    if all(c is None for c in limits)
                    else [
                        None if c is None else c.chain(w)
                        for c, (_, w) in zip(limits, rows, strict=True)
                    ],
                    names=[
                        f"texts[{docs[d].index}] (tokens {w.start}..{w.stop - 1})" for d, w in rows
                    ],
                )
            for (d, w), result in zip(rows, out, strict=True):
                decoded[(d, w.start, w.stop)] = result
        return [
            self._assemble(
                doc, [[decoded[(d, w.start, w.stop)] for w in ws] for ws in doc.windows], plan
            )
            for d, doc in enumerate(docs)
        ]

    def _assemble(self, doc: _Doc, results: list[list[_Decoded]], plan: _Plan) -> Tagged:
        """One text's chains (each from its windows) as one :class:`Tagged`."""
        scheme, labels = self.scheme, self.labels
        constrained = self.model.head.constrained
        tags: list[str] = []
        spans: list[Span] = []
        probs: list[float | None] = []
        gamma: list[list[float]] | None = [] if plan.marginals else None
        pinned = () if doc.constraint is None else doc.constraint.pinned
        for chain, wins, res in zip(doc.chains, doc.windows, results, strict=True):
            if len(res) == 1:  # one window: its decoding as it is
                (r,) = res
                one: Sequence[float | None] = r.probabilities or [None] * len(r.spans)
                merged = (r.tags, r.spans, one, r.marginals)
            else:
                local = [range(w.start - chain.start, w.stop - chain.start) for w in wins]
                with_probs = all(r.probabilities is not None for r in res)
                m = merge_windows(
                    local,
                    [r.tags for r in res],
                    [r.spans for r in res],
                    [r.probabilities or [] for r in res] if with_probs else None,
                    scheme,
                    marginals=[r.marginals or [] for r in res] if plan.marginals else None,
                    repair=constrained,
                    whole=[
                        Span(p.label, p.start - chain.start, p.end - chain.start)
                        for p in pinned
                        if p.start in chain
                    ],
                )
                merged = (m.tags, m.spans, m.probabilities, m.marginals)
            chain_tags, chain_spans, chain_probs, chain_gamma = merged
            tags.extend(chain_tags)
            spans.extend(
                chain_spans
                if chain.start == 0
                else (
                    Span(s.label, s.start + chain.start, s.end + chain.start) for s in chain_spans
                )
            )
            probs.extend(chain_probs)
            if gamma is not None and chain_gamma is not None:
                gamma.extend(chain_gamma)
        calibrated = self.model.head.calibrated and scheme is not None
        if pinned:
            # A pinned span is an entity of every labelling left: its probability under the
            # constraint is 1 by construction (the computed ratio is 1 to float64 rounding).
            known = set(pinned)
            probs = [1.0 if s in known else p for s, p in zip(spans, probs, strict=True)]
        _check_output(
            doc.text,
            tags,
            [p for p in probs if p is not None],
            scheme if constrained else None,
        )
        best = None
        if plan.k is not None:
            lists = [res[0].best or [] for res in results]
            best = [
                (math.exp(logp), [labels[t] for t in path])
                for logp, path in merge_kbest(lists, plan.k)
            ]
        ents = entities_of(doc.text, doc.tokens, spans, probs if calibrated else None)
        return Tagged(doc.text, doc.tokens, tags, ents, None, gamma, best)

    def groups_for(
        self, items: Sequence[str | Sequence[str]], group: GroupBy
    ) -> list[list[int]] | None:
        """The groups :meth:`annotate` decodes ``items`` in under ``group``, as index lists.

        Each item is in exactly one list (``None``: each decoded alone), so the lists can be passed
        back as ``annotate(items, group=lists)`` to decode those groups without grouping again. An
        item with no tokens stays in its list but is not decoded (its ``certified`` is ``None``).

        Raises:
            ValueError: as :meth:`annotate`.
        """
        return self._groups_of_prepared(group, self._prepare(items))

    def _groups_of_prepared(
        self, group: GroupBy, prepared: Sequence[tuple[str, list[Token]]]
    ) -> list[list[int]] | None:
        """:meth:`groups_of` for prepared items (tokens only, as the grouping sees them)."""
        return self.groups_of(group, [Sentence([t.text for t in toks]) for _, toks in prepared])

    def predict_sentences(
        self,
        sentences: Sequence[Sentence],
        *,
        batch_size: int | None = None,
        progress: bool | None = None,
        group: GroupBy = False,
        max_length: int = 512,
    ) -> list[Tagged]:
        """Tag already-tokenised :class:`~crfhead.data.sentence.Sentence` s (their gold tags are ignored).

        Each sentence is one chain (cut into windows beyond ``max_length``, as :meth:`annotate`).
        ``group="document"`` decodes each document (``doc_id``, e.g. CoNLL ``-DOCSTART-``) jointly.
        """
        groups = self.groups_of(group, sentences)
        if groups is not None:
            return self._run_groups([_joined(s.tokens) for s in sentences], groups)
        return self.annotate(
            [list(s.tokens) for s in sentences],
            batch_size=batch_size,
            progress=progress,
            max_length=max_length,
        )

    def groups_of(self, group: GroupBy, sentences: Sequence[Sentence]) -> list[list[int]] | None:
        """``group`` as lists of indices into ``sentences`` (each exactly once); ``None``: each alone.

        Raises:
            ValueError: an unknown mode, indices that do not cover each text exactly once, or a
                group asked of a model without a group decoder.
        """
        if group is False or group == "none":
            return None
        if self.model.decoder is None:
            raise ValueError(
                f"group={group!r}: this model has no group decoder (model.decoder), so each text "
                "is decoded alone; train a higher-order model to decode texts jointly"
            )
        n = len(sentences)
        if group is True or group == "all":
            return [list(range(n))] if n else []
        if group == "document":
            return DocumentGroups().groups(list(sentences))
        if group == "auto":
            if self.grouping is None:
                raise ValueError(
                    "group='auto': this model saved no grouping (trained without data.grouping, "
                    "or before groupings were saved); pass group=True, 'document' or a Grouping"
                )
            return self.grouping(list(sentences))  # cut to its max_size, as in training
        if isinstance(group, Grouping):
            return group(list(sentences))
        if isinstance(group, str):
            raise ValueError(
                f"group must be one of {GROUP_MODES}, True/False, a Grouping or index lists, "
                f"got {group!r}"
            )
        groups = [[int(i) for i in g] for g in group]
        if sorted(i for g in groups for i in g) != list(range(n)):
            raise ValueError(
                f"group must hold each of the {n} text indices exactly once, got {groups[:10]}"
            )
        return groups

    def trellis(
        self,
        text: str,
        k: int,
        *,
        spans: Sequence[Pin] | None = None,
        forbid: Sequence[Forbid] | None = None,
    ) -> Trellis:
        """One raw text tagged as one chain, with its node marginals and ``k`` best paths.

        The text is tagged as ``annotate([text], split="none")`` tags a text of at most
        ``max_length`` tokens: whole, neither split into sentences nor cut into windows. One
        encoder pass and one build of the potentials give all of it. The marginals and best
        paths are the head's chain's (the head's, also under a group decoder); for a text with no
        tokens they are empty. With ``spans``/``forbid`` (as :meth:`tag` for one text) all of it
        is conditioned on them, ``log_partition`` being ``log Z_allowed``.

        Raises:
            ValueError: as :meth:`annotate`; ``k`` < 1.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        (prepared,) = self._prepare([text])
        _, toks = prepared
        constraint = self._constraint(0, text, toks, spans, forbid)
        if not toks:
            return Trellis(Tagged(text, [], [], []), [], [], 0.0)
        limits = None if constraint is None else [constraint.chain(range(len(toks)))]
        with torch.inference_mode():
            pot, tagged = self._tag_batch([prepared], ["0"], constraints=limits, names=["texts[0]"])
        if constraint is not None and constraint.pinned:
            known = {(s.label, s.start, s.end + 1) for s in constraint.pinned}
            ents = [
                dataclasses.replace(e, probability=1.0)
                if (e.label, e.token_start, e.token_end) in known and e.probability is not None
                else e
                for e in tagged[0].entities
            ]
            tagged = [dataclasses.replace(tagged[0], entities=ents)]
        with torch.inference_mode():
            n = len(toks)
            gamma = engine.marginals(pot)[0, :n].float().cpu()
            scores, paths = engine.topk(pot, k)
            log_z = float(engine.log_partition(pot)[0])
        best = [
            (score, path[:n])
            for score, path in zip(scores[0].tolist(), paths[0].tolist(), strict=True)
        ]
        return Trellis(tagged[0], gamma.tolist(), best, log_z)

    def _run_groups(
        self, prepared: list[tuple[str, list[Token]]], groups: list[list[int]]
    ) -> list[Tagged]:
        """Each group of ``prepared`` decoded jointly, one batch per group (texts whole)."""
        out: list[Tagged | None] = [None] * len(prepared)
        for i, (text, toks) in enumerate(prepared):
            if not toks:
                out[i] = Tagged(text, [], [], [])
        for members in (g for g in ([i for i in g if prepared[i][1]] for g in groups) if g):
            with torch.inference_mode():
                _, tagged = self._tag_batch(
                    [prepared[i] for i in members], [str(i) for i in members], grouped=True
                )
            for i, record in zip(members, tagged, strict=True):
                out[i] = record
        return [t for t in out if t is not None]

    def _decode(
        self,
        token_lists: Sequence[list[Token]],
        ids: Sequence[str],
        *,
        grouped: bool = False,
        marginals: bool = False,
        k: int | None = None,
        constraints: Sequence[ChainConstraint | None] | None = None,
        names: Sequence[str] | None = None,
    ) -> tuple[ChainPotentials, list[_Decoded]]:
        """One batch of chains: one encoder pass, one build of the head's potentials.

        With ``grouped``, the batch is one group decoded jointly by the model's group decoder.
        With ``constraints`` (one per chain, ``None`` for a free one), the potentials are the
        head's chain restricted to them (:meth:`~crfhead.heads.base.ChainHead.chain`, and IOB1's
        banned edges as ``-inf`` per-position transitions), so everything read from them is
        conditioned; ``names`` say which text each chain is of, for the error.

        Raises:
            ValueError: a chain whose constraints leave no valid tag path (naming its text).

        Returns:
            The potentials, and each chain's tags, entities (chain-local), span probabilities
            where the head is calibrated, and what was asked of ``marginals`` and ``k``.
        """
        head, labels, scheme = self.model.head, self.labels, self.scheme
        sentences = [
            Sentence([t.text for t in toks], id=i) for toks, i in zip(token_lists, ids, strict=True)
        ]
        batch = self.collate(sentences)
        if grouped:
            batch = dataclasses.replace(batch, groups=[list(range(len(sentences)))])
        with self._autocast():
            emissions = self.model(batch)
        mask = batch.mask.to(emissions.device)
        if constraints is None:
            pot = head.potentials(emissions, mask)
        else:
            pot = self._restricted(emissions, mask, constraints, names)
        decoder = self.model.decoder
        before = None if decoder is None or not grouped else decoder.stats.get("certified", 0)
        tags = self.model.labels_from(pot, batch)
        certified = (
            None
            if decoder is None or before is None
            else decoder.stats.get("certified", 0) > before
        )
        spans: list[list[Span]] = [tags_to_spans(row, scheme) if scheme else [] for row in tags]
        probs: list[list[float]] | None = None
        if head.calibrated and scheme is not None:
            probs = span_probabilities_from(pot, spans, labels, scheme)
        gamma = engine.marginals(pot).float().cpu() if marginals else None
        best: list[list[tuple[float, list[int]]]] | None = None
        if k is not None:
            scores, paths = engine.topk(pot, k)
            log_z = engine.log_partition(pot).double().cpu()
            best = [
                [
                    (s - float(log_z[j]), p[: len(token_lists[j])])
                    for s, p in zip(scores[j].tolist(), paths[j].tolist(), strict=True)
                    if s != float("-inf")
                ]
                for j in range(len(token_lists))
            ]
        out = []
        for j, toks in enumerate(token_lists):
            n = len(toks)
            out.append(
                _Decoded(
                    tags[j],
                    spans[j],
                    None if probs is None else probs[j],
                    None if gamma is None else gamma[j, :n].tolist(),
                    None if best is None else best[j],
                    certified,
                )
            )
        return pot, out

    def _restricted(
        self,
        emissions: torch.Tensor,
        mask: torch.Tensor,
        constraints: Sequence[ChainConstraint | None],
        names: Sequence[str] | None,
    ) -> ChainPotentials:
        """The head's chain ``(B, T, K)`` conditioned on each row's constraint (see :meth:`_decode`).

        Raises:
            ValueError: a row left no valid tag path: the head's message, naming the texts.
        """
        head = self.model.head
        B, T, K = emissions.shape
        allowed = torch.ones(B, T, K, dtype=torch.bool)
        bans = [(b, t, f, i) for b, c in enumerate(constraints) if c for t, f, i in c.bans]
        for b, c in enumerate(constraints):
            if c is not None:
                allowed[b, : c.allowed.shape[0]] = c.allowed
        pot = head.chain(emissions, mask, allowed.to(emissions.device))
        if bans:
            # IOB1's pinned starts: per-position transitions with the banned edges at -inf.
            idx = torch.tensor(bans, device=emissions.device).T
            trans = pot.edge_transitions().expand(B, T - 1, K, K).clone()
            trans[idx[0], idx[1] - 1, idx[2], idx[3]] = IMPOSSIBLE
            pot = dataclasses.replace(pot, transitions=trans)
        dead = pot.nonempty & torch.isneginf(engine.log_partition(pot))
        if bool(dead.any()):
            # The head's wording (ChainHead's dead-row error), naming texts instead of batch rows.
            rows = dead.nonzero()[:, 0].tolist()
            which = ", ".join(names[r] if names else f"chain {r}" for r in rows[:5])
            raise ValueError(
                f"spans=/forbid= of {which}{' ...' if len(rows) > 5 else ''}: the allowed labels "
                "leave no valid tag path (every labelling inside the sets uses a forbidden start, "
                "transition or end of the scheme, or a -inf score)"
            )
        return pot

    def _tag_batch(
        self,
        prepared: Sequence[tuple[str, list[Token]]],
        ids: Sequence[str],
        *,
        grouped: bool = False,
        constraints: Sequence[ChainConstraint | None] | None = None,
        names: Sequence[str] | None = None,
    ) -> tuple[ChainPotentials, list[Tagged]]:
        """One batch of texts with tokens, each one chain (:meth:`_decode`), as :class:`Tagged` s.

        With ``grouped``, each text records whether its group was certified; ``constraints`` and
        ``names`` as :meth:`_decode`.
        """
        pot, decoded = self._decode(
            [toks for _, toks in prepared],
            ids,
            grouped=grouped,
            constraints=constraints,
            names=names,
        )
        scheme = self.scheme if self.model.head.constrained else None
        out = []
        for (text, toks), d in zip(prepared, decoded, strict=True):
            _check_output(text, d.tags, d.probabilities or [], scheme)
            ents = entities_of(text, toks, d.spans, d.probabilities)
            out.append(Tagged(text, toks, d.tags, ents, d.certified))
        return pot, out

    def _autocast(self) -> AbstractContextManager[object]:
        """Autocast to :attr:`dtype` around the encoder (a no-op in float32)."""
        if self.dtype in (torch.float32, torch.float64):
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    # ------------------------------------------------------------------------------ saving
    def save(self, folder: str | Path, *, overwrite: bool = False) -> Path:
        """Write the model as a folder :func:`load` reads without Lightning (see :mod:`~crfhead.inference.saved`).

        Raises:
            FileExistsError: ``folder`` exists and is not empty, and ``overwrite`` is False.
        """
        return save_folder(folder, self.model, self.config, self.vocabs, self.report, overwrite)

    def push_to_hub(
        self,
        repo_id: str,
        *,
        private: bool = False,
        commit_message: str = "Upload crfhead model",
        token: str | None = None,
        api: Any = None,
        card: Mapping[str, Any] | None = None,
    ) -> str:
        """Upload the model to the Hub model repository ``repo_id`` (``org/name``); the commit's URL.

        See :func:`crfhead.inference.hub_push.push_to_hub`; ``card`` takes ``license``,
        ``language``, ``datasets``, ``tags`` and ``name`` for the model card's metadata.
        """
        from crfhead.inference.hub_push import push_to_hub

        return push_to_hub(
            self,
            repo_id,
            private=private,
            commit_message=commit_message,
            token=token,
            api=api,
            card=card,
        )

    def __repr__(self) -> str:
        types = sorted(self.entity_types)
        return (
            f"TextTagger(head={type(self.model.head).__name__}, "
            f"encoder={type(self.model.encoder).__name__}, types={types}, "
            f"tokenizer={self.tokenizer!r}, device={self.device})"
        )


def _check_output(text: str, tags: list[str], probs: list[float], scheme: str | None) -> None:
    """Refuse output only broken weights produce: tags the scheme forbids, probabilities not in [0, 1].

    Raises:
        ValueError: naming the text and what is wrong.
    """
    if scheme is not None and not is_valid(tags, scheme):
        raise ValueError(
            f"the model decoded tags that break the {scheme} scheme for {text[:80]!r}: {tags[:20]}; "
            "its weights are corrupt"
        )
    bad = [p for p in probs if not 0.0 <= p <= 1.0 + 1e-6]  # NaN fails both comparisons
    if bad:
        raise ValueError(
            f"the model gave span probabilities {bad[:5]} (not in [0, 1]) for {text[:80]!r}: "
            "its weights are corrupt"
        )


def load(
    path: str | Path,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
) -> TextTagger:
    """Load a trained model: a ``train.py`` checkpoint (``.ckpt``) or a folder written by :meth:`TextTagger.save`.

    A folder needs no Lightning (a checkpoint is a Lightning file, so reading one imports it).
    Loading runs no code from the model: class paths resolve only to crfhead's own classes, to
    classes given to :func:`crfhead.register_component` or declared in an installed package's
    ``crfhead.components`` entry points; a checkpoint is read with ``weights_only=True``, and one
    holding other objects loads only through ``read_checkpoint(path, trust=True)`` or
    ``CRFHEAD_TRUST_CHECKPOINT=1`` (a pickle: it can then run code). ``dtype`` is the dtype the
    encoder runs in (:class:`TextTagger`). A path that does not exist and reads as a Hub model id
    (``org/name``, ``org/name@revision``) is read from the Hub (``revision``, ``cache_dir``:
    :func:`~crfhead.inference.saved.read_model`).

    Raises:
        FileNotFoundError: nothing at ``path``.
        ValueError: one line naming the file, for anything that is not a crfhead model.
    """
    files: ModelFiles = read_model(path, revision=revision, cache_dir=cache_dir)
    return TextTagger(files.build(), files.vocabs, files.config, device, files.report, dtype)
