"""Exact span confidences: the posterior probability that an entity span is one of the path's entities.

For a span ``(type X, start s, end e)`` over the unmasked positions of a sentence, the confidence is the
marginal ``P(span) = sum_z p(z | x) [span in tags_to_spans(z)]`` under the CRF's distribution, not a
softmax of scores. It is a ratio of partition functions of clamped chains:

    P(span) = sum_c Z_c(x) / Z(x) = sum_c exp(log Z_c - log Z)

where each clamped chain ``c`` keeps, at the span's positions and at the unmasked positions just before
and after it, only the tags of one case below (the cases are disjoint and their union is exactly the set
of paths whose lenient reading, :func:`crfhead.schemes.tags_to_spans`, contains the span).

**The clamping rules.** :func:`~crfhead.schemes.tags_to_spans` reads every scheme with the same roles
(``B`` begin, ``I`` inside, ``E`` end, ``S`` single; BIOUL's ``L``/``U`` are ``E``/``S``), leniently,
so the conditions hold for invalid paths of an unconstrained CRF too. After a tag the open entity is
``X`` exactly when the tag is ``B-X`` or ``I-X``; a tag continues an open ``X`` entity exactly when it
is ``I-X`` or ``E-X``. Hence ``(X, s, e)`` is an entity of ``z`` if and only if

* inside: ``z_s`` has type ``X`` and, when ``s < e``, role ``B`` or ``I``; ``z_t = I-X`` for
  ``s < t < e``; ``z_e`` is ``I-X`` or ``E-X`` when ``s < e``;
* it opens at ``s``: ``z_s`` is ``B-X`` / ``S-X`` (whatever precedes), *or* ``z_s`` is ``I-X`` /
  ``E-X`` and the previous unmasked tag is not ``B-X`` / ``I-X`` (or there is none);
* it closes at ``e``: ``z_e`` is ``E-X`` / ``S-X`` (whatever follows), *or* ``z_e`` is ``B-X`` /
  ``I-X`` and the next unmasked tag is not ``I-X`` / ``E-X`` (or there is none).

The two "or"s are pairwise conditions; splitting each into its two role cases makes every case a
product of per-position tag sets (an emission clamp): up to 4 chains per span, fewer when the label list
lacks a role (IO: 1 chain, ``z_s..z_e = I-X`` with neither neighbour ``I-X``; BIO and IOB1: 2 chains,
``B-X`` at ``s`` or ``I-X`` at ``s`` after a non-``B-X``/``I-X`` tag, ``I-X`` inside, next tag not
``I-X``; BIOES/BIOUL: 4 chains, ``B..I..E`` and ``S`` being the ones a constrained CRF keeps).

Span positions are *word indices*: indices into the unmasked positions of a row (``0 .. n-1`` for a row
with ``n`` unmasked positions), as :func:`~crfhead.schemes.tags_to_spans` reports them on the
unmasked tags; masks may have holes, and the neighbours above are the previous/next *unmasked* positions.

A case that the potentials' forbidden (``-inf``) transitions, starts or ends leave without a path
(with BIO constraints, ``I-X`` opening after a tag other than ``B-X``/``I-X``) is dropped first.

**How ``Z_c`` is computed.** A case clamps consecutive words ``a..b`` only (``s-1`` or ``s`` to ``e`` or
``e+1``), so ``Z_c`` needs the chain outside them only through the forward message at ``a`` and the
backward message at ``b``. One forward-backward per sentence (:func:`crfhead.engine.messages.messages`,
float64 on the CPU) gives every message; then each case is the forward message at ``a`` restricted to
its tags, a recursion through ``a+1..b`` with the clamps, closed by the backward message at ``b``, over
the same recursion without clamps (:func:`~crfhead.engine.messages.clamped_ratios`): ``O((e - s + 3)
K^2)`` a case, all cases of a batch together. A 20,000-word document with 2,000 spans takes about a
second and tens of MiB, where one full-length clamped chain per case needed tens of GiB.

**Short sentences** (a batch whose longest row has at most :data:`CLAMPED_UP_TO` words, what
tagging sentence by sentence gives) take the other exact route, whose cost per case is bounded by
that length: one full clamped chain per case, all of them and the sentences' own chains in one
log-partition call on the engine's backend (the fused kernel on the CPU), which for short chains
is several times faster than the forward-backward's Python steps.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import torch
from torch import Tensor

from crfhead import engine
from crfhead.engine.messages import clamped_ratios, messages, words
from crfhead.engine.potentials import ChainPotentials
from crfhead.heads.base import ChainHead
from crfhead.numerics import IMPOSSIBLE
from crfhead.schemes import Span, canonical_scheme, split_label
from crfhead.tensors import long_tensor

__all__ = ["CLAMPED_UP_TO", "span_probabilities", "span_probabilities_from"]

CLAMPED_UP_TO = 64
"""Batches whose longest row has at most this many words compute ``Z_c`` as whole clamped chains."""

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
_Case = tuple[int, tuple[int, ...], tuple[int, ...]]
"""A case's clamps relative to its first clamped word: last word less first, offsets, tag-set ids."""


