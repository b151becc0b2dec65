"""What tagging raw text returns: entities with character offsets and exact probabilities.

An :class:`Entity` is a span of the decoded tags (read with :func:`crfhead.schemes.tags_to_spans`)
located in the raw text by its tokens' offsets (``text[start:end] == entity.text``), with its exact
marginal probability under the model (:func:`crfhead.evaluation.spans.span_probabilities`) where the
head is a calibrated probability model. A :class:`Tagged` is one text: its tokens, tags and entities;
a :class:`Trellis` adds what the chain says beyond its decoded path (node marginals, the ``k`` best
paths, ``log Z``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from crfhead.data.tokenize import Token
from crfhead.schemes import Span

__all__ = ["Entity", "Tagged", "Trellis", "entities_of"]


@dataclass(frozen=True)
class Entity:
    """An entity found in a text.

    Attributes:
        label: the entity type (``"ORG"``).
        start: character offset of its first character in the text.
        end: character offset just past its last character (``text[start:end] == self.text``).
        text: the entity's surface text.
        probability: the exact probability that the span is an entity of this type under the
            head's chain, ``p(z | x)`` of the sentence alone (``None`` for a head that is not a
            probability model, such as the perceptron). For a text decoded jointly with others by a
            higher-order model (:attr:`Tagged.certified` not ``None``) it is still the chain's: the
            span was chosen by the joint model, its probability is not the joint model's.
        token_start: index of its first token.
        token_end: index just past its last token.
    """

    label: str
    start: int
    end: int
    text: str
    probability: float | None
    token_start: int
    token_end: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        return {
            "label": self.label,
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "probability": self.probability,
            "token_start": self.token_start,
            "token_end": self.token_end,
        }


@dataclass(frozen=True)
class Tagged:
    """One tagged text: the text, its tokens (with offsets), one tag per token, the entities.

    Attributes:
        certified: for a text decoded jointly with its group by a higher-order model, whether the
            group's labelling was proven optimal (the decoder's dual bound met it); ``None`` for a
            text decoded alone.
        marginals: with ``annotate(..., marginals=True)``, the ``n x K`` node marginals
            ``p(z_t = k | x)`` of its ``n`` tokens, each from the chain (sentence or window) that
            decoded the token; ``None`` otherwise.
        best: with ``annotate(..., k=k)``, the ``k`` most probable labellings of the whole text,
            best first, as ``(probability, tags)``; a text of several chains (sentences) has the
            products of its chains' labellings, merged exactly. Fewer than ``k`` where fewer exist;
            ``None`` when not asked.
    """

    text: str
    tokens: list[Token]
    tags: list[str]
    entities: list[Entity]
    certified: bool | None = None
    marginals: list[list[float]] | None = None
    best: list[tuple[float, list[str]]] | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"text", "tokens", "tags", "entities"}`` (token texts, entity dicts), JSON-able.

        A text decoded with its group also has ``"certified"``; ``"marginals"`` and ``"best"``
        (as ``{"probability", "tags"}``) are there when asked for.
        """
        out: dict[str, Any] = {
            "text": self.text,
            "tokens": [t.text for t in self.tokens],
            "tags": self.tags,
            "entities": [e.to_dict() for e in self.entities],
        }
        if self.certified is not None:
            out["certified"] = self.certified
        if self.marginals is not None:
            out["marginals"] = self.marginals
        if self.best is not None:
            out["best"] = [{"probability": p, "tags": tags} for p, tags in self.best]
        return out


@dataclass(frozen=True)
class Trellis:
    """One text tagged, with its chain's node marginals and best paths (``TextTagger.trellis``).

    Attributes:
        tagged: the text tagged, as ``TextTagger.annotate`` tags it.
        marginals: ``n x K`` node marginals ``p(z_t = k | x)`` of its ``n`` tokens.
        best: the ``k`` best paths, best first, as ``(score, tag ids)``; where fewer than ``k``
            paths exist, the missing ones score ``-inf``.
        log_partition: ``log Z(x)``, so that a path's probability is ``exp(score - log_partition)``.
    """

    tagged: Tagged
    marginals: list[list[float]]
    best: list[tuple[float, list[int]]]
    log_partition: float


def entities_of(
    text: str,
    tokens: Sequence[Token],
    spans: Sequence[Span],
    probabilities: Sequence[float | None] | None,
) -> list[Entity]:
    """The entities of ``spans`` (inclusive token indices) located in ``text`` by the tokens' offsets.

    ``probabilities`` gives each span's probability (``None`` for all, or for one that has none).
    """
    out = []
    for i, span in enumerate(spans):
        start, end = tokens[span.start].start, tokens[span.end].end
        q = None if probabilities is None else probabilities[i]
        p = None if q is None else round(float(q), 6)
        out.append(Entity(span.label, start, end, text[start:end], p, span.start, span.end + 1))
    return out
