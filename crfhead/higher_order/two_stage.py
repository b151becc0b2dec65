"""The two-stage baseline of Krishnan & Manning (ACL 2006): a second CRF fed the first one's majority labels.

Krishnan & Manning, "An effective two-stage model for exploiting non-local dependencies in named
entity recognition": a chain CRF tags the text; a second chain CRF, with the same local features
plus features read off the first CRF's output over the document (and the corpus), tags it again.
The joint decoders of :mod:`crfhead.higher_order` must beat this cheap baseline.

* :func:`majority_features` -- the per-token feature strings, from the first stage's tags:

  ``tm=X`` (token-majority: the majority label the first stage gives the same token elsewhere in
  the group), ``em=X`` (entity-majority: the majority type of the first stage's entities with the
  same string elsewhere in the group), and the corpus-level versions ``ctm=X`` / ``cem=X`` over every
  sentence given (the whole split).
* :func:`jackknife_folds` -- the k-fold partition of the training groups: the first-stage tags of
  the training data come from models that did not see them (K&M used 10 folds), so the second stage
  does not learn to trust over-confident training predictions.
* :func:`with_features`, :class:`TwoStageCollator`, :func:`extend_vocabs` -- how the extra features
  reach the unchanged :class:`~crfhead.encoders.IndicatorEncoder`: the strings ride in
  ``Sentence.columns[COLUMN]`` (space-separated), the collator appends their ids (from the extended
  feature vocabulary: the first stage's, with the new strings after it) to the local features'.
* the fold models train with :func:`~crfhead.higher_order.fold_training.train_tagger` (a plain
  PyTorch loop) and tag with :func:`~crfhead.higher_order.fold_training.predict_tags`.

Labels in the features are entity *types* or ``O`` (the type of the first stage's entity covering
the token, read with :func:`crfhead.schemes.tags_to_spans`), not scheme tags, so ``Smith`` as the
``E-PER`` of ``John Smith`` and as an ``S-PER`` counts as one label.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import torch

from crfhead.data.batching import Batch, Collator
from crfhead.data.sentence import Sentence
from crfhead.data.vocab import Vocab
from crfhead.higher_order.fold_training import predict_tags, train_tagger
from crfhead.schemes import tags_to_spans

__all__ = [
    "COLUMN",
    "TwoStageCollator",
    "extend_vocabs",
    "jackknife_folds",
    "jackknife_tags",
    "majority",
    "majority_features",
    "with_features",
]

COLUMN = "two_stage"
"""The ``Sentence.columns`` key holding each token's extra feature strings, space-separated."""

OUTSIDE = "O"


def majority(counts: Counter[str]) -> str | None:
    """The label with the highest positive count; ``None`` if there is none.

    Ties are broken deterministically: an entity type beats ``O`` (the features exist to carry
    entity evidence across occurrences), then types in alphabetical order (``LOC`` before ``PER``).
    """
    candidates = [(-n, label == OUTSIDE, label) for label, n in counts.items() if n > 0]
    return min(candidates)[2] if candidates else None


def _token_labels(tags: Sequence[str], scheme: str) -> tuple[list[str], list[tuple[int, int, str]]]:
    """The type (or ``O``) of each token and the entities ``(start, end inclusive, type)``."""
    labels = [OUTSIDE] * len(tags)
    spans = [(s.start, s.end, s.label) for s in tags_to_spans(tags, scheme)]
    for start, end, typ in spans:
        for t in range(start, end + 1):
            labels[t] = typ
    return labels, spans


def _collection_features(
    tokens: Sequence[Sequence[str]],
    tags: Sequence[Sequence[str]],
    scheme: str,
    lowercase: bool,
) -> tuple[list[list[str | None]], list[list[str | None]]]:
    """Token-majority and entity-majority labels of every token of one collection of sentences.

    Returns ``(tm, em)``, each one entry per token (``None``: no feature).
    """
    keyed = [[w.lower() if lowercase else w for w in sentence] for sentence in tokens]
    parsed = [_token_labels(t, scheme) for t in tags]
    # Token-majority: the other occurrences' labels (this occurrence's own taken out).
    by_token: dict[str, Counter[str]] = {}
    for words, (labels, _) in zip(keyed, parsed, strict=True):
        for w, label in zip(words, labels, strict=True):
            by_token.setdefault(w, Counter())[label] += 1
    tm: list[list[str | None]] = []
    for words, (labels, _) in zip(keyed, parsed, strict=True):
        row: list[str | None] = []
        for w, label in zip(words, labels, strict=True):
            others = by_token[w].copy()
            others[label] -= 1
            row.append(majority(others))
        tm.append(row)
    # Entity-majority: the types of the first stage's entities with this string, this one taken out.
    by_entity: dict[tuple[str, ...], Counter[str]] = {}
    at: dict[tuple[int, int, int], str] = {}  # (sentence, start, length) -> the entity's type
    for b, (words, (_, spans)) in enumerate(zip(keyed, parsed, strict=True)):
        for start, end, typ in spans:
            by_entity.setdefault(tuple(words[start : end + 1]), Counter())[typ] += 1
            at[(b, start, end - start + 1)] = typ
    lengths = sorted({len(key) for key in by_entity}, reverse=True)
    em: list[list[str | None]] = [[None] * len(words) for words in keyed]
    for b, words in enumerate(keyed):
        for n in lengths:  # longest phrase first, then leftmost: the first match keeps the token
            for t in range(len(words) - n + 1):
                counts = by_entity.get(tuple(words[t : t + n]))
                if counts is None:
                    continue
                own = at.get((b, t, n))
                if own is not None:
                    counts = counts.copy()
                    counts[own] -= 1
                voted = majority(counts)
                if voted is None:
                    continue
                for i in range(t, t + n):
                    if em[b][i] is None:
                        em[b][i] = voted
    return tm, em


