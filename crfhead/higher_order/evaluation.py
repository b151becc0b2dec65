"""A trained chain model decoded per group with its corpus's factors, and the factors' weight chosen on dev.

The chain model is trained first and the one non-local weight is chosen after it, on dev; Qian & Liu
(TACL 2014) train everything together with the averaged perceptron instead (the learned weights of
:class:`~crfhead.higher_order.decoder.FactorDecoder`). Each group gets the factors of
:func:`~crfhead.higher_order.corpus_setup.factors_for` and is decoded jointly by a
:class:`~crfhead.higher_order.decoder.FactorDecoder` with any method of
:data:`~crfhead.higher_order.decode.METHODS`.

* :func:`evaluate_split` -- span F1 (micro, macro; seqeval strict), the fraction of groups certified
  optimal, mean iterations and decode milliseconds per group, on one split at one weight;
* :func:`dev_grid` -- :func:`evaluate_split` at every weight of a grid, each group's decomposition
  built once and rescaled from weight to weight; :func:`select_weight` -- the weight with the best
  dev F1 (micro, then macro; the first of the grid on a tie).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import torch

from crfhead.data.datamodule import collator_for
from crfhead.data.sentence import Sentence
from crfhead.engine.potentials import ChainPotentials
from crfhead.evaluation.metrics import TaggingMetrics
from crfhead.higher_order.corpus_setup import factors_for, group_sentences
from crfhead.higher_order.decoder import FactorDecoder
from crfhead.higher_order.patterns import Pattern

if TYPE_CHECKING:
    from crfhead.training.module import TaggerModule

__all__ = ["dev_grid", "evaluate_split", "group_problems", "select_weight"]


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
    return _grid(model, sentences, [weight], method, corpus, threshold, max_iterations, groups)[
        weight
    ]


def _grid(
    model: TaggerModule,
    sentences: Sequence[Sentence],
    weights: Sequence[float],
    method: str,
    corpus: str,
    threshold: int,
    max_iterations: int,
    groups: Sequence[Sequence[int]] | None,
) -> dict[float, dict[str, float]]:
    """Every group decoded at every weight in turn, its potentials computed once.

    The decoder keeps the group's prepared decomposition from one weight to the next (rescaled,
    warm-started) and forgets it when the group is done.
    """
    if any(w < 0.0 for w in weights):
        raise ValueError(f"weight must be >= 0, got {min(weights)}")
    tagger = model.tagger
    labels = tagger.labels
    decoder = FactorDecoder(
        labels.labels,
        labels.scheme,
        factors=factors_for(corpus),
        method=method,
        max_iterations=max_iterations,
        grid=tuple(weights),
    ).double()  # the scale in float64: the weight exactly as given
    collate = collator_for(model.hparams["vocabs"], tagger.needs)
    metrics = {w: TaggingMetrics(labels.scheme) for w in weights}
    seconds: dict[float, list[float]] = {w: [] for w in weights}
    counts = {w: dict.fromkeys(("with_patterns", "certified", "iterations"), 0) for w in weights}
    if groups is None:
        groups = group_sentences(sentences, corpus, threshold)
    for group in groups:
        batch = collate([sentences[i] for i in group])
        batch = dataclasses.replace(batch, groups=[list(range(len(group)))])
        with torch.inference_mode():
            pot = tagger.head.potentials(tagger(batch), batch.mask)
        gold = [s.tags or [] for s in batch.sentences]
        for w in weights:
            decoder.use(w)
            before = dict(decoder.stats)
            began = time.perf_counter()
            tags = decoder.decode(pot, batch)
            seconds[w].append(time.perf_counter() - began)
            for name in counts[w]:
                counts[w][name] += decoder.stats[name] - before[name]
            pred = [[labels.labels[k] for k in row if k >= 0] for row in tags.tolist()]
            metrics[w].update(gold, pred)
        decoder.forget()  # every weight has seen this group
    n = len(groups)
    out: dict[float, dict[str, float]] = {}
    for w in weights:
        m = metrics[w].compute()
        out[w] = {
            "f1": m["f1"],
            "macro_f1": m["macro_f1"],
            "groups": n,
            "multi": counts[w]["with_patterns"],
            "certified": counts[w]["certified"] / max(n, 1),
            "iterations": counts[w]["iterations"] / n if n else 0.0,
            "ms_per_group": 1e3 * statistics.mean(seconds[w]) if seconds[w] else 0.0,
        }
    return out


def group_problems(
    model: TaggerModule,
    sentences: Sequence[Sentence],
    corpus: str = "msm2013",
    *,
    threshold: int = 4,
    groups: Sequence[Sequence[int]] | None = None,
) -> Iterator[tuple[list[int], ChainPotentials, list[Pattern]]]:
    """Each group's decoding problem at weight 1: ``(rows, potentials, patterns)``.

    The potentials are the model's on the group's sentences in float64, emissions ``(B, T, K)``;
    the patterns are the corpus's factors with unit weight (scale them for another weight), as
    :func:`evaluate_split` decodes them. For benchmarks and other decoders of the same groups.
    """
    tagger = model.tagger
    labels = tagger.labels
    decoder = FactorDecoder(labels.labels, labels.scheme, factors=factors_for(corpus), grid=(1.0,))
    collate = collator_for(model.hparams["vocabs"], tagger.needs)
    if groups is None:
        groups = group_sentences(sentences, corpus, threshold)
    for group in groups:
        batch = collate([sentences[i] for i in group])
        with torch.inference_mode():
            pot = tagger.head.potentials(tagger(batch), batch.mask)
        em, tr, st, en = (x.double().clone() for x in pot.chain[:4])
        pot64 = ChainPotentials(em, tr, st, en, pot.mask.clone())
        rows = list(range(len(group)))
        yield list(group), pot64, decoder.unit_patterns(batch, rows)


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
    Each group's potentials are computed once and its decomposition is built once for the whole
    grid (:class:`~crfhead.higher_order.decode.PreparedGroup`): a later weight only rescales it and
    starts from the previous weight's multipliers, so ``ms_per_group`` of the first weight with
    patterns includes the build and the later ones do not.
    """
    return _grid(model, sentences, weights, method, corpus, threshold, max_iterations, groups)
