"""The native k-best in blocks of SIMD lanes (``topk_block``) against the kernel's one-sequence path
(``topk_one``, forced in a subprocess by ``CRFHEAD_LANES_TOPK_MAX_K=0``: the same scores and paths,
bit for bit), against the portable scan at sizes enumeration cannot reach, and past the lane bound
(k > 64, one sequence at a time in process). Holes, empty rows, forbidden transitions, per-edge
transitions, K above the per-edge lane bound, batches that are not a multiple of the lane width,
float32 and float64."""

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
            (6, 30, 9, False, 64),  # at the lane bound
        ]
    ):
        for dtype in (torch.float64, torch.float32):
            c = random_chain(seed, B, T, K, per_position=pe, dtype=dtype)
            if B > 2 and T > 0:
                c.mask[1] = False  # an empty row
            out.append((c, k))
        out.append((constrained_chain(seed, B, T, K, pe), k))
    return out


def test_lane_blocks_equal_one_sequence_at_a_time_bit_for_bit(tmp_path: Path) -> None:
    cases = _cases()
    torch.save([(c.args(), k) for c, k in cases], tmp_path / "cases.pt")
    env = {**os.environ, "CRFHEAD_LANES_TOPK_MAX_K": "0"}
    subprocess.run(
        [
            sys.executable,
            "-c",
            _ONE_AT_A_TIME,
            str(tmp_path / "cases.pt"),
            str(tmp_path / "out.pt"),
        ],
        env=env,
        check=True,
    )
    want = torch.load(tmp_path / "out.pt")
    for (c, k), (want_s, want_p) in zip(cases, want, strict=True):
        got_s, got_p = topk(make_potentials(*c.args()), k, backend="cpu")
        assert got_s.dtype == want_s.dtype
        assert torch.equal(got_s, want_s), (tuple(c.emissions.shape), k)
        assert torch.equal(got_p, want_p), (tuple(c.emissions.shape), k)


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


def test_past_the_lane_bound_one_sequence_at_a_time_matches_portable() -> None:
    c = random_chain(3, 5, 8, 3, dtype=torch.float64)
    pot = make_potentials(*c.args())
    got_s, got_p = topk(pot, 70, backend="cpu")
    want_s, want_p = topk(pot, 70, backend="portable")
    torch.testing.assert_close(got_s, want_s, rtol=1e-9, atol=1e-9)
    finite = want_s > float("-inf")
    assert torch.equal(got_p[finite], want_p[finite])
    assert (got_p[~finite] == -1).all()
