"""Exact MAP by HiGHS (crfhead.higher_order.ilp, the ILP baseline of Qian & Liu, TACL 2014) against brute force.

Random tiny groups (masks with holes, fully masked rows, positive, negative and mixed patterns of
1-6 cells, K = 1..3) are enumerated by ``enumerate_groups``; chain-only groups are checked against
Viterbi; degenerate groups and input errors separately.
"""

from __future__ import annotations

import math
import random

import pytest
import torch
from enumerate_groups import best_labelling, full_score
from torch import Tensor

from crfhead import make_potentials
from crfhead.engine import viterbi
from crfhead.higher_order.ilp import ILPResult, solve_ilp
from crfhead.higher_order.patterns import Pattern

Chain = tuple[Tensor, Tensor, Tensor, Tensor, Tensor]


def _chain(rng: random.Random, B: int, T: int, K: int, holes: bool = True) -> Chain:
    g = torch.Generator().manual_seed(rng.randrange(2**31))
    dtype = torch.float64 if rng.random() < 0.8 else torch.float32
    emissions = torch.randn(B, T, K, generator=g, dtype=dtype)
    transitions = torch.randn(K, K, generator=g, dtype=dtype)
    start = torch.randn(K, generator=g, dtype=dtype)
    end = torch.randn(K, generator=g, dtype=dtype)
    if holes:
        mask = torch.rand(B, T, generator=g) < 0.75
        for b in range(B):
            if rng.random() < 0.15:
                mask[b] = False
    else:
        mask = torch.ones(B, T, dtype=torch.bool)
    return emissions, transitions, start, end, mask


def _patterns(rng: random.Random, mask: Tensor, K: int, sign: str) -> list[Pattern]:
    positions = [(b, t) for b, t in mask.nonzero().tolist()]
    out: list[Pattern] = []
    if not positions:
        return out
    for _ in range(rng.randint(0, 10)):
        size = rng.randint(1, min(rng.choice((2, 3, 6)), len(positions)))
        cells = tuple((b, t, rng.randrange(K)) for b, t in rng.sample(positions, size))
        magnitude = rng.uniform(0.2, 4.0)
        negative = sign == "negative" or (sign == "mixed" and rng.random() < 0.5)
        out.append(Pattern(cells, -magnitude if negative else magnitude))
    if out and rng.random() < 0.2:  # a duplicate of a pattern (same cells, another order)
        p = out[0]
        out.append(Pattern(tuple(reversed(p.cells)), rng.uniform(-1.0, 1.0)))
    return out


def _check(chain: Chain, patterns: list[Pattern], result: ILPResult, label: str) -> None:
    emissions, transitions, start, end, mask = chain
    best = best_labelling(emissions, transitions, start, end, mask, patterns)
    tol = 1e-9 * max(1.0, abs(best.score))
    assert result.optimal, label
    assert abs(result.score - best.score) <= tol, (label, result.score, best.score)
    rescored = full_score(emissions, transitions, start, end, mask, patterns, result.tags)
    assert abs(rescored - best.score) <= tol, (label, rescored, best.score)
    assert result.bound >= result.score - 1e-7 * max(1.0, abs(best.score)), label
    if result.lp_integral:
        assert abs(result.bound - result.score) <= 1e-7 * max(1.0, abs(best.score)), label
    assert result.tags.dtype == torch.int64
    assert torch.equal(result.tags == -1, ~mask), label
    K = emissions.shape[2]
    assert bool(((result.tags >= 0) & (result.tags < K))[mask].all()), label


