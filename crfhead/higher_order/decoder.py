"""The higher-order decoder ``train.py`` drives by config: chains plus weighted factors, per group (Qian & Liu, TACL 2014).

:class:`FactorDecoder` is a :class:`~crfhead.model.group_decoder.GroupDecoder`: for every group of
a batch it builds the group's patterns (:mod:`crfhead.higher_order.factors`), scores each kind ``k``
by ``scale * weights[k]`` and decodes the group with :func:`~crfhead.higher_order.decode.decode`
(``dd2slave`` by default). Its weights are either

* **tuned** (``grid`` given): ``weights`` fixed at one, ``scale`` chosen among ``grid`` on dev at
  every validation: "train the chain CRF first, then the non-local weights"; or
* **learned** (``grid: null``): ``weights`` a parameter, zero at the start, trained with the
  perceptron head by ``full(ŷ) - full(y)`` per group, whose gradient in ``weights[k]`` is the number
  of kind-``k`` patterns holding in ``ŷ`` minus in ``y``: the seed's averaged perceptron with the
  higher-order decoder (add :class:`~crfhead.training.callbacks.WeightAveraging`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from crfhead import engine
from crfhead.data.batching import Batch
from crfhead.engine.potentials import ChainPotentials
from crfhead.higher_order.decode import METHODS, PreparedGroup
from crfhead.higher_order.factors import Consistency, Factors
from crfhead.higher_order.patterns import Pattern
from crfhead.model.group_decoder import GroupDecoder, batch_groups

__all__ = ["DEFAULT_GRID", "FactorDecoder"]

DEFAULT_GRID = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)
"""The scales tried on dev by default (0: the chain alone, so tuning never does worse on dev)."""

_CACHED_GROUPS = 512
"""Prepared groups kept for the next scale (tuned weights): at least a batch's groups."""


