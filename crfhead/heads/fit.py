"""How a head is fitted: the strategy the training loop runs, whatever the head.

Each head class names its strategy (:attr:`~crfhead.heads.base.ChainHead.fitting`); the training
loop (:class:`~crfhead.training.module.TaggerModule`) calls the same four methods for every head and
never asks which head it has:

* :class:`GradientFit`: an optimiser minimises the head's loss (the CRF's conditional
  log-likelihood, Lafferty et al. 2001; the MEMM's local log-loss, McCallum et al. 2000);
* :class:`CostAugmentedFit`: the same, and the head also gives cost-augmented potentials, so a
  group decoder that learns its weights trains them with the perceptron (or hinge) loss of the
  whole group (Collins 2002; Tsochantaridis et al. 2005): the structured perceptron;
* :class:`CountingFit`: maximum-likelihood counts, one pass over the training data per epoch,
  summed over data-parallel ranks, the smoothing chosen on held-out data: the HMM (a
  :class:`~crfhead.heads.base.CountingHead`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Protocol

from torch import Tensor

from crfhead.engine.potentials import ChainPotentials

__all__ = ["CostAugmentedFit", "CountingFit", "Fit", "FitLoop", "GradientFit"]


class FitLoop(Protocol):
    """What the training loop offers a fit at an epoch's end."""

    def reduce_sum(self, tensor: Tensor) -> Tensor:
        """``tensor`` summed over the data-parallel ranks (itself on one process)."""
        ...

    def validation_batches(self) -> Iterable[Any]:
        """The validation batches (none without validation data)."""
        ...


class Fit:
    """The contract of a fit strategy; :class:`GradientFit` is the default.

    Args:
        head: the head to fit (a :class:`~crfhead.heads.base.ChainHead`; typed loosely because the
            strategies sit below the head contract, which names them).
    """

    optimised: ClassVar[bool] = True
    """Whether an optimiser steps the head's (and the encoder's) parameters."""

    def __init__(self, head: Any) -> None:
        self.head = head

    def step(self, batch: Any, emissions: Callable[[], Tensor], reduction: str) -> Tensor | None:
        """One training batch: the loss to back-propagate, or ``None`` for a fit without one.

        Args:
            batch: a batch with ``tags`` ``(B, T)`` and ``mask`` ``(B, T)`` (and ``words`` for a
                counting fit).
            emissions: computes the batch's emissions ``(B, T, K)`` (not called by a counting fit).
            reduction: how the per-sequence losses are reduced (see the head's ``loss``).
        """
        raise NotImplementedError

    def require_cost_augmentation(self, learner: str) -> None:
        """Refuse, naming ``learner``, unless the fit gives :meth:`cost_augmented` potentials.

        Raises:
            TypeError: the head has no cost-augmented loss.
        """
        raise TypeError(
            f"{learner} learns its weights with the perceptron loss of each "
            "group (full score of the decoded labelling minus the gold's), which needs the "
            f"crfhead.heads.StructuredPerceptron head, got {type(self.head).__name__}; or give "
            "the decoder a grid to tune its weight on dev over a head trained alone"
        )

    def cost_augmented(self, pot: ChainPotentials, tags: Tensor) -> ChainPotentials:
        """``pot`` with the head's cost added off the gold ``tags`` ``(B, T)``, for a learning group decoder.

        Raises:
            TypeError: the head has no cost-augmented loss.
        """
        self.require_cost_augmentation("a group decoder")
        return pot

    def start_epoch(self) -> None:
        """Called at every training epoch's start."""

    def end_epoch(self, loop: FitLoop) -> dict[str, float]:
        """Called after an epoch's training batches (before validation); values to log, by name."""
        return {}


class GradientFit(Fit):
    """An optimiser minimises the head's loss on the gold tags."""

    def step(self, batch: Any, emissions: Callable[[], Tensor], reduction: str) -> Tensor | None:  # noqa: D102
        scores = emissions()
        mask = batch.mask.to(scores.device)
        allowed = getattr(batch, "allowed", None)
        if allowed is not None:  # partial labels: the loss of every labelling inside the sets
            partial: Tensor = self.head.loss(
                scores, None, mask, reduction, allowed=allowed.to(scores.device)
            )
            return partial
        loss: Tensor = self.head.loss(scores, batch.tags.to(scores.device), mask, reduction)
        return loss


class CostAugmentedFit(GradientFit):
    """A gradient fit whose head's loss is cost-augmented (the perceptron / Hamming hinge)."""

    def require_cost_augmentation(self, learner: str) -> None:  # noqa: D102
        return None

    def cost_augmented(self, pot: ChainPotentials, tags: Tensor) -> ChainPotentials:  # noqa: D102
        augmented: ChainPotentials = self.head.augmented(pot, tags)
        return augmented


class CountingFit(Fit):
    """Counts on every training batch; the ranks' counts summed and the smoothing tuned once an epoch."""

    optimised: ClassVar[bool] = False

    def __init__(self, head: Any) -> None:
        super().__init__(head)
        self._synced = True

    def step(self, batch: Any, emissions: Callable[[], Tensor], reduction: str) -> Tensor | None:  # noqa: D102
        if batch.tags is None or batch.words is None:
            raise ValueError("counting needs the batch's words and tags")
        if getattr(batch, "allowed", None) is not None:
            raise ValueError(
                f"{type(self.head).__name__} is fitted by counting, which needs one gold tag per "
                "position: it cannot train from partial labels (a batch with several allowed "
                "labels at some position); use the CRF, MEMM or perceptron head"
            )
        self.head.accumulate(batch.words, batch.tags, batch.mask)
        self._synced = False
        return None

    def start_epoch(self) -> None:  # noqa: D102
        self.head.reset_counts()

    def end_epoch(self, loop: FitLoop) -> dict[str, float]:
        """Sum the ranks' counts; choose the smoothing on the validation batches (``{"alpha": ...}``)."""
        if self._synced:
            return {}
        for buf in self.head.count_buffers():
            buf.copy_(loop.reduce_sum(buf))
        self._synced = True
        if not self.head.tunes:
            return {}
        losses: Tensor | None = None
        for batch in loop.validation_batches():
            if batch.tags is not None and batch.words is not None:
                batch_losses = self.head.held_out_losses(batch.words, batch.tags, batch.mask)
                losses = batch_losses if losses is None else losses + batch_losses.to(losses)
        if losses is None:
            return {}
        return {"alpha": self.head.choose(loop.reduce_sum(losses))}
