"""The ops ``scripts/bench_chain.py`` gained beyond loss / decode / marginals, and their agreement.

A tiny CLI run of ``edge_marginals``, ``entropy``, ``topk``, ``sample`` and ``max_marginals`` must
agree across the libraries; the checks themselves must catch a broken output (so a run that
"agrees" means something); the float64 arbiter of those ops must equal brute-force enumeration. No
timings are asserted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from brute import enumerate_rows

pytest.importorskip("torchcrf")

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))  # the script's own ``bench`` package

from bench.agreement import Agreement, check_agreement  # noqa: E402
from bench.cases import Case, make_inputs  # noqa: E402
from bench.reference import chain_float64  # noqa: E402

NEW_OPS = ["edge_marginals", "entropy", "topk", "sample", "max_marginals"]
TINY = ["--sizes", "3,5,3", "--repeats", "1", "--warmup", "1", "--no-memory"]  # var: 5, 3, 3
NEW_COLUMNS = [
    "edge marg abs (torch-struct)",
    "entropy rel (torch-struct)",
    "top-k rel (torch-struct)",
    "samples valid (crfhead)",
    "max marg abs (crfhead-portable)",
]


def bench(tmp_path: Path, *flags: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "bench_chain.py"), *TINY, *flags],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def table(out: str, title: str) -> list[dict[str, str]]:
    """The rows of the markdown table under ``## {title}...``, by column name."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"## {title}"))
    head = [c.strip() for c in lines[start + 2].strip("|").split("|")]
    rows = []
    for line in lines[start + 4 :]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(head, (c.strip() for c in line.strip("|").split("|")), strict=True)))
    return rows


# --------------------------------------------------------------------------- the CLI
def test_new_ops_run_and_agree(tmp_path: Path) -> None:
    pytest.importorskip("torch_struct")
    out = bench(tmp_path, "--markdown", "--ops", *NEW_OPS)
    for op in NEW_OPS:
        rows = table(out, f"{op}:")
        assert [r["lengths"] for r in rows] == ["full", "var"], op
        for r in rows:
            assert r["crfhead ms"][0].isdigit() and r["crfhead-portable ms"][0].isdigit(), (op, r)
            assert r["pytorch-crf ms"] == "—", (op, r)
            anchor = "—" if op == "max_marginals" else r["torch-struct ms"]
            assert anchor == "—" or anchor[0].isdigit(), (op, r)
    for name in ("loss:", "decode:", "marginals:"):  # --ops leaves the other ops out
        assert f"## {name}" not in out
    agreement = table(out, "agreement")
    assert [c for c in agreement[0] if "(" in c] == NEW_COLUMNS  # only the new ops' checks
    for r in agreement:
        assert r["status"] == "ok", r
        assert r["samples valid (crfhead)"] == "30/30", r  # 10 samples x 3 chains
        for column in NEW_COLUMNS:
            assert r[column] != "—", (column, r)
    assert "All libraries agree on every case." in out


def test_refused_and_single_call_cells(tmp_path: Path) -> None:
    """``--max-gib 0``: torch-struct's top-k is predicted too big; ``--single-s 0``: one call each."""
    pytest.importorskip("torch_struct")
    out = bench(tmp_path, "--ops", "topk", "--max-gib", "0", "--single-s", "0", "--lengths", "full")
    assert "too big" in out
    assert "- not run: B=3 T=5 K=3 full torch-struct topk: predicted peak memory" in out
    assert "**" in out  # crfhead's cells: a single call
    assert "All libraries agree on every case." in out


# --------------------------------------------------------------------------- the checks
CASE = Case(3, 5, 3, variable=True)  # lengths 5, 3, 3


