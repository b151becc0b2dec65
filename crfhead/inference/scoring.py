"""Scoring a trained model on labelled sentences: the report training prints, from a saved model.

The sentences are decoded batch by batch as the model decodes (its group decoder, or its head's
decoder), or group by group for a higher-order model given ``group=`` (the report then has the
fraction of ``certified`` groups and the mean ``decoder_iterations``, as training's test report),
under ``torch.inference_mode`` and scored by :class:`~crfhead.evaluation.metrics.TaggingMetrics`
(entity F1 by type, accuracy on all and on unseen words, and the log-loss of the gold tags). Gold
tags the model does not have still count (those gold entities are misses), but then no log-loss is
reported: it needs a score for every gold tag.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from crfhead.data.sentence import Sentence, gold_or_none
from crfhead.evaluation.metrics import TaggingMetrics
from crfhead.inference import text_tagger
from crfhead.inference.text_tagger import GroupBy, TextTagger

__all__ = ["Scores", "score_sentences"]


@dataclass(frozen=True)
class Scores:
    """What :func:`score_sentences` found.

    Attributes:
        report: the metrics (``TaggingMetrics.compute``'s keys: ``f1``, ``<TYPE>/f1``, ...).
        unknown_tags: the gold tags the model does not have, sorted (then no log-loss).
    """

    report: dict[str, Any]
    unknown_tags: list[str]


def score_sentences(
    tagger: TextTagger,
    sentences: Sequence[Sentence],
    *,
    batch_size: int | None = None,
    group: GroupBy = False,
) -> Scores:
    """Decode labelled ``sentences`` with ``tagger`` and score them against their tags.

    The tags are read in the model's scheme (convert them first, as
    :func:`crfhead.data.conll.read_conll`'s ``out_scheme`` does).

    Args:
        tagger: the model.
        sentences: labelled sentences.
        batch_size: sentences per batch (sentences decoded alone; ``None``: the model's own,
            :attr:`~crfhead.inference.text_tagger.TextTagger.batch_size`, in batches of at most
            :data:`~crfhead.inference.text_tagger.BATCH_TOKENS` padded tokens, as tagging's).
        group: which sentences a higher-order model decodes jointly
            (:meth:`~crfhead.inference.text_tagger.TextTagger.groups_of`; default: each alone).

    Raises:
        ValueError: an invalid ``group``, or one given to a model without a group decoder.
    """
    groups = tagger.groups_of(group, sentences)
    scheme = tagger.scheme or "BIO"
    known = set(tagger.labels)
    unknown = sorted({t for s in sentences for t in s.tags or () if t not in known})
    seen = tagger.vocabs.get("seen_words")
    metrics = TaggingMetrics(scheme, None if seen is None else set(seen))
    model = tagger.model.eval()
    decoder = model.decoder
    if decoder is not None:
        decoder.reset_stats()
    if groups is None:
        max_tokens = text_tagger.BATCH_TOKENS if batch_size is None else None
        size = tagger.batch_size if batch_size is None else batch_size
        chunks = _chunks([len(s.tokens) for s in sentences], size, max_tokens)
    else:
        chunks = [g for g in groups if g]
    for rows in chunks:
        chunk = [sentences[r] for r in rows]
        gold = [gold_or_none(s) or [] for s in chunk]  # partial positions None: not scored
        if unknown:
            chunk = [dataclasses.replace(s, tags=None) for s in chunk]
        batch = tagger.collate(chunk)
        if groups is not None:
            batch = dataclasses.replace(batch, groups=[list(range(len(chunk)))])
        with torch.inference_mode():
            if unknown:
                pred, nll = model.predict(batch), None
            else:
                pred, nll = model.decode_with_loss(batch)
        metrics.update(
            gold,
            pred,
            [s.tokens for s in chunk],
            log_loss=nll,
            num_tokens=None if nll is None else int(batch.mask.sum()),
        )
    report = metrics.compute()
    if groups is not None and decoder is not None and decoder.stats.get("groups", 0) > 0:
        report["certified"] = decoder.stats.get("certified", 0) / decoder.stats["groups"]
        report["decoder_iterations"] = decoder.stats.get("iterations", 0) / decoder.stats["groups"]
    return Scores(report, unknown)


def _chunks(lengths: Sequence[int], size: int, max_tokens: int | None) -> list[list[int]]:
    """Consecutive runs of sentence indices, in order.

    Each holds at most ``size`` sentences and, with ``max_tokens``, at most that many padded tokens
    (its sentences times its longest; a sentence longer than that is a run alone).
    """
    chunks: list[list[int]] = []
    run: list[int] = []
    longest = 0
    for i, n in enumerate(lengths):
        wide = max(longest, n)
        if run and (
            len(run) == size or (max_tokens is not None and (len(run) + 1) * wide > max_tokens)
        ):
            chunks.append(run)
            run, wide = [], n
        run.append(i)
        longest = wide
    if run:
        chunks.append(run)
    return chunks