class _TagSets:
    """Interned ``(K,)`` bool tag-set vectors: the tags of one type with (or without) given roles."""

    def __init__(self, parsed: Sequence[tuple[str, str | None]]) -> None:
        self.parsed = parsed
        self.vectors: list[list[bool]] = []
        self.nonempty: list[bool] = []
        self._ids: dict[tuple[str, frozenset[str], bool], int] = {}
        self.shapes: dict[tuple[str, int, bool, bool], list[tuple[int, _Case]]] = {}
        """:func:`_cases_of`'s memo."""
        self.possible: dict[tuple[bytes, tuple[str, int, bool, bool]], list[tuple[int, _Case]]] = {}
        """:func:`_cases_of`'s memo of the cases a :class:`_Structure` leaves."""

    def get(self, typ: str, roles: frozenset[str], complement: bool = False) -> int:
        """Id of the vector of tags ``<role>-typ`` with ``role`` in ``roles`` (or of all other tags)."""
        key = (typ, roles, complement)
        if key not in self._ids:
            vec = [(t == typ and r in roles) != complement for r, t in self.parsed]
            self._ids[key] = len(self.vectors)
            self.vectors.append(vec)
            self.nonempty.append(any(vec))
        return self._ids[key]


@functools.lru_cache(maxsize=32)
def _tag_sets(parsed: tuple[tuple[str, str | None], ...]) -> _TagSets:
    """The interned tag sets of a label list, kept across calls (tagging reuses one label list)."""
    return _TagSets(parsed)


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


class _Cases:
    """The clamped windows of a batch's spans, as :func:`~crfhead.engine.messages.clamped_ratios` takes them."""

    def __init__(self) -> None:
        self.row: list[int] = []  # (C,) sentence of each case
        self.span: list[int] = []  # (C,) flat index of its span
        self.first: list[int] = []  # (C,) first clamped word (a)
        self.length: list[int] = []  # (C,) last clamped word less the first (b - a)
        self.clamp_case: list[int] = []
        self.clamp_offset: list[int] = []
        self.clamp_set: list[int] = []

    def add(self, row: int, span: int, first: int, case: _Case) -> None:
        """One case of span ``span`` whose first clamped word is ``first``."""
        length, offsets, sets = case
        self.clamp_case.extend([len(self.row)] * len(offsets))
        self.clamp_offset.extend(offsets)
        self.clamp_set.extend(sets)
        self.row.append(row)
        self.span.append(span)
        self.first.append(first)
        self.length.append(length)


def _relative(clamps: Sequence[_Clamp]) -> tuple[int, _Case]:
    """A case's first clamped word and its clamps relative to it."""
    first = min(word for word, _ in clamps)
    return first, (
        max(word for word, _ in clamps) - first,
        tuple(word - first for word, _ in clamps),
        tuple(v for _, v in clamps),
    )


