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

Each batch runs the encoder once and builds the head's chain potentials once; the decoded path, the
span probabilities and (:meth:`TextTagger.trellis`) the node marginals and the ``k`` best paths are
all read from those potentials.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
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
from crfhead.inference.entities import Entity, Tagged, Trellis, entities_of
from crfhead.inference.saved import ModelFiles, read_model, save_folder
from crfhead.model.build import build_grouping
from crfhead.model.tagger import Tagger
from crfhead.schemes import Span, entity_types, tags_to_spans

__all__ = ["GROUP_MODES", "PROGRESS_FROM", "GroupBy", "TextTagger", "load"]

GROUP_MODES = ("none", "all", "document", "auto")
"""``group=`` by name: each text alone, all texts one group, one group per ``doc_id``, the grouping
the model was trained with."""

GroupBy: TypeAlias = bool | str | Grouping | Sequence[Sequence[int]]
"""What ``group=`` takes: ``False``/``"none"``, ``True``/``"all"``, ``"document"``, ``"auto"``, a
:class:`~crfhead.data.grouping.Grouping`, or the groups as lists of indices into the texts."""

PROGRESS_FROM = 1000
"""With ``progress=None``, a progress bar is shown when tagging at least this many texts."""


def _joined(tokens: Sequence[str]) -> tuple[str, list[Token]]:
    """Pre-tokenised input as a text: the tokens joined by single spaces, with their offsets."""
    out, pos = [], 0
    for w in tokens:
        if not isinstance(w, str):
            raise ValueError(
                f"a pre-tokenised text must be a list of str, got a {type(w).__name__}"
            )
        out.append(Token(w, pos, pos + len(w)))
        pos += len(w) + 1
    return " ".join(tokens), out


