"""The cross-library agreement checks, on the outputs of the timed calls.

crfhead vs pytorch-crf: log-likelihood (:data:`RTOL` relative), emission gradients (:data:`ATOL`
absolute) and Viterbi paths (identical); crfhead vs torch-struct: log-partition, NLL, entropy and
the sorted top-k scores (relative), emission gradients, node marginals and edge marginals (absolute,
the edge marginals at the edges inside each sequence) and paths (identical); crfhead vs
crfhead-portable: max-marginals (absolute, no anchor has them). crfhead's samples are checked for
validity alone (tags in ``[0, K)`` at unmasked positions, -1 exactly at masked ones): samples are
random. Every disagreement is explained with the errors of both sides against a float64 reference
(pytorch-crf's own code run in float64, and :mod:`bench.reference` for the ops it lacks), to tell
which side is off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
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
    kind: Literal["rel", "abs", "paths", "valid"]
    """Max relative / absolute error, identical paths, or (crfhead alone) valid sampled paths."""
    op: str  # the op whose timed call gives the output (a column shows only if the op ran)
    select: Callable[[Tensor, Tensor], Tensor] | None = None
    """``select(output, mask)``: the part compared, applied to both sides and the reference."""


def inside_edges(edges: Tensor, mask: Tensor) -> Tensor:
    """``(B, T-1, K, K)`` edge marginals -> ``(E, K, K)``, the edges whose head is unmasked."""
    return edges[mask[:, 1:]]


def sorted_desc(scores: Tensor, mask: Tensor) -> Tensor:
    """``(B, k)`` path scores, largest first in each row."""
    return scores.sort(-1, descending=True).values


CHECKS = (
    Check("llh rel (pytorch-crf)", "log-likelihood", "pytorch-crf", "nll", "rel", "loss"),
    Check("grad abs (pytorch-crf)", "emission grad", "pytorch-crf", "grad", "abs", "loss"),
    Check("paths = (pytorch-crf)", "Viterbi paths", "pytorch-crf", "paths", "paths", "decode"),
    Check("log Z rel (torch-struct)", "log Z", "torch-struct", "logz", "rel", "loss"),
    Check("NLL rel (torch-struct)", "NLL", "torch-struct", "nll", "rel", "loss"),
    Check("grad abs (torch-struct)", "emission grad", "torch-struct", "grad", "abs", "loss"),
    Check("paths = (torch-struct)", "Viterbi paths", "torch-struct", "paths", "paths", "decode"),
    Check(
        "marginals abs (torch-struct)", "marginals", "torch-struct", "marginals", "abs", "marginals"
    ),
    Check(
        "edge marg abs (torch-struct)",
        "edge marginals",
        "torch-struct",
        "edge_marginals",
        "abs",
        "edge_marginals",
        inside_edges,
    ),
    Check("entropy rel (torch-struct)", "entropy", "torch-struct", "entropy", "rel", "entropy"),
    Check(
        "top-k rel (torch-struct)",
        "top-k scores",
        "torch-struct",
        "topk_scores",
        "rel",
        "topk",
        sorted_desc,
    ),
    Check("samples valid (crfhead)", "samples", "crfhead", "samples", "valid", "sample"),
    Check(
        "max marg abs (crfhead-portable)",
        "max-marginals",
        "crfhead-portable",
        "max_marginals",
        "abs",
        "max_marginals",
    ),
)
"""In the agreement table's column order."""


@dataclass
class Agreement:
    """Agreement of one case; ``problems`` lists every disagreement in words."""

    values: dict[str, float | str] = field(default_factory=dict)
    """By :attr:`Check.column`: the max error, or ``"identical/total"`` paths; absent if not run."""
    problems: list[str] = field(default_factory=list)


def diff(a: Tensor, b: Tensor) -> Tensor:
    """``|a - b|``, 0 where equal (also equal infinities: a top-k's missing paths are ``-inf``)."""
    return torch.where(a == b, 0.0, (a - b).abs())


def max_rel(a: Tensor, b: Tensor) -> float:
    return float((diff(a, b) / b.abs().clamp(min=1e-6)).max())


def max_abs(a: Tensor, b: Tensor) -> float:
    return float(diff(a, b).max())


def as_lists(paths: Tensor | list[list[int]]) -> list[list[int]]:
    """Paths as lists of tags with masked positions (-1) dropped."""
    if isinstance(paths, list):
        return paths
    return [[int(x) for x in row if x >= 0] for row in paths.cpu().tolist()]


def check_agreement(
    outputs: Mapping[str, Mapping[str, Any]],
    extra: Mapping[str, Mapping[str, Callable[[], Any]]],
    reference: Callable[[], dict[str, Any]],
    mask: Tensor,
    num_tags: int,
) -> Agreement:
    """Run :data:`CHECKS` where both sides have the output; explain each disagreement.

    ``outputs[lib]`` holds the outputs of a library's timed calls; ``extra[lib]`` computes, on
    demand, the ones no timed call gives (crfhead's log Z); ``reference()`` is the float64 arbiter,
    computed at the first disagreement; ``mask`` ``(B, T)`` and ``num_tags`` are the case's.
    """
    mask = mask.cpu()
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
        if check.kind == "valid":
            problem = check_samples(check, mine, mask, num_tags, agr)
        elif check.kind == "paths":
            problem = compare_paths(check, as_lists(mine), as_lists(anchor), agr, truth)
        else:
            problem = compare_values(check, mine, anchor, agr, truth, mask)
        if problem:
            agr.problems.append(problem)
    return agr


def compare_values(
    check: Check,
    mine: Tensor,
    anchor: Tensor,
    agr: Agreement,
    truth: Callable[[str], Any],
    mask: Tensor,
) -> str | None:
    select = check.select or (lambda x, _: x)
    mine, anchor = select(mine, mask), select(anchor, mask)
    err = max_rel if check.kind == "rel" else max_abs
    value = agr.values[check.column] = err(mine, anchor)
    if value > (RTOL if check.kind == "rel" else ATOL):
        ref = select(truth(check.key), mask).float()
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


def check_samples(
    check: Check, samples: Tensor, mask: Tensor, num_tags: int, agr: Agreement
) -> str | None:
    """Sampled paths ``(S, B, T)``: tags in ``[0, K)`` where unmasked, -1 exactly where masked."""
    expected_missing = ~mask.expand_as(samples)
    ok = torch.where(expected_missing, samples == -1, (samples >= 0) & (samples < num_tags))
    valid = ok.all(-1)
    agr.values[check.column] = f"{int(valid.sum())}/{valid.numel()}"
    if bool(valid.all()):
        return None
    return (
        f"{check.what}: {int((~valid).sum())} of {valid.numel()} sampled paths are not valid "
        f"(tags in [0, {num_tags}) at unmasked positions, -1 exactly at masked ones)"
    )
