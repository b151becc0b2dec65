"""The contract of a decoder that labels each group of a batch jointly (higher-order CRFs, Qian & Liu, TACL 2014).

A :class:`GroupDecoder` takes the head's chain potentials of a grouped batch
(:attr:`~crfhead.data.batching.Batch.groups`, :mod:`crfhead.data.grouping`) and returns one labelling
per group under the chains *plus* its own non-local factors. :class:`~crfhead.model.tagger.Tagger`
uses it in place of the head's Viterbi when a config names one (``model.decoder``); the implementation
shipped is :class:`crfhead.higher_order.decoder.FactorDecoder`, which this package never imports.

Its non-local weights are set in one of two ways:

* **tuned** (:attr:`GroupDecoder.grid` non-empty): the head trains alone on its own loss (the chain CRF
  first), and at every validation the decoder's scale is chosen among :attr:`grid` by dev span F1
  (:meth:`GroupDecoder.use`), so the checkpoint keeps the chosen one;
* **learned** (:attr:`GroupDecoder.learns`): the weights are parameters trained together with the head
  by the perceptron loss ``full score(decoded) - full score(gold)`` per group (:meth:`GroupDecoder.loss`).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from crfhead.data.batching import Batch
from crfhead.engine.potentials import ChainPotentials

__all__ = ["GroupDecoder", "batch_groups"]


def batch_groups(batch: Batch) -> list[list[int]]:
    """The batch's groups (rows), each sentence alone when the data is not grouped.

    Raises:
        ValueError: groups that do not cover every row exactly once.
    """
    B = len(batch.sentences)
    if batch.groups is None:
        return [[b] for b in range(B)]
    rows = sorted(r for g in batch.groups for r in g)
    if rows != list(range(B)):
        raise ValueError(
            f"batch.groups must hold each of the {B} rows exactly once, got {batch.groups}"
        )
    return batch.groups


class GroupDecoder(nn.Module):
    """Base class: joint decoding of each group of a batch, with tuned or learned non-local weights.

    Subclasses set :attr:`grid` (tuned) or :attr:`learns` (learned) and implement :meth:`decode`,
    :meth:`use` and, when they learn, :meth:`loss`.
    """

    grid: Sequence[float] = ()
    """The candidate scales tried on dev at every validation (empty: not tuned)."""
    learns: bool = False
    """The weights are trained with the head by :meth:`loss` (the perceptron route)."""
    stats: dict[str, int]
    """Counts since :meth:`reset_stats`: ``groups`` decoded, ``certified`` (proven optimal),
    ``iterations`` summed (the module logs their ratios after each evaluation)."""

    def __init__(self) -> None:
        super().__init__()
        self.reset_stats()

    def reset_stats(self) -> None:
        """Zero :attr:`stats`."""
        self.stats = {"groups": 0, "certified": 0, "iterations": 0}

    def decode(self, pot: ChainPotentials, batch: Batch) -> Tensor:
        """The best labelling of every group: ``(B, T)`` long, ``-1`` where masked.

        Args:
            pot: the head's potentials of the whole batch, emissions ``(B, T, K)``.
            batch: the batch (its sentences' tokens and :attr:`~crfhead.data.batching.Batch.groups`).
        """
        raise NotImplementedError

    def use(self, value: float) -> None:
        """Set the scale of the non-local weights (one of :attr:`grid`, chosen on dev)."""
        raise NotImplementedError

    @property
    def value(self) -> float:
        """The scale in use."""
        raise NotImplementedError

    def loss(self, pot: ChainPotentials, decode_pot: ChainPotentials, batch: Batch) -> Tensor:
        """Per group ``full(ŷ) - full(y)``: ``(G,)``, ``ŷ`` decoded under ``decode_pot``.

        Args:
            pot: the head's potentials, emissions ``(B, T, K)``, differentiable.
            decode_pot: the potentials to decode with (``pot``, or the cost-augmented ones).
            batch: the batch, with gold tags.
        """
        raise NotImplementedError(f"{type(self).__name__} does not learn its weights")