def good_outputs() -> tuple[dict[str, dict[str, torch.Tensor]], torch.Tensor]:
    """Outputs on which every new check passes: the float64 reference, in float32, on both sides."""
    inp = make_inputs(CASE, torch.device("cpu"))
    ref = {k: v.float() for k, v in chain_float64(inp).items()}
    samples = torch.zeros(10, CASE.B, CASE.T, dtype=torch.long)
    samples[:, ~inp.mask] = -1
    ours = {**ref, "samples": samples}
    theirs = {k: ref[k].clone() for k in ("edge_marginals", "entropy", "topk_scores")}
    return {
        "crfhead": ours,
        "crfhead-portable": {"max_marginals": ref["max_marginals"].clone()},
        "torch-struct": theirs,
    }, inp.mask


def check(outputs: dict[str, dict[str, torch.Tensor]], mask: torch.Tensor) -> Agreement:
    inp = make_inputs(CASE, torch.device("cpu"))
    return check_agreement(outputs, {}, lambda: chain_float64(inp), mask, CASE.K)


def test_the_good_outputs_agree() -> None:
    outputs, mask = good_outputs()
    agr = check(outputs, mask)
    assert agr.problems == []
    assert set(NEW_COLUMNS) <= set(agr.values)


@pytest.mark.parametrize(
    ("lib", "key", "where"),
    [
        ("torch-struct", "edge_marginals", (0, 1, 2, 0)),
        ("torch-struct", "entropy", (1,)),
        ("torch-struct", "topk_scores", (0, 4)),
        ("crfhead-portable", "max_marginals", (1, 0, 1)),
        ("crfhead", "edge_marginals", (1, 0, 0, 0)),
    ],
)
def test_a_broken_output_disagrees(lib: str, key: str, where: tuple[int, ...]) -> None:
    outputs, mask = good_outputs()
    outputs[lib][key][where] += 0.1
    agr = check(outputs, mask)
    assert len(agr.problems) == 1, agr.problems
    assert "float64 reference" in agr.problems[0]  # explained against the arbiter


def test_edge_marginals_compared_inside_sequences_only() -> None:
    outputs, mask = good_outputs()
    assert not bool(mask[1, -1])  # row 1 has length 3: its last two edges are outside
    outputs["torch-struct"]["edge_marginals"][1, -1] += 0.5
    assert check(outputs, mask).problems == []


def test_topk_scores_compared_sorted() -> None:
    outputs, mask = good_outputs()
    outputs["torch-struct"]["topk_scores"] = outputs["torch-struct"]["topk_scores"].flip(-1)
    assert check(outputs, mask).problems == []


@pytest.mark.parametrize("position", ["masked", "unmasked", "out of range"])
def test_an_invalid_sample_is_caught(position: str) -> None:
    outputs, mask = good_outputs()
    samples = outputs["crfhead"]["samples"]
    if position == "masked":
        samples[3, 1, -1] = 0  # row 1 has length 3
    elif position == "unmasked":
        samples[3, 0, 0] = -1
    else:
        samples[3, 0, 0] = CASE.K
    agr = check(outputs, mask)
    assert agr.values["samples valid (crfhead)"] == "29/30"
    assert agr.problems == [
        "samples: 1 of 30 sampled paths are not valid "
        "(tags in [0, 3) at unmasked positions, -1 exactly at masked ones)"
    ]


# --------------------------------------------------------------------------- the arbiter
@pytest.mark.parametrize("case", [Case(3, 5, 3, True), Case(2, 4, 4, False), Case(3, 6, 2, True)])
def test_reference_equals_brute_force(case: Case) -> None:
    inp = make_inputs(case, torch.device("cpu"))
    p = inp.params
    rows = enumerate_rows(
        inp.emissions, p["transitions"], p["start_transitions"], p["end_transitions"], inp.mask
    )
    ref = chain_float64(inp, k=5)
    for b, row in enumerate(rows):
        torch.testing.assert_close(ref["edge_marginals"][b], row.edge_marginals())
        torch.testing.assert_close(ref["max_marginals"][b], row.max_marginals())
        assert ref["entropy"][b].item() == pytest.approx(row.entropy(), abs=1e-9)
        best = row.sorted_scores()[:5]
        best += [float("-inf")] * (5 - len(best))
        torch.testing.assert_close(ref["topk_scores"][b], torch.tensor(best, dtype=torch.float64))
