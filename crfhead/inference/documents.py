"""Long texts as chains: sentence boundaries in raw text, and overlapping windows merged back.

A text is tokenised once, so every offset indexes the original text; it is then cut into chains the
tagger decodes independently, batched with the chains of other texts:

* :func:`sentence_ranges` finds sentence boundaries by rule (no model, no downloaded data; spaCy
  may be installed beside crfhead but is not a dependency, and NLTK's punkt needs data files). A
  sentence ends after a run of ``.``, ``!``, ``?`` or ``…`` (closing quotes and brackets kept with
  it) followed by whitespace and then an uppercase letter, a digit or an opening quote or bracket;
  a blank line always ends one (with ``lines=True``, every line break). A lone ``.`` does not end a
  sentence after a known abbreviation (:data:`ABBREVIATIONS`: ``Mr.``, ``Dr.``, ``vs.``, ``No.``,
  ``Jan.``), after a dotted abbreviation (``e.g.``, ``U.S.``) or after a single capital initial
  (``J. Smith``); ``3.5`` has no whitespace after its dot. The price of the guards: ``... to the
  U.S. Then ...`` stays one sentence. :func:`token_ranges` assigns the tokens to the sentences by
  their start offsets.
* :func:`windows` cuts a chain longer than ``max_length`` into evenly spaced windows of
  ``max_length`` tokens overlapping by at least ``overlap``; :func:`seam_cuts` and
  :func:`merge_windows` put the windows' decodings back together;
* :func:`merge_kbest` gives the ``k`` best labellings of a text from those of its chains;
* pinned spans (``tag(text, spans=...)``, :mod:`~crfhead.inference.pins`): :func:`join_ranges`
  keeps the sentences a pinned span crosses together as one chain (the choice: the rule-based
  split yields to the user's span, rather than an error), and no seam of the merge cuts a pinned
  span (``whole=``; :func:`uncuttable_seams` finds a span that covers a whole overlap, which the
  tagger refuses).

**The merging rule.** Each token is taken from the window in which it is most central, except that
a seam never cuts an entity: between windows ``w`` and ``w + 1`` the cut (the first token taken
from ``w + 1``) is the position nearest the point of equal centrality where both windows decoded
the same tags on both sides of the cut and neither window has an entity across it. So every entity
of the merged tags is an entity of the one window it was taken from, whole, with that window's span
probability, and since both windows agree on the tag pair across each cut, the merged tags are a
valid path wherever the windows' paths are (validity is a property of starts, ends and adjacent
pairs). Only where no such position exists in the overlap (an entity or a disagreement covering all
of it) is the cut made at the centre; the tags are then repaired to the scheme
(:func:`crfhead.schemes.repair_tags`) and an entity that no single window decoded has probability
``None``. An overlap under two tokens leaves nothing to compare: the seam is a hard cut at the
start of the next window, treated the same way.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass

from crfhead.data.tokenize import Token
from crfhead.schemes import Span, repair_tags, tags_to_spans

__all__ = [
    "ABBREVIATIONS",
    "Merged",
    "join_ranges",
    "merge_kbest",
    "merge_windows",
    "seam_cuts",
    "sentence_ranges",
    "token_ranges",
    "uncuttable_seams",
    "windows",
]

ABBREVIATIONS = frozenset(
    "mr mrs ms messrs dr prof sr jr st mt rev gen col lt sgt capt cmdr gov sen rep hon pres "
    "fig figs no nos vol vols pp ch sec art approx dept est vs cf al "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
"""Words (lowercase, without their dot) after which a lone ``.`` does not end a sentence. Company
suffixes (``Inc.``, ``Corp.``, ``Ltd.``) and ``etc.`` are left out: they often end a sentence."""

_END = re.compile(r"(?P<punct>[.!?\u2026]+)(?P<close>[\"'\u201d\u2019)\]\u00bb]*)(?=\s)")
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_LINE = re.compile(r"\n\s*")
_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")  # e.g / U.S / i.e, before the final dot


def _is_guarded(text: str, dot: int) -> bool:
    """Whether the lone ``.`` at ``dot`` closes an abbreviation or an initial (no sentence end)."""
    begin = dot
    while begin > 0 and not text[begin - 1].isspace() and text[begin - 1] not in "\"'(\u201c[":
        begin -= 1
    word = text[begin:dot]
    if not word:
        return False
    if word.lower() in ABBREVIATIONS or _DOTTED.fullmatch(word):
        return True
    return len(word) == 1 and word.isupper()


def _next_is_sentence_start(text: str, pos: int) -> bool:
    """Whether the first non-space character at or after ``pos`` may open a sentence."""
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos == len(text):
        return False
    c = text[pos]
    return c.isupper() or c.isdigit() or c in "\"'\u201c\u2018([\u00ab\u00bf\u00a1"


def _strip(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def sentence_ranges(text: str, *, lines: bool = False) -> list[tuple[int, int]]:
    """The sentences of ``text`` as character ranges ``[start, end)``, whitespace trimmed, in order.

    Args:
        text: raw text.
        lines: also end a sentence at every line break (one sentence or heading per line).

    Returns:
        Non-empty, non-overlapping ranges; ``[]`` for a text of only whitespace.
    """
    cuts: set[int] = set()
    for m in (_LINE if lines else _BLANK_LINE).finditer(text):
        cuts.add(m.start())
    for m in _END.finditer(text):
        punct = m.group("punct")
        if punct == "." and _is_guarded(text, m.start()):
            continue
        if _next_is_sentence_start(text, m.end()):
            cuts.add(m.end())
    out: list[tuple[int, int]] = []
    start = 0
    for cut in sorted(cuts):
        piece = _strip(text, start, cut)
        if piece is not None:
            out.append(piece)
        start = cut
    last = _strip(text, start, len(text))
    if last is not None:
        out.append(last)
    return out


def token_ranges(tokens: Sequence[Token], sentences: Sequence[tuple[int, int]]) -> list[range]:
    """The tokens of each sentence, as index ranges into ``tokens`` (sentences with none dropped).

    A token belongs to the last sentence that starts at or before its first character, so the
    ranges cover every token exactly once, in order (``sentences`` as :func:`sentence_ranges`
    gives them).
    """
    if not tokens:
        return []
    if len(sentences) <= 1:  # one sentence (or none found) owns every token
        return [range(0, len(tokens))]
    starts = [s for s, _ in sentences]
    owner = [max(bisect.bisect_right(starts, t.start) - 1, 0) for t in tokens]
    out: list[range] = []
    begin = 0
    for i in range(1, len(tokens) + 1):
        if i == len(tokens) or owner[i] != owner[begin]:
            out.append(range(begin, i))
            begin = i
    return out


def windows(n: int, max_length: int, overlap: int) -> list[range]:
    """A chain of ``n`` tokens as evenly spaced windows of ``max_length`` overlapping by >= ``overlap``.

    One window ``range(0, n)`` when ``n <= max_length``; otherwise the fewest windows of exactly
    ``max_length`` tokens whose consecutive overlaps are all at least ``overlap``, the first starting
    at 0 and the last ending at ``n``.

    Raises:
        ValueError: ``max_length`` < 1, or ``overlap`` not in ``[0, max_length // 2]``.
    """
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    if not 0 <= overlap <= max_length // 2:
        raise ValueError(
            f"overlap must be in [0, max_length // 2] = [0, {max_length // 2}], got {overlap}"
        )
    if n <= max_length:
        return [range(0, n)]
    stride = max_length - overlap
    count = -(-(n - overlap) // stride)  # ceil: the fewest windows of that stride that reach n
    count = max(count, 2)
    span = n - max_length
    return [
        range(round(i * span / (count - 1)), round(i * span / (count - 1)) + max_length)
        for i in range(count)
    ]


def _crossings(spans: Sequence[Span]) -> set[int]:
    """Local positions ``p`` such that a span holds both ``p`` and ``p + 1``."""
    return {p for s in spans for p in range(s.start, s.end)}


def seam_cuts(
    wins: Sequence[range],
    tags: Sequence[Sequence[str]],
    spans: Sequence[Sequence[Span]],
    whole: Sequence[Span] = (),
) -> tuple[list[int], bool]:
    """Where each seam between consecutive windows is cut (the module's merging rule).

    Args:
        wins: the windows (:func:`windows`), as token ranges of the chain.
        tags: each window's decoded tags (``len(wins[i])`` each).
        spans: each window's entities, window-local inclusive token indices.
        whole: spans (chain-level inclusive token indices: the pinned spans) that no cut may
            split, even where no clean cut exists (then the cut is the nearest to the centre
            outside them; :func:`uncuttable_seams` says where there is none).

    Returns:
        ``(cuts, clean)``: for each seam ``i`` the first token taken from window ``i + 1``
        (strictly increasing), and whether every cut met the rule (no entity, no disagreement).
    """
    cross = [_crossings(s) for s in spans]
    kept = {p + 1 for p in _crossings(whole)}  # cuts c that would split a span of whole
    cuts: list[int] = []
    clean = True
    prev = wins[0].start
    for i in range(len(wins) - 1):
        left, right = wins[i], wins[i + 1]
        lo, hi = max(right.start + 1, prev + 1), left.stop - 1
        centre = (left.stop - 1 + right.start) // 2 + 1  # the first token more central in right
        if lo > hi:  # overlap under two tokens: a hard cut
            cuts.append(max(right.start, prev + 1))
            clean = False
            prev = cuts[-1]
            continue

        def ok(c: int, left: range = left, right: range = right, i: int = i) -> bool:
            a, b = c - left.start, c - right.start
            return (
                tags[i][a - 1] == tags[i + 1][b - 1]
                and tags[i][a] == tags[i + 1][b]
                and a - 1 not in cross[i]
                and b - 1 not in cross[i + 1]
            )

        order = sorted(range(lo, hi + 1), key=lambda c: (abs(c - centre), c))
        found = next((c for c in order if ok(c) and c not in kept), None)
        if found is None:
            found = next((c for c in order if c not in kept), min(max(centre, lo), hi))
            clean = False
        cuts.append(found)
        prev = found
    return cuts, clean


@dataclass(frozen=True)
class Merged:
    """A chain's decoding put back together from its windows (:func:`merge_windows`).

    Attributes:
        tags: one tag per token of the chain.
        spans: its entities, chain-level inclusive token indices.
        probabilities: each entity's span probability from the window it was taken from (``None``
            where no single window decoded it, or where the windows had no probabilities).
        marginals: ``n x K`` node marginals, each token's from its window (``None`` if not given).
        clean: whether every seam was cut by the rule (else tags repaired at the seams).
    """

    tags: list[str]
    spans: list[Span]
    probabilities: list[float | None]
    marginals: list[list[float]] | None
    clean: bool


def merge_windows(
    wins: Sequence[range],
    tags: Sequence[Sequence[str]],
    spans: Sequence[Sequence[Span]],
    probabilities: Sequence[Sequence[float]] | None,
    scheme: str | None,
    *,
    marginals: Sequence[Sequence[Sequence[float]]] | None = None,
    repair: bool = True,
    whole: Sequence[Span] = (),
) -> Merged:
    """The windows' decodings of one chain as one decoding (the module's merging rule).

    Args:
        wins: the windows, token ranges of the chain (:func:`windows`).
        tags: each window's tags.
        spans: each window's entities, window-local inclusive token indices.
        probabilities: each window's entities' span probabilities (``None``: none).
        scheme: the tagging scheme of the tags (``None``: labels without one, hence no entities).
        marginals: each window's node marginals (``len(wins[i]) x K``), to merge the same way.
        repair: repair the tags to ``scheme`` where a seam could not be cut cleanly (for a
            constrained head; an unconstrained one's paths are left as decoded).
        whole: spans no seam may cut (:func:`seam_cuts`): the pinned spans, chain-level.
    """
    cuts, clean = seam_cuts(wins, tags, spans, whole)
    bounds = [wins[0].start, *cuts, wins[-1].stop]
    merged: list[str] = []
    gamma: list[list[float]] | None = None if marginals is None else []
    for i, w in enumerate(wins):
        a, b = bounds[i] - w.start, bounds[i + 1] - w.start
        merged.extend(tags[i][a:b])
        if gamma is not None and marginals is not None:
            gamma.extend(list(row) for row in marginals[i][a:b])
    if scheme is None:
        return Merged(merged, [], [], gamma, clean)
    if not clean and repair:
        merged = repair_tags(merged, scheme)[0]
    out_spans = tags_to_spans(merged, scheme)
    found: dict[Span, float | None] = {}
    for i, w in enumerate(wins):
        for j, s in enumerate(spans[i]):
            g = Span(s.label, s.start + w.start, s.end + w.start)
            owned = bounds[i] <= g.start and g.end < bounds[i + 1]
            if owned or g not in found:
                found[g] = None if probabilities is None else float(probabilities[i][j])
    probs = [found.get(s) for s in out_spans]
    return Merged(merged, out_spans, probs, gamma, clean)


def uncuttable_seams(wins: Sequence[range], whole: Sequence[Span]) -> list[int]:
    """The seams between consecutive ``wins`` that every possible cut puts inside a span of ``whole``.

    A seam's possible cuts are the tokens ``right.start + 1 .. left.stop - 1`` (the first token
    taken from the right window, one token of agreement on each side), or ``right.start`` alone
    for an overlap under two tokens (a hard cut): a span of ``whole`` (chain-level inclusive token
    indices) that covers all of them cannot come out of one window whole.
    """
    if len(wins) < 2 or not whole:
        return []  # no seam, or nothing that a cut could split
    kept = {p + 1 for p in _crossings(whole)}
    out = []
    for i in range(len(wins) - 1):
        left, right = wins[i], wins[i + 1]
        lo, hi = right.start + 1, left.stop - 1
        options = range(lo, hi + 1) if lo <= hi else range(right.start, right.start + 1)
        if all(c in kept for c in options):
            out.append(i)
    return out


def join_ranges(chains: Sequence[range], whole: Sequence[Span]) -> list[range]:
    """``chains`` (consecutive token ranges) with the neighbours that a span of ``whole`` crosses joined.

    A pinned span (inclusive token indices) across a sentence boundary keeps the sentences it
    touches together as one chain, so that it is pinned whole (a sentence split is a guess by rule,
    a pinned span is the user's knowledge).
    """
    out: list[range] = []
    for c in chains:
        if out and any(s.start < c.start <= s.end for s in whole):
            out[-1] = range(out[-1].start, c.stop)
        else:
            out.append(c)
    return out


def merge_kbest(
    lists: Sequence[Sequence[tuple[float, Sequence[int]]]], k: int
) -> list[tuple[float, list[int]]]:
    """The ``k`` best labellings of independent chains side by side, from each chain's ``k`` best.

    A labelling of the whole is one labelling per chain, its log-probability the sum of theirs, so
    the ``k`` best of the whole are among the ``k x k`` sums of the ``k`` best of the first chains
    and of the next one: merging pairwise, keeping ``k`` each time, is exact.

    Args:
        lists: per chain, its best labellings as ``(log-probability, tag ids)``, best first.
        k: how many to keep.

    Returns:
        Up to ``k`` ``(log-probability, tag ids of all chains concatenated)``, best first (ties in
        the order of the chains' own lists); ``[(0.0, [])]`` for no chain.
    """
    best: list[tuple[float, tuple[int, ...]]] = [(0.0, ())]
    for chain in lists:
        sums = [
            (lp + lq, (*picks, j))
            for lp, picks in best
            for j, (lq, _) in enumerate(chain[:k])
            if lq != float("-inf")
        ]
        sums.sort(key=lambda s: (-s[0], s[1]))
        best = sums[:k]
    out: list[tuple[float, list[int]]] = []
    for lp, picks in best:
        path: list[int] = []
        for chain, j in zip(lists, picks, strict=True):
            path.extend(chain[j][1])
        out.append((lp, path))
    return out
