"""A trained chain model decoded per group with its corpus's factors, and the factors' weight chosen on dev.

The chain model is trained first and the one non-local weight is chosen after it, on dev; Qian & Liu
(TACL 2014) train everything together with the averaged perceptron instead (the learned weights of
:class:`~crfhead.higher_order.decoder.FactorDecoder`). Each group gets the factors of
:func:`~crfhead.higher_order.corpus_setup.factors_for` and is decoded jointly by a
:class:`~crfhead.higher_order.decoder.FactorDecoder` with any method of
:data:`~crfhead.higher_order.decode.METHODS`.

* :func:`evaluate_split` -- span F1 (micro, macro; seqeval strict), the fraction of groups certified
  optimal, mean iterations and decode milliseconds per group, on one split at one weight;
* :func:`dev_grid` -- :func:`evaluate_split` at every weight of a grid; :func:`select_weight` -- the
  weight with the best dev F1 (micro, then macro; the first of the grid on a tie).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import torch

from crfhead.data.datamodule import collator_for
from crfhead.data.sentence import Sentence
from crfhead.evaluation.metrics import TaggingMetrics
from crfhead.higher_order.corpus_setup import factors_for, group_sentences
from crfhead.higher_order.decoder import FactorDecoder

if TYPE_CHECKING:
    from crfhead.training.module import TaggerModule

__all__ = ["dev_grid", "evaluate_split", "select_weight"]


def evaluate_split(
    model: TaggerModule,
    sentences: Sequence[Sentence],
    weight: float,
    method: str,
    corpus: str = "msm2013",
    *,
    threshold: int = 4,
    max_iterations: int = 300,
    groups: Sequence[Sequence[int]] | None = None,
) -> dict[str, float]:
    """Decode every group of ``sentences`` under the chains plus the corpus's factors at ``weight``.

    Args:
        model: the trained chain model (its tagger's head gives the potentials).
        sentences: the split, with gold tags.
        weight: the weight of every factor (0: the chains alone).
        method: a decoding method of :data:`~crfhead.higher_order.decode.METHODS`.
        corpus: ``msm2013`` or ``conll2003`` (:mod:`~crfhead.higher_order.corpus_setup`).
        threshold: the tweet-grouping threshold (``msm2013``).
        max_iterations: the dual decomposition's iteration cap.
        groups: the groups to decode (default: :func:`~crfhead.higher_order.corpus_setup.
            group_sentences` of the split); only their sentences are scored.

    Returns:
        ``f1``, ``macro_f1``, ``groups``, ``multi`` (groups with at least one factor), ``certified``
        (fraction of groups), ``iterations`` (mean per group) and ``ms_per_group`` (mean decode
        time, factors built included).

    Raises:
        ValueError: an unknown corpus or method, or a negative weight.
    """
    if weight < 0.0:
        raise ValueError(f"weight must be >= 0, got {weight}")
    tagger = model.tagger
    labels = tagger.labels
    decoder = FactorDecoder(
        labels.labels,
        labels.scheme,
        factors=factors_for(corpus),
        method=method,
        max_iterations=max_iterations,
        grid=(weight,),
    ).double()  # the scale in float64: the weight exactly as given
    decoder.use(weight)
    collate = collator_for(model.hparams["vocabs"], tagger.needs)
    metrics = TaggingMetrics(labels.scheme)
    seconds: list[float] = []
    if groups is None:
        groups = group_sentences(sentences, corpus, threshold)
    for group in groups:
        batch = collate([sentences[i] for i in group])
        batch = dataclasses.replace(batch, groups=[list(range(len(group)))])
        with torch.inference_mode():
            pot = tagger.head.potentials(tagger(batch), batch.mask)
        began = time.perf_counter()
        tags = decoder.decode(pot, batch)
        seconds.append(time.perf_counter() - began)
        pred = [[labels.labels[k] for k in row if k >= 0] for row in tags.tolist()]
        metrics.update([s.tags or [] for s in batch.sentences], pred)
    out = metrics.compute()
    stats, n = decoder.stats, len(groups)
    return {
        "f1": out["f1"],
        "macro_f1": out["macro_f1"],
        "groups": n,
        "multi": stats["with_patterns"],
        "certified": stats["certified"] / max(n, 1),
        "iterations": stats["iterations"] / n if n else 0.0,
        "ms_per_group": 1e3 * statistics.mean(seconds) if seconds else 0.0,
    }


def select_weight(dev: Mapping[float, Mapping[str, float]]) -> float:
    """The weight with the best dev ``f1``, ties broken by ``macro_f1``, then by grid order.

    Args:
        dev: weight → its :func:`evaluate_split` result on dev, in grid order.

    Raises:
        ValueError: an empty grid.
    """
    if not dev:
        raise ValueError("select_weight needs at least one weight's dev result")
    return max(dev, key=lambda w: (dev[w]["f1"], dev[w]["macro_f1"]))


def dev_grid(
    model: TaggerModule,
    sentences: Sequence[Sentence],
    weights: Sequence[float],
    corpus: str = "msm2013",
    *,
    method: str = "dd2slave",
    threshold: int = 4,
    max_iterations: int = 300,
    groups: Sequence[Sequence[int]] | None = None,
) -> dict[float, dict[str, float]]:
    """:func:`evaluate_split` of ``sentences`` at every weight of ``weights``, in grid order.

    Pass the result to :func:`select_weight`. The default method is 2-slave dual decomposition.
    """
    return {
        w: evaluate_split(
            model,
            sentences,
            w,
            method,
            corpus,
            threshold=threshold,
            max_iterations=max_iterations,
            groups=groups,
        )
        for w in weights
    }
