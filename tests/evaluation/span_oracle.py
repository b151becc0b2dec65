"""The clamped-chain span probabilities as they were before issue 28: the test oracle of the windows.

A verbatim copy of ``crfhead.evaluation.spans._probabilities`` and its helpers at commit a59072c: one
full-length clamped chain per case of every span, all in one :func:`crfhead.engine.log_partition`
call (quadratic in the text length). :func:`old_span_probabilities_from` is the public entry point it
had, :func:`crfhead.evaluation.spans.span_probabilities_from`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from crfhead import engine
from crfhead.engine.potentials import ChainPotentials
from crfhead.numerics import IMPOSSIBLE
from crfhead.schemes import Span, canonical_scheme, split_label

__all__ = ["old_span_probabilities_from"]

# The cases of the module docstring, as role sets.
_OPENS_ALONE = frozenset("BS")  # a begin/single tag opens an entity whatever precedes it
_OPENS_AFTER = frozenset("IE")  # an inside/end tag opens one only if no same-type entity is open
_CLOSES_ALONE = frozenset("ES")  # an end/single tag closes its entity whatever follows
_CLOSES_BEFORE = frozenset("BI")  # a begin/inside tag closes only if the next tag does not continue
_KEEPS_OPEN = frozenset("BI")  # after B-X / I-X an X entity is open
_CONTINUES = frozenset("IE")  # I-X / E-X continue an open X entity (no new entity opens)
_NOT_CLOSING = frozenset("BI")  # roles allowed at the first of several span positions
_NOT_OPENING = frozenset("IE")  # roles allowed at the last of several span positions
_INSIDE = frozenset("I")  # roles allowed strictly inside the span

_Clamp = tuple[int, int]  # (time index, id of a tag-set vector)


class _TagSets:
    """Interned ``(K,)`` bool tag-set vectors: the tags of one type with (or without) given roles."""

    def __init__(self, parsed: Sequence[tuple[str, str | None]]) -> None:
        self.parsed = parsed
        self.vectors: list[list[bool]] = []
        self.nonempty: list[bool] = []
        self._ids: dict[tuple[str, frozenset[str], bool], int] = {}

    def get(self, typ: str, roles: frozenset[str], complement: bool = False) -> int:
        """Id of the vector of tags ``<role>-typ`` with ``role`` in ``roles`` (or of all other tags)."""
        key = (typ, roles, complement)
        if key not in self._ids:
            vec = [(t == typ and r in roles) != complement for r, t in self.parsed]
            self._ids[key] = len(self.vectors)
            self.vectors.append(vec)
            self.nonempty.append(any(vec))
        return self._ids[key]


def _span_cases(span: Span, times: Sequence[int], sets: _TagSets) -> list[list[_Clamp]]:
    """The disjoint clamped chains of one span: for each, its ``(time, tag set)`` clamps.

    Cases whose clamp keeps no tag at some position (a role the label list lacks) hold no path and
    are dropped.
    """
    X, s, e, n = span.label, span.start, span.end, len(times)
    cases: list[list[_Clamp]] = []
    for open_roles, bound_prev in ((_OPENS_ALONE, False), (_OPENS_AFTER, True)):
        for close_roles, bound_next in ((_CLOSES_ALONE, False), (_CLOSES_BEFORE, True)):
            if s == e:
                clamps = [(times[s], sets.get(X, open_roles & close_roles))]
            else:
                clamps = [(times[s], sets.get(X, open_roles & _NOT_CLOSING))]
                clamps += [(times[t], sets.get(X, _INSIDE)) for t in range(s + 1, e)]
                clamps.append((times[e], sets.get(X, close_roles & _NOT_OPENING)))
            if bound_prev and s > 0:
                clamps.append((times[s - 1], sets.get(X, _KEEPS_OPEN, complement=True)))
            if bound_next and e < n - 1:
                clamps.append((times[e + 1], sets.get(X, _CONTINUES, complement=True)))
            if all(sets.nonempty[v] for _, v in clamps):
                cases.append(clamps)
    return cases


def _probabilities(
    pot: ChainPotentials,
    spans: Sequence[Sequence[Span]],
    parsed: Sequence[tuple[str, str | None]],
) -> list[list[float]]:
    """Span probabilities for validated potentials (see :func:`span_probabilities`)."""
    B, T, K = pot.shape
    if len(spans) != B:
        raise ValueError(f"got span lists for {len(spans)} sequences, but the batch has {B}")
    types = {typ for _, typ in parsed if typ is not None}
    rows_on = pot.mask.tolist()
    sets = _TagSets(parsed)
    row_batch: list[int] = []  # (R,) sentence of each clamped chain
    row_span: list[int] = []  # (R,) flat index of its span
    clamp_row: list[int] = []
    clamp_time: list[int] = []
    clamp_set: list[int] = []
    counts: list[int] = []
    for b, row_spans in enumerate(spans):
        times = [t for t, on in enumerate(rows_on[b]) if on]
        n = len(times)
        for span in row_spans:
            if span.label not in types:
                raise ValueError(
                    f"span {span!r} of sequence {b} has type {span.label!r}, which is not an entity "
                    f"type of the labels (types: {sorted(types)})"
                )
            if not 0 <= span.start <= span.end < n:
                raise ValueError(
                    f"span {span!r} of sequence {b} is out of range: positions are word indices "
                    f"0..{n - 1} into the {n} unmasked positions, with start <= end"
                )
            for clamps in _span_cases(span, times, sets):
                for t, v in clamps:
                    clamp_row.append(len(row_batch))
                    clamp_time.append(t)
                    clamp_set.append(v)
                row_batch.append(b)
                row_span.append(len(counts))
            counts.append(0)
    num_spans = len(counts)
    if num_spans == 0:
        return [[] for _ in spans]
    device = pot.emissions.device
    totals = pot.emissions.new_zeros(num_spans)
    if row_batch:
        R = len(row_batch)
        idx = torch.tensor(row_batch, device=device)
        keep = torch.ones(R, T, K, dtype=torch.bool, device=device)
        table = torch.tensor(sets.vectors, dtype=torch.bool, device=device).reshape(-1, K)
        keep[torch.tensor(clamp_row, device=device), torch.tensor(clamp_time, device=device)] = (
            table[torch.tensor(clamp_set, device=device)]
        )
        clamped = torch.where(keep, pot.emissions[idx], pot.emissions.new_tensor(IMPOSSIBLE))
        transitions = pot.transitions
        if pot.per_position:
            transitions = torch.cat([transitions, transitions[idx]])
        # One chain per sentence (its log Z) and one per case of every span, in one call.
        stacked = ChainPotentials(
            emissions=torch.cat([pot.emissions, clamped]),
            transitions=transitions,
            start=pot.start,
            end=pot.end,
            mask=torch.cat([pot.mask, pot.mask[idx]]),
        )
        log_z = engine.log_partition(stacked)  # (B + R,)
        whole = log_z[:B][idx]  # a sentence with no valid path has no span of any probability
        ratios = torch.where(
            whole > float("-inf"), log_z[B:] - whole, float("-inf")
        ).exp()  # Z_c / Z
        totals = totals.index_add(0, torch.tensor(row_span, device=device), ratios)
    flat = totals.clamp(0.0, 1.0).tolist()
    out: list[list[float]] = []
    offset = 0
    for row_spans in spans:
        out.append(flat[offset : offset + len(row_spans)])
        offset += len(row_spans)
    return out


def old_span_probabilities_from(
    pot: ChainPotentials,
    spans: Sequence[Sequence[Span]],
    labels: Sequence[str],
    scheme: str,
) -> list[list[float]]:
    """The old ``span_probabilities_from``: ``B`` lists of span probabilities by clamped chains."""
    if len(labels) != pot.shape[2]:
        raise ValueError(f"got {len(labels)} labels for potentials of K={pot.shape[2]} tags")
    parsed = [split_label(label, canonical_scheme(scheme)) for label in labels]
    with torch.no_grad():
        return _probabilities(pot, spans, parsed)