class _Structure:
    """Which transitions, first tags and last tags shared-transition potentials allow (``> -inf``).

    A case none of whose paths the structure allows, whatever the emissions (two adjacent clamped
    words with no allowed transition between their tag sets; a clamp at the sentence's first word
    none of whose tags may start it, or at its last word none of whose tags may end it), has
    ``Z_c = 0`` exactly, so it is dropped before any chain is built: with a constrained head that
    is one of BIO's two cases per span (``I-X`` opening after a tag that is not ``B-X``/``I-X``).
    """

    def __init__(self, key: bytes, K: int) -> None:
        ok = [bool(x) for x in key]  # (K K + 2 K,): the transitions, then the first and last tags
        self.key = key
        self.allowed: list[list[bool]] = [ok[a * K : (a + 1) * K] for a in range(K)]
        self.first: list[bool] = ok[K * K : K * K + K]
        self.last: list[bool] = ok[K * K + K :]

    @staticmethod
    def of(pot: ChainPotentials) -> _Structure | None:
        """The structure of ``pot``; None for per-edge transitions or when nothing is forbidden."""
        if pot.per_position:
            return None
        ok = torch.cat([pot.transitions.reshape(-1), pot.start, pot.end]) > IMPOSSIBLE
        if bool(ok.all()):
            return None
        return _structure(ok.cpu().numpy().tobytes(), pot.shape[2])

    def allows(
        self, case: _Case, vectors: Sequence[Sequence[bool]], first: bool, last: bool
    ) -> bool:
        """Whether some path of ``case`` has no forbidden transition, start or end.

        ``first`` / ``last``: the case's first / last clamped word is the sentence's first / last.
        """
        length, offsets, ids = case
        at = {o: vectors[v] for o, v in zip(offsets, ids, strict=True)}
        for o, tags in at.items():
            after = at.get(o + 1)
            if after is not None and not any(
                tags[a] and after[b] and self.allowed[a][b]
                for a in range(len(tags))
                for b in range(len(after))
            ):
                return False
        if first and not any(t and ok for t, ok in zip(at[0], self.first, strict=True)):
            return False
        return not (last and not any(t and ok for t, ok in zip(at[length], self.last, strict=True)))


@functools.lru_cache(maxsize=32)
def _structure(key: bytes, K: int) -> _Structure:
    """The :class:`_Structure` of an allowed-pattern key, kept across calls (one per head)."""
    return _Structure(key, K)


def _cases_of(
    span: Span, n: int, sets: _TagSets, structure: _Structure | None = None
) -> list[tuple[int, _Case]]:
    """:func:`_span_cases` as ``(first clamped word, relative case)`` pairs, memoised.

    The cases depend on the span's position only through its type, its length and whether a word
    precedes and follows it, so they are built once per such shape (with the span at word 0 or 1 of a
    row just long enough) and shifted. With a ``structure``, the cases it forbids are left out (a
    case clamps the sentence's first word exactly when nothing precedes the span, its last word
    when nothing follows it).
    """
    before, after = span.start > 0, span.end < n - 1
    key = (span.label, span.end - span.start, before, after)
    shape = sets.shapes.get(key)
    if shape is None:
        s0 = int(before)
        e0 = s0 + span.end - span.start
        at = Span(span.label, s0, e0)
        shape = sets.shapes[key] = [
            _relative(c) for c in _span_cases(at, range(e0 + 1 + after), sets)
        ]
    if structure is not None:
        memo = (structure.key, key)
        kept = sets.possible.get(memo)
        if kept is None:
            kept = sets.possible[memo] = [
                (first, case)
                for first, case in shape
                if structure.allows(case, sets.vectors, not before, not after)
            ]
        shape = kept
    shift = span.start - int(before)
    return [(first + shift, case) for first, case in shape]


def _window_ratios(pot: ChainPotentials, cases: _Cases, table: Tensor) -> Tensor:
    """``(C,)`` float64 ``Z_c / Z`` of every case, from one forward-backward of each sentence.

    The messages and windows are computed in float64 on the CPU whatever the potentials' dtype and
    device: the results are Python floats, float64 keeps ratios of tiny sums exact, and the blocked
    scan's few hundred small steps run faster there than as accelerator kernel launches.
    """
    emissions, transitions, start, end = (
        x.to(device="cpu", dtype=torch.float64) for x in pot.chain[:4]
    )
    chain = words(ChainPotentials(emissions, transitions, start, end, pot.mask.cpu()))
    alpha, beta = messages(chain)
    return clamped_ratios(
        chain,
        alpha,
        beta,
        long_tensor(cases.row),
        long_tensor(cases.first),
        long_tensor(cases.length),
        (
            long_tensor(cases.clamp_case),
            long_tensor(cases.clamp_offset),
            table[long_tensor(cases.clamp_set)],
        ),
    )