class TextTagger:
    """A trained model ready to tag text (build with :func:`load`).

    Args:
        model: the tagger (encoder → emissions → head).
        vocabs: its serialised vocabularies.
        config: its encoder / head / decoder specs (as saved).
        device: where to run (default: the CPU).

    Attributes:
        model: the :class:`~crfhead.model.tagger.Tagger`, in eval mode.
        vocabs: the vocabularies.
        tokenizer: the model's tokenizer, or ``None`` when its checkpoint predates tokenizers being
            saved (then raw text is refused; pre-tokenised input works).
        grouping: the grouping the model was trained with (``group="auto"``), ``None`` if none.
    """

    def __init__(
        self,
        model: Tagger,
        vocabs: dict[str, Any],
        config: dict[str, Any],
        device: str | torch.device | None = None,
        report: dict[str, Any] | None = None,
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
        self.to(device or "cpu")

    @property
    def labels(self) -> list[str]:
        """The label vocabulary."""
        return list(self.model.labels.labels)

    @property
    def scheme(self) -> str | None:
        """The tagging scheme of the labels."""
        return self.model.labels.scheme

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
    def tag(  # type: ignore[overload-overlap]  # a str is a Sequence[str]: this one comes first
        self,
        texts: str,
        *,
        batch_size: int = ...,
        progress: bool | None = ...,
        group: GroupBy = ...,
    ) -> list[Entity]: ...

    @overload
    def tag(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = ...,
        progress: bool | None = ...,
        group: GroupBy = ...,
    ) -> list[list[Entity]]: ...

    def tag(
        self,
        texts: str | Sequence[str],
        *,
        batch_size: int = 64,
        progress: bool | None = None,
        group: GroupBy = False,
    ) -> list[Entity] | list[list[Entity]]:
        """The entities of a raw text, or of each of a list of texts (one list per text).

        Args:
            texts: a raw text, or a list of them.
            batch_size: texts per batch (texts decoded alone).
            progress: show a progress bar (``None``: from :data:`PROGRESS_FROM` texts).
            group: which texts a higher-order model decodes jointly (:data:`GroupBy`; default:
                each alone). :meth:`annotate` also says whether each group was certified.

        Raises:
            ValueError: the model's tokenizer is unknown, ``texts`` is not text, or ``group`` is
                invalid or given to a model without a group decoder.
        """
        if isinstance(texts, str):
            return self.annotate([texts], batch_size=batch_size, progress=progress, group=group)[
                0
            ].entities
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("tag() takes a str or a list of str; use annotate() for token lists")
        tagged = self.annotate(list(texts), batch_size=batch_size, progress=progress, group=group)
        return [t.entities for t in tagged]

    def annotate(
        self,
        items: Sequence[str | Sequence[str]],
        *,
        batch_size: int = 64,
        progress: bool | None = None,
        group: GroupBy = False,
    ) -> list[Tagged]:
        """Tag each item: a raw text (``str``, split by the model's tokenizer) or a list of tokens.

        A token list's character offsets index its tokens joined by single spaces. With ``group``
        (:meth:`tag`), each text of a group decoded jointly has :attr:`Tagged.certified` set.

        Raises:
            ValueError: raw text for a model whose tokenizer is unknown; an item of another type;
                an invalid ``group``, or one given to a model without a group decoder.
        """
        prepared = self._prepare(items)
        return self._run(prepared, batch_size, progress, self._groups_of_prepared(group, prepared))

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
        batch_size: int = 64,
        progress: bool | None = None,
        group: GroupBy = False,
    ) -> list[Tagged]:
        """Tag already-tokenised :class:`~crfhead.data.sentence.Sentence` s (their gold tags are ignored).

        ``group="document"`` decodes each document (``doc_id``, e.g. CoNLL ``-DOCSTART-``) jointly.
        """
        groups = self.groups_of(group, sentences)
        return self._run([_joined(s.tokens) for s in sentences], batch_size, progress, groups)

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

    def _batches(self, n: int, batch_size: int, progress: bool | None) -> Iterator[range]:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        chunks = [range(i, min(i + batch_size, n)) for i in range(0, n, batch_size)]
        if progress or (progress is None and n >= PROGRESS_FROM):
            from tqdm.auto import tqdm  # type: ignore[import-untyped]

            bar = tqdm(total=n, desc="tagging", unit="text")
            for chunk in chunks:
                yield chunk
                bar.update(len(chunk))
            bar.close()
        else:
            yield from chunks

    def trellis(self, text: str, k: int) -> Trellis:
        """One raw text tagged as :meth:`annotate` does, with its node marginals and ``k`` best paths.

        One encoder pass and one build of the potentials give all of it. The marginals and best
        paths are the head's chain's (the head's, also under a group decoder); for a text with no
        tokens they are empty.

        Raises:
            ValueError: as :meth:`annotate`; ``k`` < 1.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        (prepared,) = self._prepare([text])
        _, toks = prepared
        if not toks:
            return Trellis(Tagged(text, [], [], []), [], [], 0.0)
        with torch.inference_mode():
            pot, tagged = self._tag_batch([prepared], ["0"])
            n = len(toks)
            gamma = engine.marginals(pot)[0, :n].float().cpu()
            scores, paths = engine.topk(pot, k)
            log_z = float(engine.log_partition(pot)[0])
        best = [
            (score, path[:n])
            for score, path in zip(scores[0].tolist(), paths[0].tolist(), strict=True)
        ]
        return Trellis(tagged[0], gamma.tolist(), best, log_z)

    def _prepare(self, items: Sequence[str | Sequence[str]]) -> list[tuple[str, list[Token]]]:
        """Each item as ``(text, tokens)``: a raw text tokenised, a token list joined by spaces."""
        prepared: list[tuple[str, list[Token]]] = []
        for item in items:
            if isinstance(item, str):
                if self.tokenizer is None:
                    raise ValueError(
                        "this model's tokenizer is unknown (its checkpoint was written before "
                        "crfhead saved tokenizers): pass pre-tokenised input, lists of tokens"
                    )
                prepared.append((item, self.tokenizer.tokenize(item)))
            elif isinstance(item, Sequence):
                prepared.append(_joined(list(item)))
            else:
                raise ValueError(f"cannot tag a {type(item).__name__}: give a str or a list of str")
        return prepared

    def _run(
        self,
        prepared: list[tuple[str, list[Token]]],
        batch_size: int,
        progress: bool | None,
        groups: list[list[int]] | None = None,
    ) -> list[Tagged]:
        out: list[Tagged | None] = [None] * len(prepared)
        for i, (text, toks) in enumerate(prepared):
            if not toks:
                out[i] = Tagged(text, [], [], [])
        if groups is not None:  # one batch per group, decoded jointly
            for members in (g for g in ([i for i in g if prepared[i][1]] for g in groups) if g):
                with torch.inference_mode():
                    _, tagged = self._tag_batch(
                        [prepared[i] for i in members], [str(i) for i in members], grouped=True
                    )
                for i, record in zip(members, tagged, strict=True):
                    out[i] = record
            return [t for t in out if t is not None]
        todo = [i for i, (_, toks) in enumerate(prepared) if toks]
        for chunk in self._batches(len(todo), batch_size, progress):
            rows = [todo[j] for j in chunk]
            with torch.inference_mode():
                _, tagged = self._tag_batch([prepared[i] for i in rows], [str(i) for i in rows])
            for i, record in zip(rows, tagged, strict=True):
                out[i] = record
        return [t for t in out if t is not None]

    def _tag_batch(
        self,
        prepared: Sequence[tuple[str, list[Token]]],
        ids: Sequence[str],
        *,
        grouped: bool = False,
    ) -> tuple[ChainPotentials, list[Tagged]]:
        """One batch of texts with tokens: one encoder pass, one build of the head's potentials.

        With ``grouped``, the batch is one group decoded jointly by the model's group decoder,
        and each text records whether the group was certified.

        Returns:
            The potentials, and each text tagged (entities with their span
            probabilities where the head is calibrated), its output checked.
        """
        head, labels, scheme = self.model.head, self.labels, self.scheme
        sentences = [
            Sentence([t.text for t in toks], id=i)
            for (_, toks), i in zip(prepared, ids, strict=True)
        ]
        batch = self.collate(sentences)
        if grouped:
            batch = dataclasses.replace(batch, groups=[list(range(len(sentences)))])
        emissions = self.model(batch)
        pot = head.potentials(emissions, batch.mask.to(emissions.device))
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
        out = []
        for j, (text, toks) in enumerate(prepared):
            _check_output(
                text, tags[j], probs[j] if probs else [], scheme if head.constrained else None
            )
            ents = entities_of(text, toks, spans[j], None if probs is None else probs[j])
            out.append(Tagged(text, toks, tags[j], ents, certified))
        return pot, out

    # ------------------------------------------------------------------------------ saving
    def save(self, folder: str | Path, *, overwrite: bool = False) -> Path:
        """Write the model as a folder :func:`load` reads without Lightning (see :mod:`~crfhead.inference.saved`).

        Raises:
            FileExistsError: ``folder`` exists and is not empty, and ``overwrite`` is False.
        """
        return save_folder(folder, self.model, self.config, self.vocabs, self.report, overwrite)

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
    from crfhead.schemes import repair_tags

    name = text[:80]
    if scheme is not None and repair_tags(tags, scheme)[1]:
        raise ValueError(
            f"the model decoded tags that break the {scheme} scheme for {name!r}: {tags[:20]}; "
            "its weights are corrupt"
        )
    bad = [p for p in probs if not 0.0 <= p <= 1.0 + 1e-6]  # NaN fails both comparisons
    if bad:
        raise ValueError(
            f"the model gave span probabilities {bad[:5]} (not in [0, 1]) for {name!r}: "
            "its weights are corrupt"
        )


def load(path: str | Path, *, device: str | torch.device | None = None) -> TextTagger:
    """Load a trained model: a ``train.py`` checkpoint (``.ckpt``) or a folder written by :meth:`TextTagger.save`.

    A folder needs no Lightning (a checkpoint is a Lightning file, so reading one imports it).
    Loading runs no code from the model: class paths resolve only to crfhead's own classes, to
    classes given to :func:`crfhead.register_component` or declared in an installed package's
    ``crfhead.components`` entry points; a checkpoint is read with ``weights_only=True``, and one
    holding other objects loads only through ``read_checkpoint(path, trust=True)`` or
    ``CRFHEAD_TRUST_CHECKPOINT=1`` (a pickle: it can then run code).

    Raises:
        FileNotFoundError: nothing at ``path``.
        ValueError: one line naming the file, for anything that is not a crfhead model.
    """
    files: ModelFiles = read_model(path)
    return TextTagger(files.build(), files.vocabs, files.config, device, files.report)
