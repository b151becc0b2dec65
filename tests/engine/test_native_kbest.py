"""The native k-best's three paths against each other, bit for bit: blocks of SIMD lanes
(``topk_block``), the lazy enumeration (``topk_lazy``) and the one-sequence merge (``topk_one``, the
plainest), each forced in a subprocess by ``CRFHEAD_TOPK_PATH``; the default choice in process; and
against the portable scan at sizes enumeration cannot reach. Holes, empty rows, forbidden
transitions, per-edge transitions, K above the per-edge lane bound, batches that are not a multiple
of the lane width, ties (integer scores), k above the number of paths, float32 and float64."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import Chain, constrained_chain, random_chain

from crfhead import make_potentials
from crfhead.engine import topk
from crfhead.engine.backends import available

pytestmark = pytest.mark.skipif(not available("cpu")[0], reason="no native cpu kernel here")

PATHS = ("one", "lanes", "lazy")

_ONE_AT_A_TIME = """
import sys, torch
from crfhead import make_potentials
from crfhead.engine import topk
cases = torch.load(sys.argv[1])
torch.save([topk(make_potentials(*args), k, backend="cpu") for args, k in cases], sys.argv[2])
"""


def _cases() -> list[tuple[Chain, int]]:
    out: list[tuple[Chain, int]] = []
    for seed, (B, T, K, pe, k) in enumerate(
        [
            (1, 1, 2, False, 3),
            (5, 7, 3, False, 4),
            (11, 9, 4, True, 5),
            (13, 20, 5, False, 8),
            (3, 0, 3, False, 2),
            (9, 12, 17, True, 3),  # per-edge above kLanesPerEdgeMaxK
            (17, 15, 20, False, 6),
            (6, 30, 9, False, 64),
            (3, 6, 3, False, 800),  # more ranks than paths (729)
            (5, 10, 17, False, 20),  # the default's lazy side (K, k >= 16)
            (4, 8, 16, True, 16),
        ]
    ):
        for dtype in (torch.float64, torch.float32):
            c = random_chain(seed, B, T, K, per_position=pe, dtype=dtype)
            if B > 2 and T > 0:
                c.mask[1] = False  # an empty row
            if T > 4:
                c.mask[0, 3] = False  # a hole
            out.append((c, k))
        out.append((constrained_chain(seed, B, T, K, pe), k))
        g = torch.Generator().manual_seed(seed)  # ties everywhere
        ties = random_chain(seed, B, T, K, per_position=pe)
        ties.emissions = torch.randint(0, 2, (B, T, K), generator=g).double()
        ties.transitions = torch.randint(0, 2, ties.transitions.shape, generator=g).double()
        ties.start, ties.end = (
            torch.zeros(K, dtype=torch.float64),
            torch.zeros(K, dtype=torch.float64),
        )
        out.append((ties, k))
    return out


def _forced(path: str, tmp_path: Path) -> list[tuple[torch.Tensor, torch.Tensor]]:
    out = tmp_path / f"{path}.pt"
    subprocess.run(
        [sys.executable, "-c", _ONE_AT_A_TIME, str(tmp_path / "cases.pt"), str(out)],
        env={**os.environ, "CRFHEAD_TOPK_PATH": path},
        check=True,
    )
    result: list[tuple[torch.Tensor, torch.Tensor]] = torch.load(out)
    return result


def test_the_three_paths_and_the_default_agree_bit_for_bit(tmp_path: Path) -> None:
    cases = _cases()
    torch.save([(c.args(), k) for c, k in cases], tmp_path / "cases.pt")
    want = _forced("one", tmp_path)
    runs = {path: _forced(path, tmp_path) for path in PATHS[1:]}
    runs["default"] = [topk(make_potentials(*c.args()), k, backend="cpu") for c, k in cases]
    for name, got in runs.items():
        for (c, k), (want_s, want_p), (got_s, got_p) in zip(cases, want, got, strict=True):
            where = (name, tuple(c.emissions.shape), k)
            assert got_s.dtype == want_s.dtype, where
            assert torch.equal(got_s, want_s), where
            assert torch.equal(got_p, want_p), where


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("per_position", [False, True])
def test_lane_blocks_match_the_portable_scan(dtype: torch.dtype, per_position: bool) -> None:
    c = random_chain(7, 32, 50, 9, per_position=per_position, dtype=dtype, scale=2.0)
    pot = make_potentials(*c.args())
    got_s, got_p = topk(pot, 5, backend="cpu")
    want_s, want_p = topk(pot, 5, backend="portable")
    tol = 1e-9 if dtype == torch.float64 else 1e-4
    torch.testing.assert_close(got_s, want_s, rtol=tol, atol=tol)
    assert torch.equal(got_p, want_p)  # random scores: no ties among the 5 best


@pytest.mark.parametrize(("K", "k"), [(3, 70), (17, 20)])  # the lanes at large k; the lazy path
def test_large_k_matches_portable(K: int, k: int) -> None:
    c = random_chain(3, 5, 8, K, dtype=torch.float64)
    pot = make_potentials(*c.args())
    got_s, got_p = topk(pot, k, backend="cpu")
    want_s, want_p = topk(pot, k, backend="portable")
    torch.testing.assert_close(got_s, want_s, rtol=1e-9, atol=1e-9)
    finite = want_s > float("-inf")
    assert torch.equal(got_p[finite], want_p[finite])
    assert (got_p[~finite] == -1).all()