def majority_features(
    tokens: Sequence[Sequence[str]],
    tags: Sequence[Sequence[str]],
    groups: Sequence[Sequence[int]],
    scheme: str,
    corpus_level: bool = True,
    lowercase: bool = False,
) -> list[list[list[str]]]:
    """Krishnan & Manning's non-local features of every token, from the first stage's tags.

    For a token occurrence ``w`` of sentence ``b``:

    * ``tm=X``: ``X`` the majority label (entity type or ``O``) of the *other* occurrences of ``w``
      in ``b``'s group; none when ``w`` occurs once in the group (a token never votes for itself).
    * ``em=X``: for the longest phrase covering ``w`` (leftmost among equally long ones) whose string
      is the string of a first-stage entity elsewhere in the group, ``X`` the majority type of those
      other entities. It fires also where the first stage tagged the phrase ``O`` (the occurrences
      the first stage missed are the ones the feature is for); the entity itself does not vote.
      Only entities vote, so ``X`` is never ``O`` (the ``O`` evidence is in ``tm``).
    * ``ctm=X``, ``cem=X`` (with ``corpus_level``): the same over all the sentences given (the
      split), where again only the occurrence itself is left out.

    Majorities break ties by :func:`majority` (an entity type over ``O``, then alphabetically).
    Tokens are compared by exact string, or lowercased with ``lowercase``.

    Args:
        tokens: ``N`` sentences, as token lists.
        tags: the first stage's tags of each sentence (``scheme`` tags, one per token).
        groups: sentence indices of each group (a tweet group, a document); every sentence in
            exactly one group.
        scheme: the tagging scheme of ``tags``.
        corpus_level: add ``ctm``/``cem``.
        lowercase: compare tokens lowercased.

    Returns:
        ``N`` lists (sentences) of per-token lists of feature strings, in the order
        ``tm, em, ctm, cem`` (those that fire).

    Raises:
        ValueError: a sentence in no group or in two, an index out of range, or tags whose length
            differs from the sentence's.
    """
    if len(tokens) != len(tags):
        raise ValueError(f"{len(tokens)} sentences but {len(tags)} tag sequences")
    for b, (words, sentence_tags) in enumerate(zip(tokens, tags, strict=True)):
        if len(words) != len(sentence_tags):
            raise ValueError(f"sentence {b} has {len(words)} tokens but {len(sentence_tags)} tags")
    seen = [0] * len(tokens)
    for group in groups:
        for i in group:
            if not 0 <= i < len(tokens):
                raise ValueError(f"group index {i} out of range for {len(tokens)} sentences")
            seen[i] += 1
    bad = [i for i, n in enumerate(seen) if n != 1]
    if bad:
        raise ValueError(f"every sentence must be in exactly one group; not so for {bad[:5]}")
    out: list[list[list[str]]] = [[[] for _ in words] for words in tokens]
    for group in groups:
        tm, em = _collection_features(
            [tokens[i] for i in group], [tags[i] for i in group], scheme, lowercase
        )
        for j, i in enumerate(group):
            for t in range(len(tokens[i])):
                if tm[j][t] is not None:
                    out[i][t].append(f"tm={tm[j][t]}")
                if em[j][t] is not None:
                    out[i][t].append(f"em={em[j][t]}")
    if corpus_level:
        ctm, cem = _collection_features(tokens, tags, scheme, lowercase)
        for i, words in enumerate(tokens):
            for t in range(len(words)):
                if ctm[i][t] is not None:
                    out[i][t].append(f"ctm={ctm[i][t]}")
                if cem[i][t] is not None:
                    out[i][t].append(f"cem={cem[i][t]}")
    return out


def jackknife_folds(n: int, k: int, seed: int = 0) -> list[list[int]]:
    """A partition of ``range(n)`` into ``k`` folds of near-equal size (shuffled by ``seed``).

    Fold ``i`` holds the items at positions ``i, i + k, ...`` of a seeded permutation, each fold
    sorted; the sizes differ by at most one.

    Raises:
        ValueError: ``k < 2`` or ``k > n``.
    """
    if k < 2 or k > n:
        raise ValueError(f"need 2 <= k <= n for jackknifing, got k={k}, n={n}")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return [sorted(order[i::k]) for i in range(k)]


