"""Random tiny chains for the tests."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st


@dataclass
class Chain:
    emissions: torch.Tensor
    transitions: torch.Tensor
    start: torch.Tensor
    end: torch.Tensor
    mask: torch.Tensor

    def args(self) -> tuple[torch.Tensor, ...]:
        return self.emissions, self.transitions, self.start, self.end, self.mask


def random_chain(
    seed: int,
    B: int,
    T: int,
    K: int,
    per_position: bool = False,
    holes: bool = True,
    dtype: torch.dtype = torch.float64,
    scale: float = 1.0,
) -> Chain:
    g = torch.Generator().manual_seed(seed)
    E = torch.randn(B, T, K, generator=g, dtype=dtype) * scale
    shape = (B, max(T - 1, 0), K, K) if per_position else (K, K)
    Tr = torch.randn(*shape, generator=g, dtype=dtype) * scale
    s = torch.randn(K, generator=g, dtype=dtype)
    e = torch.randn(K, generator=g, dtype=dtype)
    if holes:
        mask = torch.rand(B, T, generator=g) < 0.7
        if B > 1 and T > 0:
            mask[0] = True  # at least one full row
    else:
        mask = torch.ones(B, T, dtype=torch.bool)
    return Chain(E, Tr, s, e, mask)


@st.composite
def chains(draw: st.DrawFn, max_T: int = 5, max_K: int = 4) -> Chain:
    return random_chain(
        seed=draw(st.integers(0, 2**31 - 1)),
        B=draw(st.integers(1, 3)),
        T=draw(st.integers(0, max_T)),
        K=draw(st.integers(1, max_K)),
        per_position=draw(st.booleans()),
    )