def test_random_groups_match_brute_force() -> None:
    rng = random.Random(20140601)
    through_mip = 0
    for i in range(300):
        B, T, K = rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 3)
        chain = _chain(rng, B, T, K)
        sign = ("positive", "negative", "mixed")[i % 3]
        patterns = _patterns(rng, chain[4], K, sign)
        result = solve_ilp(*chain, patterns)
        _check(chain, patterns, result, f"instance {i}: {(B, T, K)} {sign} {patterns}")
        through_mip += not result.lp_integral
        if i % 4 == 0:  # the MIP alone must agree too
            direct = solve_ilp(*chain, patterns, lp_first=False)
            _check(chain, patterns, direct, f"instance {i} (no LP first)")
            assert not direct.lp_integral
    # The test means something only if the LP relaxation was fractional some of the time.
    assert through_mip >= 10, through_mip


def test_fractional_lp_goes_to_the_mip_and_the_bound_is_the_lp() -> None:
    # Two tokens with no chain between them (two rows), a frustrated triangle of negative patterns:
    # reward label 1 everywhere, punish each pair of 1s; the LP sets y = 1/2 and beats every labelling.
    K = 2
    emissions = torch.zeros(3, 1, K, dtype=torch.float64)
    emissions[:, 0, 1] = 1.0
    zeros = torch.zeros(K, dtype=torch.float64)
    mask = torch.ones(3, 1, dtype=torch.bool)
    patterns = [Pattern(((a, 0, 1), (b, 0, 1)), -2.0) for a, b in ((0, 1), (1, 2), (0, 2))]
    chain = (emissions, torch.zeros(K, K, dtype=torch.float64), zeros, zeros, mask)
    result = solve_ilp(*chain, patterns)
    assert not result.lp_integral and result.optimal
    assert result.score == pytest.approx(1.0, abs=1e-12)  # one token labelled 1
    assert result.bound == pytest.approx(1.5, abs=1e-7)  # y = 1/2 everywhere: 3/2 − 0
    _check(chain, patterns, result, "triangle")


@pytest.mark.parametrize("seed", range(6))
def test_chain_only_groups_give_the_viterbi_score(seed: int) -> None:
    rng = random.Random(seed)
    B, T, K = rng.randint(1, 5), rng.randint(1, 8), rng.randint(1, 5)
    chain = _chain(rng, B, T, K, holes=seed % 2 == 0)
    emissions, transitions, start, end, mask = chain
    result = solve_ilp(*chain, [])
    pot = make_potentials(
        emissions.double(), transitions.double(), start.double(), end.double(), mask
    )
    scores, paths = viterbi(pot, backend="portable")
    assert result.optimal and result.lp_integral  # a chain's local polytope is integral
    assert result.score == pytest.approx(float(scores.sum()), abs=1e-9)
    assert torch.equal(result.tags, paths)


def test_per_position_transitions_and_forbidden_moves() -> None:
    rng = random.Random(7)
    B, T, K = 2, 4, 3
    emissions, _, start, end, mask = _chain(rng, B, T, K, holes=False)
    mask[0, 1] = False  # a hole: position 2 is entered from position 0 with transitions[:, 1]
    transitions = torch.randn(B, T - 1, K, K, generator=torch.Generator().manual_seed(3))
    transitions = transitions.to(emissions.dtype)
    transitions[:, :, 0, 1] = -math.inf  # forbidden, read as IMPOSSIBLE as the engine does
    patterns = [Pattern(((0, 0, 0), (1, 1, 1)), 2.5), Pattern(((0, 2, 1), (1, 2, 2)), -1.5)]
    chain = (emissions, transitions, start, end, mask)
    result = solve_ilp(*chain, patterns)
    _check(chain, patterns, result, "per-position")
    assert result.score > -1000.0  # no forbidden move taken


