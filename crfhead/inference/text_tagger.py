"""Tag raw text with a trained model: :func:`load` and :class:`TextTagger` (what ``crfhead.load`` returns).

Modelled on Flair's ``SequenceTagger.load(...).predict(sentence)`` and HuggingFace's token-classification
``pipeline`` (entities with character offsets), with what only a structured model gives: each entity's
*exact* probability, the marginal probability that the span is an entity of that type under
``p(z | x)`` (:func:`crfhead.evaluation.spans.span_probabilities`), not a softmax of one token's score.

Raw text is split by the tokenizer the model was trained with (it travels in the vocabularies:
:mod:`crfhead.data.tokenize`), so the finance model sees lowercase letter runs and a CoNLL model
sees punctuation as separate tokens; pre-tokenised input (a list of tokens) skips it. Decoding is the
model's own (the head's decoder, or the group decoder of a higher-order model, each text its own
group), batched, under ``torch.inference_mode``, on any device.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import torch

from crfhead.data.batching import collator_for
from crfhead.data.sentence import Sentence
from crfhead.data.tokenize import Token, Tokenizer, tokenizer_from_dict
from crfhead.evaluation.spans import span_probabilities
from crfhead.inference.entities import Entity, Tagged, entities_of
from crfhead.inference.saved import ModelFiles, read_model, save_folder
from crfhead.schemes import tags_to_spans
from crfhead.model.tagger import Tagger

__all__ = ["PROGRESS_FROM", "TextTagger", "load"]

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
        self, texts: str, *, batch_size: int = ..., progress: bool | None = ...
    ) -> list[Entity]: ...

    @overload
    def tag(
        self, texts: Sequence[str], *, batch_size: int = ..., progress: bool | None = ...
    ) -> list[list[Entity]]: ...

    def tag(
        self,
        texts: str | Sequence[str],
        *,
        batch_size: int = 64,
        progress: bool | None = None,
    ) -> list[Entity] | list[list[Entity]]:
        """The entities of a raw text, or of each of a list of texts (one list per text).

        Raises:
            ValueError: the model's tokenizer is unknown, or ``texts`` is not text.
        """
        if isinstance(texts, str):
            return self.annotate([texts], batch_size=batch_size, progress=progress)[0].entities
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("tag() takes a str or a list of str; use annotate() for token lists")
        return [
            t.entities for t in self.annotate(list(texts), batch_size=batch_size, progress=progress)
        ]

    def annotate(
        self,
        items: Sequence[str | Sequence[str]],
        *,
        batch_size: int = 64,
        progress: bool | None = None,
    ) -> list[Tagged]:
        """Tag each item: a raw text (``str``, split by the model's tokenizer) or a list of tokens.

        A token list's character offsets index its tokens joined by single spaces.

        Raises:
            ValueError: raw text for a model whose tokenizer is unknown; an item of another type.
        """
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
        return self._run(prepared, batch_size, progress)

    def predict_sentences(
        self, sentences: Sequence[Sentence], *, batch_size: int = 64, progress: bool | None = None
    ) -> list[Tagged]:
        """Tag already-tokenised :class:`~crfhead.data.sentence.Sentence` s (their gold tags are ignored)."""
        return self._run([_joined(s.tokens) for s in sentences], batch_size, progress)

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

    def _run(
        self, prepared: list[tuple[str, list[Token]]], batch_size: int, progress: bool | None
    ) -> list[Tagged]:
        out: list[Tagged | None] = [None] * len(prepared)
        todo = [i for i, (_, toks) in enumerate(prepared) if toks]
        for i, (text, toks) in enumerate(prepared):
            if not toks:
                out[i] = Tagged(text, [], [], [])
        head, labels, scheme = self.model.head, self.labels, self.scheme
        for chunk in self._batches(len(todo), batch_size, progress):
            rows = [todo[j] for j in chunk]
            sentences = [Sentence([t.text for t in prepared[i][1]], id=str(i)) for i in rows]
            batch = self._collate(sentences).to(self.device)
            with torch.inference_mode():
                emissions = self.model(batch)
                tags = self.model.decode_labels(emissions, batch)
                spans = [tags_to_spans(row, scheme) if scheme else [] for row in tags]
                probs: list[list[float]] | None = None
                if head.calibrated and scheme is not None:
                    probs = span_probabilities(
                        head, emissions, batch.mask.to(emissions.device), spans, labels, scheme
                    )
            for j, i in enumerate(rows):
                text, toks = prepared[i]
                _check_output(
                    text, tags[j], probs[j] if probs else [], scheme if head.constrained else None
                )
                ents = entities_of(text, toks, spans[j], None if probs is None else probs[j])
                out[i] = Tagged(text, toks, tags[j], ents)
        return [t for t in out if t is not None]

    # ------------------------------------------------------------------------------ saving
    def save(self, folder: str | Path, *, overwrite: bool = False) -> Path:
        """Write the model as a folder :func:`load` reads without Lightning (see :mod:`~crfhead.inference.saved`).

        Raises:
            FileExistsError: ``folder`` exists and is not empty, and ``overwrite`` is False.
        """
        return save_folder(folder, self.model, self.config, self.vocabs, self.report, overwrite)

    def __repr__(self) -> str:
        types = sorted({lab.split("-", 1)[1] for lab in self.labels if "-" in lab})
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

    Raises:
        FileNotFoundError: nothing at ``path``.
        ValueError: one line naming the file, for anything that is not a crfhead model.
    """
    files: ModelFiles = read_model(path)
    return TextTagger(files.build(), files.vocabs, files.config, device, files.report)