def _chain_ratios(pot: ChainPotentials, cases: _Cases, table: Tensor) -> Tensor:
    """``(C,)`` float64 ``Z_c / Z`` of every case as whole clamped chains, all in the same calls.

    Each case is the sentence's chain with its clamps applied to the emissions (a tag outside the
    clamp's set is :data:`~crfhead.numerics.IMPOSSIBLE`); the sentences' chains ride in the same
    call for ``Z``, in float64 (as the windows: a ratio of two float32 partition functions of
    large scores loses digits). A sentence with no valid path gives ratio 0.
    """
    B = pot.shape[0]
    device = pot.emissions.device
    emissions, transitions, start, end = (x.to(torch.float64) for x in pot.chain[:4])
    rows = long_tensor(cases.row, device)
    case_of = long_tensor(cases.clamp_case, device)
    word = long_tensor(cases.first, device)[case_of] + long_tensor(cases.clamp_offset, device)
    # (B, T): the time of each row's i-th word first, in order (a stable sort of the mask).
    word_time = torch.sort((~pot.mask).to(torch.int8), dim=1, stable=True).indices
    # Each chain's sentence, the B sentences first; the cases' rows copied, then clamped in place
    # (a tag outside the clamp's set impossible at the clamped word).
    which = torch.cat([torch.arange(B, device=device), rows])  # (B + C,)
    stacked_emissions = emissions.index_select(0, which)  # (B + C, T, K) float64
    at = (B + case_of, word_time[rows[case_of], word])
    sets = table.to(device)[long_tensor(cases.clamp_set, device)]  # (M, K)
    stacked_emissions[at] = torch.where(sets, stacked_emissions[at], IMPOSSIBLE)
    stacked = ChainPotentials(
        emissions=stacked_emissions,
        transitions=transitions.index_select(0, which) if pot.per_position else transitions,
        start=start,
        end=end,
        mask=pot.mask.index_select(0, which),
    )
    # Many cases have no labelling at all (an entity's reading the head's constraints forbid). The
    # kernel recomputes a chain without a path in log space, at several times the cost of all the
    # others together; the best path's score (max-product, in log space: fast) finds them, exactly
    # (-inf just when no labelling has a finite score), and only the others are summed.
    live = engine.viterbi(stacked)[0] > float("-inf")  # (B + C,)
    # The others are masked out whole (an empty chain costs nothing), not copied out.
    summed = engine.log_partition(dataclasses.replace(stacked, mask=stacked.mask & live[:, None]))
    log_z = torch.where(live, summed, float("-inf"))  # (B + C,)
    whole = log_z[:B][rows]
    ratios = torch.where(whole > float("-inf"), log_z[B:] - whole, float("-inf")).exp()
    return ratios.cpu()


def _parse_labels(
    crf: ChainHead, labels: Sequence[str], scheme: str
) -> list[tuple[str, str | None]]:
    if len(labels) != crf.num_tags:
        raise ValueError(f"got {len(labels)} labels for a CRF with num_tags={crf.num_tags}")
    if crf.labels is not None and list(labels) != crf.labels:
        raise ValueError(f"labels {list(labels)} differ from the CRF's labels {crf.labels}")
    scheme = canonical_scheme(scheme)
    return [split_label(label, scheme) for label in labels]


def _probabilities(
    pot: ChainPotentials,
    spans: Sequence[Sequence[Span]],
    parsed: Sequence[tuple[str, str | None]],
) -> list[list[float]]:
    """Span probabilities for validated potentials (see :func:`span_probabilities`)."""
    B, _, K = pot.shape
    if len(spans) != B:
        raise ValueError(f"got span lists for {len(spans)} sequences, but the batch has {B}")
    types = {typ for _, typ in parsed if typ is not None}
    lengths = pot.mask.sum(1).tolist()
    sets = _tag_sets(tuple(parsed))
    structure = _Structure.of(pot)
    cases = _Cases()
    num_spans = 0
    for b, row_spans in enumerate(spans):
        n = lengths[b]
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
            for first, case in _cases_of(span, n, sets, structure):
                cases.add(b, num_spans, first, case)
            num_spans += 1
    if num_spans == 0:
        return [[] for _ in spans]
    totals = torch.zeros(num_spans, dtype=torch.float64)
    if cases.row:
        table = torch.tensor(sets.vectors, dtype=torch.bool).reshape(-1, K)
        short = int(max(lengths, default=0)) <= CLAMPED_UP_TO
        ratios = (_chain_ratios if short else _window_ratios)(pot, cases, table)  # (C,) Z_c / Z
        totals = totals.index_add(0, long_tensor(cases.span), ratios)
    flat = totals.clamp(0.0, 1.0).tolist()
    out: list[list[float]] = []
    offset = 0
    for row_spans in spans:
        out.append(flat[offset : offset + len(row_spans)])
        offset += len(row_spans)
    return out


