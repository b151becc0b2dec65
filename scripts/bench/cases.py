"""A benchmark case (a size and a length regime) and its data, the same for every library.

Variable lengths are random in ``[T/2, T]`` with the first row at full length; masks are
left-aligned. The CRF parameters are drawn once per case and every adapter loads the same values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Case:
    """One benchmark case: a size and a length regime."""

    B: int
    T: int
    K: int
    variable: bool

    @property
    def seed(self) -> int:
        """The data seed: a function of the case alone, so a case reproduces in any ``--sizes``."""
        return ((self.B * 10007 + self.T) * 1009 + self.K) * 2 + int(self.variable)

    @property
    def label(self) -> str:
        return f"B={self.B} T={self.T} K={self.K} {'var' if self.variable else 'full'}"

    @property
    def lengths_name(self) -> str:
        return "var" if self.variable else "full"


@dataclass(frozen=True)
class Inputs:
    """The data and the CRF parameters of one case, on the benchmark device."""

    emissions: Tensor
    tags: Tensor
    mask: Tensor
    lengths: Tensor
    params: dict[str, Tensor]
    """``start_transitions`` ``(K,)``, ``end_transitions`` ``(K,)``, ``transitions`` ``(K, K)``
    ``[from, to]``: pytorch-crf's state-dict names, which crfhead's ``CRF`` shares."""


def param_shapes(K: int) -> dict[str, tuple[int, ...]]:
    """The CRF parameters in pytorch-crf's declaration order, the order they are drawn in."""
    return {"start_transitions": (K,), "end_transitions": (K,), "transitions": (K, K)}


def make_inputs(case: Case, device: torch.device) -> Inputs:
    gen = torch.Generator().manual_seed(case.seed)
    B, T, K = case.B, case.T, case.K
    emissions = torch.randn(B, T, K, generator=gen)
    tags = torch.randint(0, K, (B, T), generator=gen)
    if case.variable:
        lengths = torch.randint(math.ceil(T / 2), T + 1, (B,), generator=gen)
        lengths[0] = T
    else:
        lengths = torch.full((B,), T, dtype=torch.long)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    params = {
        name: torch.randn(shape, generator=gen).to(device)
        for name, shape in param_shapes(K).items()
    }
    return Inputs(
        emissions=emissions.to(device),
        tags=tags.to(device),
        mask=mask.to(device),
        lengths=lengths.to(device),
        params=params,
    )