class FactorDecoder(GroupDecoder):
    """Joint decoding of each group under its chains plus weighted non-local factors.

    Args:
        labels: the label list (filled in from the data).
        scheme: its tagging scheme (filled in from the data).
        factors: the factors (default :class:`~crfhead.higher_order.factors.Consistency`).
        method: a decoding method of :data:`~crfhead.higher_order.decode.METHODS`.
        max_iterations: the dual decomposition's iteration cap.
        grid: the candidate scales chosen among on dev (tuned weights), or ``None``: learn one weight
            per kind with the perceptron head.
        maxflow: the min-cut solver of ``dd2slave`` (see :func:`~crfhead.higher_order.decode.decode`).
        scale: the scale before the first validation chooses one (tuned weights only; 0: the chains
            alone, so the sanity check before training decodes as fast as Viterbi).

    Attributes:
        weights: ``(kinds,)`` one weight per kind of factor.
        scale: ``()`` the multiplier of every weight.
        stats: groups decoded, with patterns, certified, and iterations summed since
            :meth:`reset_stats`.
    """

    weights: Tensor
    scale: Tensor

    def __init__(
        self,
        labels: Sequence[str],
        scheme: str,
        factors: Factors | None = None,
        method: str = "dd2slave",
        max_iterations: int = 300,
        grid: Sequence[float] | None = DEFAULT_GRID,
        scale: float = 0.0,
        maxflow: str = "auto",
    ) -> None:
        super().__init__()
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        from crfhead.higher_order.pseudo_boolean import BACKENDS

        if maxflow not in BACKENDS:
            raise ValueError(f"maxflow must be one of {BACKENDS}, got {maxflow!r}")
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
        if grid is not None and (not grid or not all(float(v) >= 0.0 for v in grid)):
            raise ValueError(f"grid must be a non-empty list of scales >= 0 (or null), got {grid}")
        self.labels, self.scheme = list(labels), scheme
        self.factors = factors if factors is not None else Consistency()
        self.method, self.max_iterations, self.maxflow = method, max_iterations, maxflow
        self.kinds = self.factors.kinds(self.labels, scheme)
        self.learns = grid is None
        self.grid = () if grid is None else tuple(float(v) for v in grid)
        if self.learns:
            self.weights = nn.Parameter(torch.zeros(len(self.kinds)))
        else:
            self.register_buffer("weights", torch.ones(len(self.kinds)))
        self.register_buffer("scale", torch.tensor(1.0 if self.learns else float(scale)))
        self._cache: dict[
            tuple[tuple[int, ...], tuple[int, ...]],
            tuple[tuple[Tensor, ...], list[Pattern], PreparedGroup],
        ] = {}

    def __getstate__(self) -> dict[str, object]:
        """The module without its prepared groups (a copy or a checkpoint starts with none)."""
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state

    def forget(self) -> None:
        """Drop the prepared groups kept for the next scale."""
        self._cache.clear()

    def extra_repr(self) -> str:  # noqa: D102
        how = "learned" if self.learns else f"tuned on {list(self.grid)}"
        return (
            f"factors={self.factors!r}, kinds={self.kinds}, method={self.method!r}, "
            f"max_iterations={self.max_iterations}, weights {how}"
        )

    def reset_stats(self) -> None:  # noqa: D102
        self.stats = {"groups": 0, "with_patterns": 0, "certified": 0, "iterations": 0}

    def use(self, value: float) -> None:  # noqa: D102
        self.scale.fill_(float(value))

    @property
    def value(self) -> float:  # noqa: D102
        return float(self.scale)

    # ----------------------------------------------------------------------------- decoding
    def _group_patterns(self, batch: Batch, rows: list[int]) -> list[list[Pattern]]:
        tokens = [batch.sentences[r].tokens for r in rows]
        return self.factors.patterns(tokens, self.labels, self.scheme)

    def _weighted(self, by_kind: list[list[Pattern]], scale: bool = True) -> list[Pattern]:
        """The patterns scored by their kind's weight, times the scale unless ``scale=False``."""
        w = ((self.scale if scale else 1.0) * self.weights).detach().tolist()
        return [
            Pattern(p.cells, p.score * w[k]) for k, ps in enumerate(by_kind) for p in ps if w[k]
        ]

    def unit_patterns(self, batch: Batch, rows: list[int]) -> list[Pattern]:
        """The patterns of the group ``rows`` of ``batch``, each kind at its weight, before the scale."""
        return self._weighted(self._group_patterns(batch, rows), scale=False)

    def _prepared(
        self, pot: ChainPotentials, rows: list[int], patterns: list[Pattern]
    ) -> PreparedGroup:
        """The group prepared once for every scale of the grid (tuned weights: only the scale changes).

        Kept per group while the group's potentials and patterns are the ones it was built from
        (compared, not trusted: the grid step decodes one batch at every scale in turn).
        """
        index = torch.tensor(rows, device=pot.emissions.device)
        parts = (
            pot.emissions.detach()[index],
            pot.transitions.detach(),
            pot.start.detach(),
            pot.end.detach(),
            pot.mask[index],
        )
        key = (tuple(rows), tuple(parts[0].shape))
        kept = self._cache.get(key)
        if (
            kept is not None
            and kept[1] == patterns
            and all(torch.equal(a, b) for a, b in zip(kept[0], parts, strict=True))
        ):
            return kept[2]
        prepared = PreparedGroup(*parts, patterns, maxflow=self.maxflow)
        if len(self._cache) >= _CACHED_GROUPS:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = (parts, patterns, prepared)
        return prepared

    def _decode_group(
        self, pot: ChainPotentials, rows: list[int], by_kind: list[list[Pattern]]
    ) -> Tensor:
        if self.learns:  # the weights change every step: nothing to keep
            patterns = self._weighted(by_kind)
            prepared = PreparedGroup(
                pot.emissions.detach()[rows],
                pot.transitions.detach(),
                pot.start.detach(),
                pot.end.detach(),
                pot.mask[rows],
                patterns,
                maxflow=self.maxflow,
            )
            scale = 1.0
        else:
            patterns = self._weighted(by_kind, scale=False)
            prepared = self._prepared(pot, rows, patterns)
            scale = float(self.scale)
        result = prepared.decode(scale, self.method, self.max_iterations)
        self.stats["groups"] += 1
        self.stats["with_patterns"] += bool(patterns) and scale != 0.0
        self.stats["certified"] += bool(result.certified)
        self.stats["iterations"] += int(result.iterations)
        return result.tags

    def decode(self, pot: ChainPotentials, batch: Batch) -> Tensor:  # noqa: D102
        B, T, _ = pot.shape
        tags = torch.full((B, T), -1, dtype=torch.long, device=pot.emissions.device)
        for rows in batch_groups(batch):
            by_kind = self._group_patterns(batch, rows)
            tags[rows] = self._decode_group(pot, rows, by_kind).to(tags.device)
        return tags

    # ----------------------------------------------------------------------------- learning
    @staticmethod
    def _counts(by_kind: list[list[Pattern]], tags: list[list[int]]) -> list[float]:
        """Per kind, the (multiplicity-weighted) number of patterns holding in ``tags``."""
        return [
            sum(p.score for p in ps if all(tags[b][t] == k for b, t, k in p.cells))
            for ps in by_kind
        ]

    def loss(  # noqa: D102
        self, pot: ChainPotentials, decode_pot: ChainPotentials, batch: Batch
    ) -> Tensor:
        if not self.learns:
            raise NotImplementedError("a tuned FactorDecoder does not learn its weights")
        if batch.tags is None:
            raise ValueError("the batch has no tags to compute a loss on")
        gold = torch.where(pot.mask, batch.tags.to(pot.mask.device), -1)
        losses = []
        for rows in batch_groups(batch):
            by_kind = self._group_patterns(batch, rows)
            best = self._decode_group(decode_pot, rows, by_kind)
            index = torch.tensor(rows, device=pot.emissions.device)
            sub = ChainPotentials(
                decode_pot.emissions[index],
                decode_pot.transitions,
                decode_pot.start,
                decode_pot.end,
                decode_pot.mask[index],
            )
            gold_sub = ChainPotentials(
                pot.emissions[index], pot.transitions, pot.start, pot.end, pot.mask[index]
            )
            y = gold[index]
            counts = torch.tensor(
                [
                    a - b
                    for a, b in zip(
                        self._counts(by_kind, best.tolist()),
                        self._counts(by_kind, y.tolist()),
                        strict=True,
                    )
                ],
                dtype=self.weights.dtype,
                device=self.weights.device,
            )
            chain = engine.score(sub, best.to(y.device)).sum() - engine.score(gold_sub, y).sum()
            losses.append(chain + self.scale * (self.weights * counts).sum())
        return torch.stack(losses)
