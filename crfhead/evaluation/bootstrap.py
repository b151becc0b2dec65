"""Paired bootstrap of the difference in span F1 between two systems on the same sentences.

Koehn (2004), "Statistical significance tests for machine translation evaluation"; Berg-Kirkpatrick,
Burkett & Klein (2012), "An empirical investigation of statistical significance in NLP". The units
(sentences, or whole groups of sentences when the systems decode groups jointly, so that a unit is
what a system's decisions depend on) are resampled with replacement, both systems on the same draw;
micro and macro span F1 are recomputed from the drawn units' counts with
:class:`~crfhead.evaluation.metrics.TaggingMetrics`' arithmetic (seqeval's strict spans, gold
repaired, predictions as they are). The interval is the percentile interval of ``F1(b) - F1(a)``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from crfhead.evaluation.metrics import TaggingMetrics

__all__ = ["BootstrapResult", "paired_bootstrap", "unit_counts"]


@dataclass(frozen=True)
class BootstrapResult:
    """``F1(b) - F1(a)`` on the data and its percentile interval, micro and macro.

    Attributes:
        micro: the difference in micro span F1 on the data itself.
        micro_interval: ``(low, high)`` at :attr:`level`.
        macro: the difference in macro span F1 (each system's unweighted mean over the entity
            types in its gold or predictions, as :meth:`TaggingMetrics.compute`).
        macro_interval: ``(low, high)``.
        level: the interval's coverage (0.95).
        samples: the number of bootstrap draws.
        units: the number of units resampled.
    """

    micro: float
    micro_interval: tuple[float, float]
    macro: float
    macro_interval: tuple[float, float]
    level: float
    samples: int
    units: int


def unit_counts(
    gold: Sequence[Sequence[str]],
    pred: Sequence[Sequence[str]],
    scheme: str,
    units: Sequence[Sequence[int]],
    types: Sequence[str],
) -> np.ndarray:
    """Span counts per unit and type: ``(U, len(types), 3)`` int64 of ``[true positives, predicted, gold]``.

    Args:
        gold: each sentence's gold labels.
        pred: each sentence's predicted labels.
        scheme: the labels' tagging scheme.
        units: each unit's sentence indices.
        types: the entity types to count (a type outside them raises).

    Raises:
        ValueError: as :meth:`TaggingMetrics.update`; a predicted or gold type not in ``types``.
    """
    index = {t: j for j, t in enumerate(types)}
    out = np.zeros((len(units), len(types), 3), dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gold repaired: said once for the whole data, not per unit
        for u, rows in enumerate(units):
            metrics = TaggingMetrics(scheme)
            metrics.update([gold[i] for i in rows], [pred[i] for i in rows])
            _count(metrics, index, out[u])
    return out


def _count(metrics: TaggingMetrics, index: dict[str, int], out: np.ndarray) -> None:
    """Write a unit's ``[tp, predicted, gold]`` per type into ``out`` ``(types, 3)``."""
    for typ, row in metrics.state_dict()["entities"].items():
        if typ not in index:
            raise ValueError(f"entity type {typ!r} is not among the types {list(index)}")
        out[index[typ]] = row


def _f1_of(tp: np.ndarray, pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Element-wise F1 of true positives, predicted and gold counts; 0 where a ratio is 0 / 0."""
    p = np.where(pred > 0, tp / np.maximum(pred, 1), 0.0)
    r = np.where(gold > 0, tp / np.maximum(gold, 1), 0.0)
    total = p + r
    return np.where(total > 0, 2 * p * r / np.where(total > 0, total, 1.0), 0.0)


def _f1(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Micro and macro F1 of summed counts ``(..., types, 3)``, with seqeval's zero-division rule.

    The macro mean is over the types seen in the counts' gold or predictions, as
    :meth:`TaggingMetrics.compute` takes it.
    """
    tp, pred, gold = counts[..., 0], counts[..., 1], counts[..., 2]
    f = _f1_of(tp, pred, gold)
    micro = _f1_of(tp.sum(-1), pred.sum(-1), gold.sum(-1))
    seen = (pred + gold) > 0
    macro = np.where(seen, f, 0.0).sum(-1) / np.maximum(seen.sum(-1), 1)
    return micro, macro


def paired_bootstrap(
    gold: Sequence[Sequence[str]],
    pred_a: Sequence[Sequence[str]],
    pred_b: Sequence[Sequence[str]],
    scheme: str,
    *,
    units: Sequence[Sequence[int]] | None = None,
    samples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> BootstrapResult:
    """The paired bootstrap interval of ``F1(b) - F1(a)``, micro and macro span F1.

    Args:
        gold: each sentence's gold labels.
        pred_a: system a's labels (the baseline), sentence for sentence.
        pred_b: system b's labels.
        scheme: the labels' tagging scheme.
        units: the resampled units as lists of sentence indices (whole groups, when a system
            decodes groups jointly); ``None``: each sentence its own unit.
        samples: bootstrap draws.
        level: the interval's coverage.
        seed: the draws' seed (``numpy.random.default_rng``).

    Raises:
        ValueError: different numbers of sentences; units that do not cover each sentence exactly
            once; ``samples < 1`` or ``level`` not in (0, 1).
    """
    n = len(gold)
    if len(pred_a) != n or len(pred_b) != n:
        raise ValueError(f"{n} gold sentences but {len(pred_a)} and {len(pred_b)} predicted")
    if samples < 1 or not 0.0 < level < 1.0:
        raise ValueError(f"need samples >= 1 and 0 < level < 1, got {samples} and {level}")
    rows = [[i] for i in range(n)] if units is None else [list(u) for u in units]
    if sorted(i for u in rows for i in u) != list(range(n)):
        raise ValueError(f"units must hold each of the {n} sentence indices exactly once")
    everything = TaggingMetrics(scheme)
    for pred in (pred_a, pred_b):
        everything.update(gold, pred)
    types = sorted(everything.state_dict()["entities"])
    a = unit_counts(gold, pred_a, scheme, rows, types)  # (U, types, 3)
    b = unit_counts(gold, pred_b, scheme, rows, types)
    draws = np.random.default_rng(seed).integers(0, len(rows), size=(samples, len(rows)))
    deltas = []
    for counts_a, counts_b in ((a.sum(0), b.sum(0)), (a[draws].sum(1), b[draws].sum(1))):
        micro_a, macro_a = _f1(counts_a)
        micro_b, macro_b = _f1(counts_b)
        deltas.append((micro_b - micro_a, macro_b - macro_a))
    (micro, macro), (micro_draws, macro_draws) = deltas
    tail = (1.0 - level) / 2.0 * 100.0
    lo_hi = (tail, 100.0 - tail)
    return BootstrapResult(
        float(micro),
        tuple(float(x) for x in np.percentile(micro_draws, lo_hi)),  # type: ignore[arg-type]
        float(macro),
        tuple(float(x) for x in np.percentile(macro_draws, lo_hi)),  # type: ignore[arg-type]
        level,
        samples,
        len(rows),
    )