def with_features(
    sentences: Sequence[Sentence], features: Sequence[Sequence[Sequence[str]]]
) -> list[Sentence]:
    """Copies of ``sentences`` with each token's extra features in ``columns[COLUMN]``.

    Raises:
        ValueError: a feature string with whitespace, or counts that do not match.
    """
    if len(sentences) != len(features):
        raise ValueError(f"{len(sentences)} sentences but {len(features)} feature lists")
    out = []
    for s, feats in zip(sentences, features, strict=True):
        if len(feats) != len(s):
            raise ValueError(f"sentence {s.id or ''} has {len(s)} tokens but {len(feats)} lists")
        if any(f.split() != [f] for fs in feats for f in fs):
            raise ValueError("feature strings must be non-empty and free of whitespace")
        columns = {**s.columns, COLUMN: [" ".join(fs) for fs in feats]}
        out.append(dataclasses.replace(s, columns=columns))
    return out


def extend_vocabs(vocabs: dict[str, Any], sentences: Sequence[Sentence]) -> dict[str, Any]:
    """The first stage's vocabularies with the extra features of ``sentences`` added to ``features``.

    The local features keep their ids; the new strings follow, in order of first appearance (every
    extra feature seen in training is kept: there are at most ``4 × (types + 1)`` of them).
    """
    features = Vocab.from_dict(vocabs["features"])
    for s in sentences:
        for cell in s.columns.get(COLUMN, []):
            for f in cell.split():
                features.add(f)
    return {**vocabs, "features": features.to_dict()}


class TwoStageCollator:
    """A :class:`~crfhead.data.batching.Collator` whose feature ids include ``columns[COLUMN]``'s.

    The local features are built as usual (from ``vocabs["templates"]``); each token's extra feature
    ids (0 where unseen in training) are appended after them, so ``features`` is ``(B, T, F + E)``.

    Args:
        vocabs: the (extended, :func:`extend_vocabs`) vocabularies of the second-stage model.
    """

    def __init__(self, vocabs: dict[str, Any]) -> None:
        from crfhead.data.datamodule import collator_for

        self.base: Collator = collator_for(vocabs, frozenset({"features"}))
        assert self.base.features is not None
        self.vocab = self.base.features[1]

    def __call__(self, sentences: Sequence[Sentence]) -> Batch:
        """Pad and encode ``sentences`` with their extra features."""
        batch = self.base(sentences)
        assert batch.features is not None
        B, T, _ = batch.features.shape
        per = [
            [
                [self.vocab.stoi.get(f, 0) for f in cell.split()]
                for cell in s.columns.get(COLUMN, [])
            ]
            for s in batch.sentences
        ]
        E = max((len(ids) for sent in per for ids in sent), default=0)
        extra = torch.zeros(B, T, E, dtype=torch.long)
        for i, sent in enumerate(per):
            for j, ids in enumerate(sent):
                extra[i, j, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        return dataclasses.replace(batch, features=torch.cat([batch.features, extra], dim=2))


def jackknife_tags(
    hparams: dict[str, Any],
    vocabs: dict[str, Any],
    train: Sequence[Sentence],
    groups: Sequence[Sequence[int]],
    k: int,
    epochs: int,
    min_feature_count: int = 1,
    batch_size: int = 32,
    clip: float = 5.0,
    seed: int = 0,
) -> list[list[str]]:
    """First-stage tags of the training sentences by ``k``-fold jackknifing over ``groups``.

    The groups (documents, tweet groups) are split by :func:`jackknife_folds`; for each fold a
    first-stage model (``hparams``, local features only, their vocabulary rebuilt from the other
    folds' sentences with ``min_feature_count``) is trained for ``epochs`` epochs on the other folds
    and tags the fold's sentences. Whole groups stay in one fold, so a group's majority features are
    read off one model that saw none of the group.

    Returns:
        The tags of every training sentence, in order.
    """
    from crfhead.data.datamodule import collator_for
    from crfhead.data.features import FeatureTemplates

    templates = FeatureTemplates(vocabs["templates"])
    out: list[list[str] | None] = [None] * len(train)
    for f, fold in enumerate(jackknife_folds(len(groups), k, seed)):
        held = {i for g in fold for i in groups[g]}
        rest = [s for i, s in enumerate(train) if i not in held]
        fold_vocabs = {
            **vocabs,
            "features": templates.build_vocab(rest, min_count=min_feature_count).to_dict(),
        }
        collate = collator_for(fold_vocabs, frozenset({"features"}))
        model, _ = train_tagger(
            hparams,
            fold_vocabs,
            collate,
            rest,
            epochs,
            batch_size=batch_size,
            clip=clip,
            seed=seed + f,
        )
        ordered = sorted(held)
        for i, tags in zip(
            ordered, predict_tags(model, collate, [train[i] for i in ordered]), strict=True
        ):
            out[i] = tags
    missing = [i for i, t in enumerate(out) if t is None]
    if missing:
        raise ValueError(f"sentences {missing[:5]} are in no group")
    return [t for t in out if t is not None]