def test_degenerate_groups() -> None:
    zeros = torch.zeros(3, dtype=torch.float64)
    trans = torch.zeros(3, 3, dtype=torch.float64)
    for B, T in ((0, 4), (2, 0), (0, 0)):
        result = solve_ilp(
            torch.zeros(B, T, 3, dtype=torch.float64),
            trans,
            zeros,
            zeros,
            torch.ones(B, T, dtype=torch.bool),
            [],
        )
        assert result.tags.shape == (B, T) and result.score == 0.0
        assert result.optimal and result.bound == 0.0
    # Every row masked.
    result = solve_ilp(
        torch.randn(2, 3, 3, dtype=torch.float64),
        trans,
        zeros,
        zeros,
        torch.zeros(2, 3, dtype=torch.bool),
        [],
    )
    assert torch.equal(result.tags, torch.full((2, 3), -1)) and result.score == 0.0
    # K = 1: one labelling; every pattern holds, whatever its sign.
    emissions = torch.randn(2, 3, 1, dtype=torch.float64)
    mask = torch.tensor([[True, False, True], [True, True, True]])
    one = torch.ones(1, dtype=torch.float64)
    patterns = [
        Pattern(((0, 0, 0), (1, 2, 0)), 1.5),
        Pattern(((0, 2, 0), (1, 0, 0), (1, 1, 0)), -4.0),
    ]
    result = solve_ilp(
        emissions, torch.full((1, 1), 0.5, dtype=torch.float64), one, one, mask, patterns
    )
    expected = float(emissions[mask].sum()) + 0.5 * 3 + 2 * 2 + 1.5 - 4.0
    assert result.optimal and result.score == pytest.approx(expected, abs=1e-12)
    assert torch.equal(result.tags, torch.where(mask, 0, -1))


def test_time_limit_is_accepted() -> None:
    rng = random.Random(11)
    chain = _chain(rng, 3, 4, 3)
    patterns = _patterns(rng, chain[4], 3, "mixed")
    result = solve_ilp(*chain, patterns, time_limit=30.0, lp_first=False)
    _check(chain, patterns, result, "time limit")
    assert 0.0 <= result.seconds < 30.0


def _args() -> dict[str, Tensor]:
    return {
        "emissions": torch.zeros(2, 3, 4),
        "transitions": torch.zeros(4, 4),
        "start": torch.zeros(4),
        "end": torch.zeros(4),
        "mask": torch.ones(2, 3, dtype=torch.bool),
    }


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("emissions", torch.zeros(2, 3), "(2, 3)"),
        ("emissions", torch.zeros(2, 3, 4, dtype=torch.int64), "floating"),
        ("transitions", torch.zeros(4, 3), "(4, 3)"),
        ("start", torch.zeros(5), "(5,)"),
        ("end", torch.zeros(4, 1), "(4, 1)"),
        ("mask", torch.ones(2, 4, dtype=torch.bool), "(2, 4)"),
        ("mask", torch.ones(2, 3), "bool"),
        ("emissions", torch.full((2, 3, 4), math.nan), "NaN"),
        ("transitions", torch.full((4, 4), math.inf), "+inf"),
    ],
)
def test_input_errors_name_the_shapes(name: str, value: Tensor, needle: str) -> None:
    args = _args()
    args[name] = value
    with pytest.raises(ValueError, match=None) as info:
        solve_ilp(
            args["emissions"], args["transitions"], args["start"], args["end"], args["mask"], []
        )
    assert needle in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("pattern", "needle"),
    [
        (Pattern(((0, 3, 0),), 1.0), "outside"),
        (Pattern(((0, 0, 4),), 1.0), "outside"),
        (Pattern(((0, 1, 0),), 1.0), "masked"),
        (Pattern(((0, 0, 0), (0, 0, 1)), 1.0), "two cells on one position"),
        (Pattern((), 1.0), "no cells"),
        (Pattern(((0, 0, 0),), math.inf), "non-finite"),
    ],
)
def test_pattern_errors(pattern: Pattern, needle: str) -> None:
    args = _args()
    args["mask"][0, 1] = False
    with pytest.raises(ValueError, match=needle):
        solve_ilp(
            args["emissions"],
            args["transitions"],
            args["start"],
            args["end"],
            args["mask"],
            [pattern],
        )
