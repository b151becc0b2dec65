"""A plain PyTorch training loop for the models of an experiment's folds, and batched tagging.

Cross-validation (:mod:`~crfhead.higher_order.cross_validation`) and the two-stage baseline
(:mod:`~crfhead.higher_order.two_stage`) train many small models inside one process, so they use
this loop rather than a Lightning run per fold; it does what the configs' Lightning run does:

* the :class:`~crfhead.training.module.TaggerModule`'s own optimiser (no warm-up), gradients clipped
  to norm ``clip`` (``gradient_clip_val``), a seeded shuffle per epoch;
* batches of ``batch_size`` sentences, or of ``batch_size`` whole *groups* when ``groups`` is given
  (``Batch.groups`` set, so a higher-order decoder decodes each group jointly, as ``data.grouping``
  does);
* the loss of :meth:`~crfhead.model.tagger.Tagger.fit_step` (the head's, or the group decoder's
  for learned factor weights);
* with ``average``, the equal-weight average of the parameters after every update (Collins'
  averaged perceptron, :class:`~crfhead.training.callbacks.WeightAveraging`), which dev and the
  returned model use;
* with ``dev``, the weights of the epoch with the best dev F1 (micro) kept (``ModelCheckpoint`` on
  ``val/f1``).
"""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import Any

import torch

from crfhead.data.batching import Batch
from crfhead.data.sentence import Sentence
from crfhead.evaluation.metrics import TaggingMetrics
from crfhead.training.module import TaggerModule

__all__ = ["predict_tags", "train_tagger"]

Collate = Callable[[list[Sentence]], Batch]

_KEPT = (
    "encoder",
    "head",
    "constrained",
    "lr",
    "backbone_lr",
    "weight_decay",
    "optimizer",
    "decoder",
)
"""The :class:`TaggerModule` arguments a fold model takes from ``hparams``."""


def predict_tags(
    model: TaggerModule,
    collate: Collate,
    sentences: Sequence[Sentence],
    batch_size: int = 128,
) -> list[list[str]]:
    """The model's head (Viterbi) tags of every sentence, in order; its group decoder is not used."""
    model.eval()
    out: list[list[str]] = []
    with torch.inference_mode():
        for i in range(0, len(sentences), batch_size):
            out.extend(model.tagger.predict(collate(list(sentences[i : i + batch_size]))))
    return out


def _f1(model: TaggerModule, collate: Collate, sentences: Sequence[Sentence]) -> float:
    metrics = TaggingMetrics(model.tagger.labels.scheme)
    metrics.update([s.tags or [] for s in sentences], predict_tags(model, collate, sentences))
    return float(metrics.compute()["f1"])


def _batches(
    n: int,
    groups: Sequence[Sequence[int]] | None,
    batch_size: int,
    generator: random.Random,
) -> list[list[list[int]]]:
    """One epoch's batches, each a list of groups of sentence indices (a sentence alone: ``[i]``)."""
    units = [[i] for i in range(n)] if groups is None else [list(g) for g in groups]
    generator.shuffle(units)
    return [units[i : i + batch_size] for i in range(0, len(units), batch_size)]


def train_tagger(
    hparams: dict[str, Any],
    vocabs: dict[str, Any],
    collate: Collate,
    train: Sequence[Sentence],
    epochs: int,
    dev: Sequence[Sentence] = (),
    batch_size: int = 32,
    clip: float = 5.0,
    seed: int = 0,
    *,
    groups: Sequence[Sequence[int]] | None = None,
    average: bool = False,
    dev_f1: Callable[[TaggerModule], float] | None = None,
) -> tuple[TaggerModule, list[float]]:
    """Train a fresh :class:`TaggerModule` (``hparams``, ``vocabs``) on ``train``.

    Args:
        hparams: the module's arguments (``encoder``, ``head``, ``lr``, ``optimizer``, ``decoder``...;
            others are ignored).
        vocabs: the vocabularies, built from ``train``.
        collate: sentences → :class:`~crfhead.data.batching.Batch`.
        train: the training sentences, with tags.
        epochs: passes over ``train`` (``>= 1``).
        dev: sentences whose F1 picks the best epoch (none: the last epoch's weights).
        batch_size: sentences per batch, or groups per batch with ``groups``.
        clip: the gradient norm clip (``inf``: none).
        seed: the initialisation's and the shuffle's seed.
        groups: batch whole groups of ``train`` (lists of indices covering it exactly once).
        average: evaluate and return the running average of the parameters.
        dev_f1: how an epoch's model is scored on dev (default: the head's Viterbi tags of ``dev``,
            micro span F1); a higher-order experiment passes its joint decoding.

    Returns:
        The model (in eval mode) and the dev F1 after each epoch (empty without ``dev``).

    Raises:
        ValueError: ``epochs < 1``, or ``groups`` that do not cover ``train`` exactly once.
    """
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    if groups is not None and sorted(i for g in groups for i in g) != list(range(len(train))):
        raise ValueError(f"groups must hold each of the {len(train)} training indices exactly once")
    torch.manual_seed(seed)
    model = TaggerModule(
        vocabs=vocabs, warmup_ratio=0.0, **{k: hparams[k] for k in _KEPT if k in hparams}
    )
    optimizer = model.configure_optimizers()
    assert isinstance(optimizer, torch.optim.Optimizer)
    averaged = torch.optim.swa_utils.AveragedModel(model) if average else None
    generator = random.Random(seed)
    history: list[float] = []
    best: tuple[float, dict[str, Any]] | None = None
    score = dev_f1 or (lambda m: _f1(m, collate, dev))
    for _ in range(epochs):
        model.train()
        for units in _batches(len(train), groups, batch_size, generator):
            rows = [i for g in units for i in g]
            batch = collate([train[i] for i in rows])
            if groups is not None:
                where = {i: r for r, i in enumerate(rows)}
                batch = dataclasses.replace(batch, groups=[[where[i] for i in g] for g in units])
            loss = model.tagger.fit_step(batch, reduction="mean")
            if loss is None:
                continue
            optimizer.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            if averaged is not None:
                averaged.update_parameters(model)
        current = _current(model, averaged)
        if dev:
            f1 = score(current.eval())
            history.append(f1)
            if best is None or f1 > best[0]:
                best = (f1, copy.deepcopy(current.state_dict()))
    final = _current(model, averaged)
    if best is not None:
        final.load_state_dict(best[1])
    return final.eval(), history


def _current(
    model: TaggerModule, averaged: torch.optim.swa_utils.AveragedModel | None
) -> TaggerModule:
    """The model to evaluate: the averaged parameters copied into a twin of ``model``, or itself."""
    if averaged is None:
        return model
    twin = copy.deepcopy(model)
    twin.load_state_dict(averaged.module.state_dict())
    return twin
