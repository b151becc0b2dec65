"""The synthetic 2D-grid and 3-wise CRFs and the anytime comparison (Qian & Liu, TACL 2014, Table 3).

The generators: shapes, seeding, the factors they promise, patterns the decoders accept, a planted
labelling the model scores well and exact decoding finding more of it than the rows alone. The runner:
its ILP point is the brute-force optimum on tiny instances, every bound is above it, every
certificate is right, and each budget is its own run. The script's ``--quick`` run writes the table,
the PNGs and the JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from enumerate_groups import best_labelling

from crfhead.higher_order import decode
from crfhead.higher_order.synthetic import (
    DD_METHODS,
    Comparison,
    Instance,
    SyntheticSpec,
    anytime,
    f_counts,
    f_score,
    grid_crf,
    instances,
    markdown_table,
    plot_anytime,
    threewise_crf,
)

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "higher_order_synthetic.py"
TINY = SyntheticSpec(rows=3, columns=4, labels=2, blocks=2, block_height=2, block_width=3)
"""Small enough to enumerate: 2 ** 12 labellings."""


def _same(a: Instance, b: Instance) -> bool:
    return (
        torch.equal(a.emissions, b.emissions)
        and torch.equal(a.transitions, b.transitions)
        and torch.equal(a.gold, b.gold)
        and a.patterns == b.patterns
    )


class TestSpec:
    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"rows": 0}, "rows must be >= 1"),
            ({"columns": 0}, "columns must be >= 1"),
            ({"block_height": 0}, "block_height must be >= 1"),
            ({"block_width": 0}, "block_width must be >= 1"),
            ({"labels": 1}, "labels must be >= 2"),
            ({"blocks": -1}, "blocks must be >= 0"),
            ({"flip": 1.5}, r"flip must be in \[0, 1\]"),
            ({"noise_density": -0.1}, r"noise_density must be in \[0, 1\]"),
            ({"table_noise": -1.0}, "table_noise must be >= 0"),
            ({"triples": ("diagonals",)}, "triples must be among"),
        ],
    )
    def test_each_bad_parameter_is_named(self, change: dict[str, object], message: str) -> None:
        with pytest.raises(ValueError, match=message):
            SyntheticSpec(**change)  # type: ignore[arg-type]

    def test_an_unknown_model_is_refused(self) -> None:
        with pytest.raises(ValueError, match="model must be one of"):
            instances("skipchain", 1)


class TestGrid:
    def test_shapes_and_dtypes(self) -> None:
        spec = SyntheticSpec(rows=5, columns=7, labels=3)
        c = grid_crf(spec, 0)
        assert c.emissions.shape == (5, 7, 3) and c.emissions.dtype == torch.float64
        assert c.transitions.shape == (3, 3) and c.transitions.dtype == torch.float64
        assert c.gold.shape == (5, 7) and c.gold.dtype == torch.int64
        assert int(c.gold.min()) >= 0 and int(c.gold.max()) < 3
        assert torch.equal(c.transitions, spec.horizontal * torch.eye(3, dtype=torch.float64))

    def test_vertical_edges_reward_the_same_label(self) -> None:
        spec = SyntheticSpec(rows=6, columns=5, labels=3)
        c = grid_crf(spec, 1)
        assert c.patterns
        for p in c.patterns:
            (b1, t1, k1), (b2, t2, k2) = p.cells
            assert (b2, t2) == (b1 + 1, t1) and k1 == k2 and p.score == spec.vertical
        # Each edge whose evidence says "agree" carries all K same-label patterns.
        edges: dict[tuple[int, int], int] = {}
        for p in c.patterns:
            edges[p.cells[0][:2]] = edges.get(p.cells[0][:2], 0) + 1
        assert set(edges.values()) == {3} and len(edges) <= 5 * 5

    def test_table_noise_fills_every_entry(self) -> None:
        c = grid_crf(SyntheticSpec(rows=4, columns=3, labels=2, table_noise=0.3), 0)
        assert len(c.patterns) == 3 * 3 * 4  # 3 x 3 vertical edges, K ** 2 entries each
        assert any(p.score < 0 for p in c.patterns)

    def test_flip_zero_couples_exactly_where_gold_agrees(self) -> None:
        c = grid_crf(SyntheticSpec(rows=8, columns=8, flip=0.0), 3)
        coupled = {p.cells[0][:2] for p in c.patterns}
        gold = c.gold
        agree = {(b, t) for b in range(7) for t in range(8) if gold[b, t] == gold[b + 1, t]}
        assert coupled == agree

    def test_seeded(self) -> None:
        spec = SyntheticSpec(rows=6, columns=6)
        assert _same(grid_crf(spec, 4), grid_crf(spec, 4))
        assert not _same(grid_crf(spec, 4), grid_crf(spec, 5))
        assert all(
            _same(a, grid_crf(spec, 7 + i))
            for i, a in enumerate(instances("grid2d", 3, spec, seed=7))
        )


class TestThreewise:
    def test_the_grid_of_the_same_seed_plus_uniform_triples(self) -> None:
        spec = SyntheticSpec(rows=5, columns=6, labels=3)
        grid, three = grid_crf(spec, 2), threewise_crf(spec, 2)
        assert torch.equal(grid.emissions, three.emissions) and torch.equal(grid.gold, three.gold)
        n = len(grid.patterns)
        assert three.patterns[:n] == grid.patterns
        triples = three.patterns[n:]
        assert triples and all(len(p.cells) == 3 and p.score == spec.triple for p in triples)
        for p in triples:
            (b0, t0, k0), (b1, t1, k1), (b2, t2, k2) = p.cells
            step = (b1 - b0, t1 - t0)
            assert step in {(0, 1), (1, 0)} and (b2 - b1, t2 - t1) == step
            assert k0 == k1 == k2

    @pytest.mark.parametrize(("direction", "step"), [("rows", (0, 1)), ("columns", (1, 0))])
    def test_one_direction(self, direction: str, step: tuple[int, int]) -> None:
        spec = SyntheticSpec(rows=5, columns=5, triples=(direction,), flip=0.5)
        c = threewise_crf(spec, 0)
        triples = [p for p in c.patterns if len(p.cells) == 3]
        assert triples
        assert {
            (p.cells[1][0] - p.cells[0][0], p.cells[1][1] - p.cells[0][1]) for p in triples
        } == {step}

    def test_noise_keeps_only_non_zero_entries(self) -> None:
        spec = SyntheticSpec(rows=4, columns=5, labels=2, table_noise=0.5, noise_density=0.3)
        c = threewise_crf(spec, 0)
        triples = [p for p in c.patterns if len(p.cells) == 3]
        assert all(p.score != 0.0 for p in c.patterns)
        assert any(p.score < 0 for p in triples)
        per_triple: dict[tuple[tuple[int, int], ...], int] = {}
        for p in triples:
            per_triple[p.tokens] = per_triple.get(p.tokens, 0) + 1
        assert max(per_triple.values()) <= 2**3 and min(per_triple.values()) < 2**3

    def test_seeded(self) -> None:
        spec = SyntheticSpec(rows=5, columns=5)
        assert _same(threewise_crf(spec, 1), threewise_crf(spec, 1))
        assert not _same(threewise_crf(spec, 1), threewise_crf(spec, 2))


class TestPlanted:
    @pytest.mark.parametrize("model", ["grid2d", "threewise"])
    def test_patterns_are_valid_and_decodable(self, model: str) -> None:
        spec = SyntheticSpec(rows=4, columns=5, labels=3, table_noise=0.2)
        for c in instances(model, 2, spec):
            r = decode(
                c.emissions,
                c.transitions,
                patterns=c.patterns,
                method="dd2slave",
                max_iterations=20,
            )
            assert r.tags.shape == (4, 5)

    @pytest.mark.parametrize("model", ["grid2d", "threewise"])
    def test_the_planted_labelling_scores_well(self, model: str) -> None:
        rng = np.random.default_rng(0)
        for c in instances(model, 5, SyntheticSpec(rows=8, columns=8)):
            planted = c.score(c.gold)
            assert planted > c.score(torch.zeros_like(c.gold))  # all background
            noisy = [c.score(torch.from_numpy(rng.integers(0, 2, size=(8, 8)))) for _ in range(20)]
            assert planted > max(noisy)

    @pytest.mark.parametrize("model", ["grid2d", "threewise"])
    def test_exact_decoding_finds_more_of_it_than_the_rows_alone(self, model: str) -> None:
        cases = instances(model, 10, SyntheticSpec(rows=8, columns=8, blocks=4))
        f = {}
        for method in ("viterbi", "ilp"):
            f[method] = f_score(
                f_counts(
                    decode(c.emissions, c.transitions, patterns=c.patterns, method=method).tags,
                    c.gold,
                )
                for c in cases
            )
        assert f["ilp"] > f["viterbi"] + 0.02, f


class TestF:
    def test_counts_and_score(self) -> None:
        gold = torch.tensor([[0, 1, 1, 2], [0, 0, 2, 2]])
        tags = torch.tensor([[1, 1, 0, 2], [0, 0, 1, 2]])
        # correct: (0,1), (0,3), (1,3); predicted non-background 5; gold non-background 5.
        assert f_counts(tags, gold) == (3, 5, 5)
        assert f_score([(3, 5, 5), (1, 1, 3)]) == pytest.approx(2 * 4 / (6 + 8))
        assert f_score([(0, 0, 0)]) == 0.0

    def test_shapes_must_match(self) -> None:
        with pytest.raises(ValueError, match=r"tags \(2, 3\) and gold \(3, 2\) differ in shape"):
            f_counts(torch.zeros(2, 3, dtype=torch.long), torch.zeros(3, 2, dtype=torch.long))


@pytest.fixture(scope="module", params=["grid2d", "threewise"])
def tiny(request: pytest.FixtureRequest) -> tuple[list[Instance], Comparison]:
    model = str(request.param)
    cases = instances(model, 3, TINY, seed=11)
    return cases, anytime(cases, model, budgets=(1, 3, 30))


class TestAnytime:
    def test_the_ilp_point_is_the_brute_force_optimum(
        self, tiny: tuple[list[Instance], Comparison]
    ) -> None:
        cases, comparison = tiny
        ilp = comparison.point("ilp")
        for c, optimum, primal in zip(cases, comparison.optima, ilp.primals, strict=True):
            zeros = torch.zeros(TINY.labels, dtype=torch.float64)
            best = best_labelling(
                c.emissions,
                c.transitions,
                zeros,
                zeros,
                torch.ones(3, 4, dtype=torch.bool),
                c.patterns,
            )
            assert optimum == pytest.approx(best.score, abs=1e-9)
            assert primal == optimum
        assert ilp.certified == 1.0 and ilp.dual_gap == pytest.approx(0.0, abs=1e-9)

    def test_bounds_labellings_and_certificates(
        self, tiny: tuple[list[Instance], Comparison]
    ) -> None:
        _, comparison = tiny
        for p in comparison.points:
            assert p.iterations <= p.budget
            for primal, dual, optimum in zip(p.primals, p.duals, comparison.optima, strict=True):
                assert primal <= optimum + 1e-9
                assert dual >= optimum - 1e-9
            assert p.dual_gap >= -1e-9 and p.primal_gap >= -1e-9
            if p.certified == 1.0:
                assert p.primal_gap == pytest.approx(0.0, abs=1e-9)

    def test_every_budget_is_a_run(self, tiny: tuple[list[Instance], Comparison]) -> None:
        cases, comparison = tiny
        assert [p.method for p in comparison.points[:2]] == ["ilp", "viterbi"]
        for method in DD_METHODS:
            assert [p.budget for p in comparison.curve(method)] == [1, 3, 30]
            again = [
                decode(
                    c.emissions, c.transitions, patterns=c.patterns, method=method, max_iterations=3
                )
                for c in cases
            ]
            assert comparison.point(method, 3).primals == tuple(r.primal for r in again)
        with pytest.raises(KeyError, match="no point for 'dd2slave' at budget 7"):
            comparison.point("dd2slave", 7)

    def test_the_table_and_the_plot(
        self, tiny: tuple[list[Instance], Comparison], tmp_path: Path
    ) -> None:
        _, comparison = tiny
        table = markdown_table([comparison, comparison], budget=30)
        rows = [line for line in table.splitlines() if line.startswith("| ")]
        assert len(rows) == 1 + 2 * 4 and all(row.count("|") == 9 for row in rows)
        png = plot_anytime(comparison, tmp_path / "sub" / "curve.png")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    def test_refuses_no_instances_and_bad_budgets(self) -> None:
        with pytest.raises(ValueError, match="at least one instance"):
            anytime([])
        with pytest.raises(ValueError, match="budgets must be >= 1"):
            anytime(instances("grid2d", 1, TINY), budgets=(0, 5))


def test_the_quick_script_writes_the_table_the_plots_and_the_record(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out-dir", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 2 * 4  # the header, then 2 models x 4 methods
    assert sum("ILP" in row and "| 1.00 |" in row for row in rows) == 2
    for name in ("grid2d.png", "threewise.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    record = json.loads((tmp_path / "synthetic.json").read_text())
    assert [c["model"] for c in record["comparisons"]] == ["grid2d", "threewise"]
