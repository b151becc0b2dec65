"""The cross-library agreement checks, on the outputs of the timed calls.

crfhead vs pytorch-crf: log-likelihood (:data:`RTOL` relative), emission gradients (:data:`ATOL`
absolute) and Viterbi paths (identical); crfhead vs torch-struct: log-partition and NLL (relative),
emission gradients and node marginals (absolute) and paths (identical). Every disagreement is
explained with the errors of both sides against a float64 reference (pytorch-crf's own code run
in float64), to tell which side is off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from torch import Tensor

RTOL = 1e-3
ATOL = 1e-3


@dataclass(frozen=True)
class Check:
    """One comparison of crfhead with an anchor library."""

    column: str  # the agreement table's column
    what: str  # the quantity, in the words of a disagreement
    anchor: str
    key: str  # the output compared, also the float64 reference's key
    kind: Literal["rel", "abs", "paths"]  # max relative / absolute error, or identical paths


CHECKS = (
    Check("llh rel (pytorch-crf)", "log-likelihood", "pytorch-crf", "nll", "rel"),
    Check("grad abs (pytorch-crf)", "emission grad", "pytorch-crf", "grad", "abs"),
    Check("paths = (pytorch-crf)", "Viterbi paths", "pytorch-crf", "paths", "paths"),
    Check("log Z rel (torch-struct)", "log Z", "torch-struct", "logz", "rel"),
    Check("NLL rel (torch-struct)", "NLL", "torch-struct", "nll", "rel"),
    Check("grad abs (torch-struct)", "emission grad", "torch-struct", "grad", "abs"),
    Check("marginals abs (torch-struct)", "marginals", "torch-struct", "marginals", "abs"),
    Check("paths = (torch-struct)", "Viterbi paths", "torch-struct", "paths", "paths"),
)
"""In the agreement table's column order."""


@dataclass
class Agreement:
    """Agreement of one case; ``problems`` lists every disagreement in words."""

    values: dict[str, float | str] = field(default_factory=dict)
    """By :attr:`Check.column`: the max error, or ``"identical/total"`` paths; absent if not run."""
    problems: list[str] = field(default_factory=list)


def max_rel(a: Tensor, b: Tensor) -> float:
    return float(((a - b).abs() / b.abs().clamp(min=1e-6)).max())


def max_abs(a: Tensor, b: Tensor) -> float:
    return float((a - b).abs().max())


def as_lists(paths: Tensor | list[list[int]]) -> list[list[int]]:
    """Paths as lists of tags with masked positions (-1) dropped."""
    if isinstance(paths, list):
        return paths
    return [[int(x) for x in row if x >= 0] for row in paths.cpu().tolist()]


def check_agreement(
    outputs: Mapping[str, Mapping[str, Any]],
    extra: Mapping[str, Mapping[str, Callable[[], Any]]],
    reference: Callable[[], dict[str, Any]],
) -> Agreement:
    """Run :data:`CHECKS` where both sides have the output; explain each disagreement.

    ``outputs[lib]`` holds the outputs of a library's timed calls; ``extra[lib]`` computes, on
    demand, the ones no timed call gives (crfhead's log Z); ``reference()`` is the float64 arbiter,
    computed at the first disagreement.
    """
    agr = Agreement()
    cache: dict[str, dict[str, Any]] = {}

    def get(lib: str, key: str) -> Any:
        x = outputs.get(lib, {}).get(key)
        if x is None and key in extra.get(lib, {}):
            x = extra[lib][key]()
        return x.cpu() if isinstance(x, Tensor) else x

    def truth(key: str) -> Any:
        if not cache:
            cache["ref"] = reference()
        return cache["ref"][key]

    for check in CHECKS:
        anchor = get(check.anchor, check.key)
        mine = None if anchor is None else get("crfhead", check.key)
        if mine is None:
            continue
        if check.kind == "paths":
            problem = compare_paths(check, as_lists(mine), as_lists(anchor), agr, truth)
        else:
            problem = compare_values(check, mine, anchor, agr, truth)
        if problem:
            agr.problems.append(problem)
    return agr


def compare_values(
    check: Check, mine: Tensor, anchor: Tensor, agr: Agreement, truth: Callable[[str], Any]
) -> str | None:
    err = max_rel if check.kind == "rel" else max_abs
    value = agr.values[check.column] = err(mine, anchor)
    if value > (RTOL if check.kind == "rel" else ATOL):
        ref = truth(check.key).float()
        return (
            f"{check.what} vs {check.anchor}: max {check.kind} err {value:.2e}"
            f"; error vs float64 reference: crfhead {err(mine, ref):.1e}, "
            f"{check.anchor} {err(anchor, ref):.1e}"
        )
    return None


def compare_paths(
    check: Check,
    mine: list[list[int]],
    anchor: list[list[int]],
    agr: Agreement,
    truth: Callable[[str], Any],
) -> str | None:
    rows = [i for i, (a, b) in enumerate(zip(mine, anchor, strict=True)) if a != b]
    agr.values[check.column] = f"{len(mine) - len(rows)}/{len(mine)}"
    if not rows:
        return None
    ref = truth(check.key)
    ours_ok = sum(mine[i] == ref[i] for i in rows)
    theirs_ok = sum(anchor[i] == ref[i] for i in rows)
    return (
        f"{check.what} vs {check.anchor}: {len(rows)} sequence(s) differ"
        f"; the float64 path is crfhead's in {ours_ok}/{len(rows)}, "
        f"{check.anchor}'s in {theirs_ok}/{len(rows)}"
    )
