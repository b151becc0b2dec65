"""Builders of the non-local patterns: phrase consistency and skip-chain edges (and tweet groups).

* :func:`group_tweets` -- the seed's grouping of tweets, re-exported from
  :mod:`crfhead.data.grouping` (the data module batches by it).
* :func:`consistency_patterns` -- the seed's group-level consistency feature: two identical phrases
  of a group rewarded for taking the same label subsequence (document-level consistency as in
  Finkel et al. 2005 and Krishnan & Manning 2006): by default restricted to the subsequences that
  make the phrase one entity of some type, or all ``O``; ``readings="all"`` is the seed's feature
  in full (every label subsequence the scheme allows).
* :func:`skip_patterns` -- skip-chain edges between identical capitalised tokens of a document
  (Sutton & McCallum 2004; Finkel et al. 2005; Krishnan & Manning 2006): a same-label reward.

Every builder returns patterns in a deterministic order with duplicates merged
(:func:`~crfhead.higher_order.patterns.merge_patterns`). Sentence ``b`` of a pattern is the index of
the sentence in the sequence given; position ``t`` the token's index in it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from crfhead.data.grouping import group_tweets, has_alnum
from crfhead.higher_order.patterns import Pattern, merge_patterns
from crfhead.schemes import Span, allowed_transitions, canonical_scheme, entity_types, spans_to_tags

__all__ = ["READINGS", "consistency_patterns", "group_tweets", "skip_patterns"]

READINGS = ("entities", "all")
"""What :func:`consistency_patterns` rewards two identical phrases for sharing: one entity reading
or all ``O`` (``"entities"``), or any label subsequence the scheme allows (``"all"``, the seed's)."""


def _label_index(labels: Sequence[str]) -> dict[str, int]:
    index: dict[str, int] = {}
    for k, label in enumerate(labels):
        if label in index:
            raise ValueError(f"label {label!r} appears twice in labels {list(labels)}")
        index[label] = k
    return index


def _weights(
    weight: float | Mapping[str, float], keys: Sequence[str], what: str
) -> dict[str, float]:
    """One weight per key: ``weight`` for all, or the mapping's (which must name exactly ``keys``)."""
    if not isinstance(weight, Mapping):
        return dict.fromkeys(keys, float(weight))
    missing = [k for k in keys if k not in weight]
    unknown = sorted(set(weight) - set(keys))
    if missing or unknown:
        raise ValueError(
            f"weight must map each of {list(keys)} ({what}) to a float; "
            f"missing {missing}, unknown {unknown}"
        )
    return {k: float(weight[k]) for k in keys}


def consistency_patterns(
    group: Sequence[Sequence[str]],
    labels: Sequence[str],
    scheme: str,
    weight: float | Mapping[str, float] = 1.0,
    max_length: int = 3,
    lowercase: bool = True,
    readings: str = "entities",
) -> list[Pattern]:
    """Patterns rewarding two identical phrases of a group for taking the same label subsequence.

    The seed's feature fires for any shared label subsequence (``readings="all"``: every sequence
    of ``n`` labels whose adjacent pairs the scheme allows,
    :func:`crfhead.schemes.allowed_transitions`; a sequence it forbids can never hold, so nothing
    is lost; its kind is the type of its first entity label, or ``"O"``). By default
    (``"entities"``) the candidates are the subsequences that make the phrase exactly one entity of
    type ``X`` under ``scheme`` (BIOES: ``S-X`` for one token, ``B-X (I-X)* E-X``; BIO:
    ``B-X I-X*``; IO and IOB1 alike, through :func:`crfhead.schemes.spans_to_tags`), and all ``O``.
    Each candidate of each pair of occurrences is one pattern of ``2n`` cells with score ``weight``
    (of ``X``, or of ``"O"``).

    Decisions:

    * Phrases: n-grams of ``1..max_length`` tokens within a sentence, compared token by token
      (lowercased when ``lowercase``). A phrase whose first or last token has no alphanumeric
      character is skipped (punctuation-only phrases, and ``Paris !`` which would otherwise
      shadow ``Paris``).
    * Pairs: the occurrences of a phrase in reading order ``(b, t)``, each linked to the next one
      that does not overlap it (a chain of pairs, linear in the number of occurrences, connected,
      rather than all pairs); occurrences overlapping in one sentence are never paired.
    * Maximality: a pair is *covered* when a longer chosen pair contains it aligned (both
      occurrences extended by the same tokens, e.g. ``York``–``York`` inside
      ``New York``–``New York``). Covered pairs keep their entity candidates (``York`` alone being a
      location in both is a different claim from ``New York`` being one) but lose the all-``O``
      candidate, which the covering pair already rewards; otherwise a repeated ``n``-token phrase
      would earn the all-``O`` reward once per sub-phrase (``n(n+1)/2`` times) against one reward
      per entity reading, a bias towards ``O``. With ``readings="all"`` every candidate of every
      pair is kept, as the seed's feature counts every identical sub-phrase.

    Args:
        group: the sentences of the group, as token sequences.
        labels: the label list (index = label id); must hold ``O`` and every label a candidate uses.
        scheme: the tagging scheme of ``labels`` (see :mod:`crfhead.schemes`).
        weight: the score of every pattern, or a mapping from each entity type and ``"O"`` to one.
        max_length: the longest phrase, in tokens (``>= 1``).
        lowercase: compare tokens case-insensitively.
        readings: one of :data:`READINGS`.

    Returns:
        The patterns, ordered by pair (first occurrence, second occurrence, length), then
        candidate (entity types in order of first appearance in ``labels``, then ``O``).

    Raises:
        ValueError: an unknown scheme, a label invalid in it, duplicated labels, a label that a
            candidate needs missing from ``labels``, a weight mapping with missing or unknown keys,
            ``max_length < 1`` or an unknown ``readings``.
    """
    scheme = canonical_scheme(scheme)
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    if readings not in READINGS:
        raise ValueError(f"readings must be one of {READINGS}, got {readings!r}")
    index = _label_index(labels)
    types = entity_types(labels, scheme)  # also validates every label
    w = _weights(weight, [*types, "O"], "entity types and 'O'")

    def ids(tags: Sequence[str]) -> tuple[int, ...]:
        missing = [tag for tag in tags if tag not in index]
        if missing:
            raise ValueError(
                f"label {missing[0]!r} (needed for a {len(tags)}-token phrase in {scheme}) is not "
                f"in labels {list(labels)}"
            )
        return tuple(index[tag] for tag in tags)

    # Every length's candidates up front, so an incomplete label list fails whatever the text.
    candidates = {
        n: [(typ, ids(spans_to_tags([Span(typ, 0, n - 1)], n, scheme))) for typ in types]
        + [("O", ids(["O"] * n))]
        for n in range(1, max_length + 1)
    }
    if readings == "all":
        candidates = _all_sequences(labels, scheme, max_length)

    keyed = [[tok.lower() if lowercase else tok for tok in sentence] for sentence in group]
    # A chosen pair: (b1, t1, b2, t2, n) with (b1, t1) < (b2, t2).
    chosen: set[tuple[int, int, int, int, int]] = set()
    for n in range(max_length, 0, -1):
        occurrences: dict[tuple[str, ...], list[tuple[int, int]]] = {}
        for b, sentence in enumerate(keyed):
            for t in range(len(sentence) - n + 1):
                phrase = tuple(sentence[t : t + n])
                if has_alnum(phrase[0]) and has_alnum(phrase[-1]):
                    occurrences.setdefault(phrase, []).append((b, t))
        for occ in occurrences.values():
            for i, (b1, t1) in enumerate(occ):
                j = i + 1  # the next occurrence not overlapping this one (at most n - 1 skipped)
                while j < len(occ) and occ[j][0] == b1 and occ[j][1] < t1 + n:
                    j += 1
                if j < len(occ):
                    chosen.add((b1, t1, *occ[j], n))

    def covered(pair: tuple[int, int, int, int, int]) -> bool:
        b1, t1, b2, t2, n = pair
        return any(
            (b1, t1 - d, b2, t2 - d, m) in chosen
            for m in range(n + 1, max_length + 1)
            for d in range(m - n + 1)
        )

    out: list[Pattern] = []
    for pair in sorted(chosen):
        b1, t1, b2, t2, n = pair
        drop_o = readings == "entities" and covered(pair)
        for key, seq in candidates[n]:
            if key == "O" and drop_o:
                continue
            cells = [(b1, t1 + i, k) for i, k in enumerate(seq)]
            cells += [(b2, t2 + i, k) for i, k in enumerate(seq)]
            out.append(Pattern(tuple(cells), w[key]))
    return merge_patterns(out)


def _all_sequences(
    labels: Sequence[str], scheme: str, max_length: int
) -> dict[int, list[tuple[str, tuple[int, ...]]]]:
    """Per length ``n``, every label sequence the scheme allows inside a sentence, with its kind."""
    allowed = allowed_transitions(labels, scheme)[0].tolist()
    kinds = ["O" if lab == "O" else lab.partition("-")[2] for lab in labels]
    seqs: list[tuple[int, ...]] = [(k,) for k in range(len(labels))]
    out: dict[int, list[tuple[str, tuple[int, ...]]]] = {}
    for n in range(1, max_length + 1):
        if n > 1:
            seqs = [(*s, k) for s in seqs for k in range(len(labels)) if allowed[s[-1]][k]]
        out[n] = [(next((kinds[k] for k in s if kinds[k] != "O"), "O"), s) for s in seqs]
    return out


def skip_patterns(
    document: Sequence[Sequence[str]],
    labels: Sequence[str],
    weight: float | Mapping[str, float] = 1.0,
    capitalised_only: bool = True,
) -> list[Pattern]:
    """Skip-chain edges between identical tokens of a document, as same-label patterns.

    Tokens match by exact string. With ``capitalised_only`` only tokens whose first character is
    uppercase are linked (Finkel et al. 2005; Krishnan & Manning 2006 link identical capitalised
    words); tokens with no alphanumeric character are never linked. Each occurrence is linked to
    the next occurrence of the same token in reading order ``(b, t)`` (a chain: linear in the
    number of occurrences and connected, where Finkel et al. link all pairs). Each edge
    ``(b1, t1)``–``(b2, t2)`` gives, for every label ``k`` other than ``O``, the pattern
    ``((b1, t1, k), (b2, t2, k))`` with score ``weight`` (of the label's type).

    Args:
        document: the sentences of the document, as token sequences.
        labels: the label list (index = label id): ``O`` or ``<prefix>-<TYPE>``.
        weight: the score of every pattern, or a mapping from each entity type to one.
        capitalised_only: link only capitalised tokens.

    Returns:
        The patterns, ordered by edge (first occurrence, second occurrence), then label id.

    Raises:
        ValueError: a label that is neither ``O`` nor ``<prefix>-<TYPE>``, duplicated labels, or a
            weight mapping with missing or unknown keys.
    """
    _label_index(labels)
    typed: list[tuple[int, str]] = []
    for k, label in enumerate(labels):
        if label == "O":
            continue
        prefix, sep, typ = label.partition("-")
        if not sep or not prefix or not typ:
            raise ValueError(f"label {label!r} is neither 'O' nor '<prefix>-<TYPE>'")
        typed.append((k, typ))
    types = list(dict.fromkeys(typ for _, typ in typed))
    w = _weights(weight, types, "entity types")
    last: dict[str, tuple[int, int]] = {}
    edges: list[tuple[int, int, int, int]] = []
    for b, sentence in enumerate(document):
        for t, token in enumerate(sentence):
            if not has_alnum(token) or (capitalised_only and not token[0].isupper()):
                continue
            if token in last:
                edges.append((*last[token], b, t))
            last[token] = (b, t)
    return merge_patterns(
        Pattern(((b1, t1, k), (b2, t2, k)), w[typ])
        for b1, t1, b2, t2 in sorted(edges)
        for k, typ in typed
    )