def span_probabilities(
    crf: ChainHead,
    emissions: Tensor,
    mask: Tensor | None,
    spans: Sequence[Sequence[Span]],
    labels: Sequence[str],
    scheme: str,
    *,
    allowed: Tensor | None = None,
) -> list[list[float]]:
    """The exact probability of each span under ``p(z | x)`` (see the module docstring).

    The probability of a span is the total probability of the tag paths whose entities, read with
    :func:`crfhead.schemes.tags_to_spans` on the unmasked tags, include it (type, start and end
    all equal). One forward-backward per sentence, then a window per case of each span (up to four
    cases per span), all spans of the batch together. No autograd graph is built; works under
    ``torch.inference_mode()``.

    Args:
        crf: the CRF layer or any chain head (its scheme constraints, if any, are part of ``p(z | x)``).
        emissions: ``(B, T, K)`` floating point (the messages and windows run in float64 whatever
            the dtype).
        mask: ``(B, T)`` bool, may have holes; ``None`` for all positions.
        spans: ``B`` lists of spans; ``Span(label, start, end)`` with ``start``/``end`` inclusive *word
            indices*, i.e. indices into the unmasked positions of that row (``0 .. n-1``), not into
            ``T``.
        labels: the ``K`` tag names (equal to ``crf.labels`` when the CRF has them).
        scheme: the tagging scheme the labels are read in (``"BIO"``, ``"IOB1"``, ``"BIOES"``, ...).
        allowed: ``(B, T, K)`` bool, the labels each position may take: the probabilities are then
            conditioned on them, ``p(span | x, z_t in allowed_t for all t)``, from the head's
            restricted chain (:meth:`~crfhead.heads.base.ChainHead.chain`).

    Returns:
        ``B`` lists of probabilities in ``[0, 1]``, aligned with ``spans``.

    Raises:
        ValueError: naming the span, for a span out of range (``start > end``, ``start < 0`` or
            ``end >= n``) or of a type not in the labels; also for a wrong number of labels or of span
            lists, labels unknown to ``scheme`` and bad emissions/mask/allowed (the head's
            error for an unmasked position with no allowed label).
    """
    parsed = _parse_labels(crf, labels, scheme)
    with torch.no_grad():
        return _probabilities(crf.chain(emissions, mask, allowed), spans, parsed)


def span_probabilities_from(
    pot: ChainPotentials,
    spans: Sequence[Sequence[Span]],
    labels: Sequence[str],
    scheme: str,
) -> list[list[float]]:
    """:func:`span_probabilities` from a head's potentials already built (``head.potentials``).

    For a caller that derives several results from one chain (the decoded path, the marginals,
    the span probabilities), so the potentials are built once. Potentials restricted to label
    sets (``head.chain(emissions, mask, allowed)``, also with ``-inf`` per-position transitions)
    give the probabilities conditioned on them.

    Args:
        pot: the chain potentials, emissions ``(B, T, K)``.
        spans: ``B`` lists of spans, word indices as in :func:`span_probabilities`.
        labels: the ``K`` tag names.
        scheme: the tagging scheme the labels are read in.

    Raises:
        ValueError: as :func:`span_probabilities`; also for a number of labels other than ``K``.
    """
    if len(labels) != pot.shape[2]:
        raise ValueError(f"got {len(labels)} labels for potentials of K={pot.shape[2]} tags")
    parsed = [split_label(label, canonical_scheme(scheme)) for label in labels]
    with torch.no_grad():
        return _probabilities(pot, spans, parsed)
