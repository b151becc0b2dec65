r"""The #MSM2013 Concept Extraction Challenge corpus (Twitter NER: PER, LOC, ORG, MISC).

Source: the organisers' corrected copy of the #MSM2013 (Making Sense of Microposts, WWW 2013)
challenge data, read from the shared data folder (``$CRFHEAD_DATA/msm2013/``, by default
``../shared/data/msm2013/``; see :func:`crfhead.data.paths.data_path`). Research use (CC BY-NC-SA 3.0
on the public fork).

* :func:`read_msm2013` -- ``TweetsTrainingSetCH.tsv``: one tweet a line,
  ``id \t TYPE/mention;TYPE/mention; \t tokenised text``. The mentions are surface strings, not
  offsets: each is aligned to a token span (exactly, then ignoring case, then ignoring ``#``) and the
  spans are encoded in any tagging scheme. Malformed types are normalised, unaligned mentions are
  counted and shown, never dropped silently.
* :func:`read_msm2013_test` -- ``TweetsTestSetCH.tsv``: ``id \t text`` (a few lines carry a middle
  column of draft annotations, ignored), ``\r`` line endings, no gold tags: for prediction only.
* :func:`split_msm2013`, :func:`kfold_msm2013` -- the gold annotations of the official test set were
  never published, so models are evaluated on a fixed, seeded held-out split of the training tweets
  (state the split and seed wherever a figure is compared with published ones).

Text fields are CSV-quoted when they need to be: a text that starts and ends with ``"`` is unquoted
(``""`` inside becomes ``"``); any other text is kept verbatim (a text with a quote at one end only is
counted). Every event is counted in the :class:`~crfhead.data.sentence.ReadReport` under the names
exported here (:data:`ALIGNED_EXACT`, :data:`UNMATCHED`, ...; a normalised type under
``"type normalised: <raw> -> <TYPE>/"``), with up to five examples each.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from random import Random

from crfhead.data.conll import split_columns
from crfhead.data.paths import data_path
from crfhead.data.sentence import ReadReport, Sentence
from crfhead.data.textfile import quote, read_lines, require_file
from crfhead.schemes import Span, canonical_scheme, spans_to_tags

__all__ = [
    "ALIGNED_CASE_INSENSITIVE",
    "ALIGNED_EXACT",
    "ALIGNED_HASH_STRIPPED",
    "BLANK_LINES",
    "DRAFT_ANNOTATIONS_IGNORED",
    "EMPTY_MENTION",
    "MSM2013_TYPES",
    "NO_TYPE",
    "RECOVERED_FROM_TEXT",
    "TYPE_NORMALISED",
    "UNBALANCED_QUOTE",
    "UNKNOWN_TYPE",
    "UNMATCHED",
    "MSM2013FormatError",
    "kfold_msm2013",
    "read_msm2013",
    "read_msm2013_test",
    "split_msm2013",
]

MSM2013_TYPES: tuple[str, ...] = ("PER", "LOC", "ORG", "MISC")
"""The entity types of the corpus."""

# Report event names (keys of ``ReadReport.notes`` and ``ReadReport.examples``).
ALIGNED_EXACT = "mentions aligned exactly"
"""Mentions whose tokens equal a token span of the tweet."""
ALIGNED_CASE_INSENSITIVE = "mentions aligned ignoring case"
"""Mentions that equal a token span only after case folding."""
ALIGNED_HASH_STRIPPED = "mentions aligned after stripping #"
"""Mentions that equal a token span only after case folding and stripping leading ``#``."""
UNMATCHED = "mentions matching no token span (left untagged)"
"""Mentions that match no free token span (tokenisation differences): their tokens stay ``O``."""
NO_TYPE = "mentions without a type (skipped)"
"""Annotation items with no ``TYPE/`` prefix."""
UNKNOWN_TYPE = "mentions of an unknown type (skipped)"
"""Annotation items whose type is not PER, LOC, ORG or MISC, even after normalisation."""
EMPTY_MENTION = "empty mentions (skipped)"
"""Annotation items with a type but no mention text."""
TYPE_NORMALISED = "type normalised"
"""Prefix of the per-kind normalisation events, e.g. ``"type normalised: Org/ -> ORG/"``."""
RECOVERED_FROM_TEXT = "mentions recovered from the text field"
"""Annotation items that spilled into the text field (``PER/x; "text"``), moved back."""
UNBALANCED_QUOTE = "texts with a double quote at one end only (kept verbatim)"
"""Text fields that start or end with ``"`` but not both."""
BLANK_LINES = "blank lines skipped"
"""Lines with nothing but whitespace."""
DRAFT_ANNOTATIONS_IGNORED = "test lines with a draft-annotation column (ignored)"
"""Test-set lines with three fields: the middle one (draft annotations) is ignored."""

_TYPE_ALIASES = {
    "MISRC": "MISC",
    "PERSON": "PER",
    "LOCATION": "LOC",
    "ORGANIZATION": "ORG",
    "ORGANISATION": "ORG",
}
_ITEM = re.compile(r"\s*([A-Za-z]+)\s*([/:])(.*)", re.DOTALL)
# A text field that begins with annotation items the tab before it swallowed: `PER/x; "text"`.
_SPILL = re.compile(r'\s*((?:[A-Za-z]+\s*/[^;"\t]*;\s*)+)(".*")\s*', re.DOTALL)
_LEVELS: tuple[tuple[str, Callable[[str], str]], ...] = (
    (ALIGNED_EXACT, lambda tok: tok),
    (ALIGNED_CASE_INSENSITIVE, lambda tok: tok.casefold()),
    (ALIGNED_HASH_STRIPPED, lambda tok: tok.casefold().lstrip("#")),
)
_BENIGN = frozenset({ALIGNED_EXACT, DRAFT_ANNOTATIONS_IGNORED})


class MSM2013FormatError(ValueError):
    """A malformed line of an #MSM2013 file; the message names the file and line number."""


def read_msm2013(
    path: str | Path | None = None, *, scheme: str = "BIO", warn: bool = True
) -> tuple[list[Sentence], ReadReport]:
    r"""Read the annotated training tweets.

    Each line is ``id \t TYPE/mention;TYPE/mention; \t text``; the text is pre-tokenised, so its
    tokens are the text split on runs of spaces and tabs (after CSV unquoting; other space, a
    no-break space, stays inside a token, as in :func:`~crfhead.data.conll.split_columns`). Each mention, in the order of the
    annotation column, is aligned to the first token span not taken by an earlier mention of the
    tweet whose tokens equal the mention's tokens: exactly, else case-insensitively, else after
    case folding and stripping leading ``#`` (``#wikileaks`` ~ ``wikileaks``); each kind is
    counted. A mention that matches no free span is counted and shown, and its tokens stay ``O``.
    Types are normalised (``Org/`` -> ``ORG/``, ``MISRC/`` -> ``MISC/``, ``MISC:`` -> ``MISC/``),
    each kind counted with an example; an item with no type, an unknown type or no text is counted
    and skipped.

    On the shared copy (2,815 tweets, 3,202 typed mentions plus one that spilled into the text field
    of tweet 217): 3,125 mentions align exactly, 3 ignoring case, 2 after stripping ``#``, 73 match
    no free span; 3 types are normalised and 1 item without a type is skipped. (The data README's
    3,127 exact / ~70 unmatched lets a mention reuse a span already taken: three mentions listed
    twice for a tweet that contains them once.)

    Args:
        path: the file (default: ``msm2013/TweetsTrainingSetCH.tsv`` under the data root).
        scheme: the output tagging scheme, any of :data:`crfhead.schemes.SCHEMES`.
        warn: emit one warning summarising anything normalised, unaligned or skipped.

    Returns:
        ``(sentences, report)``: one sentence per non-empty tweet, in file order, with ``id`` the
        tweet id and ``doc_id`` ``None``; empty tweets are skipped and counted in
        ``report.skipped_empty``.

    Raises:
        FileNotFoundError: the file does not exist (the path is named).
        MSM2013FormatError: a line without exactly three tab-separated fields, or with an empty id.
        TextEncodingError: the file is not UTF-8 (a :class:`ValueError` naming file and line).
        ValueError: an unknown ``scheme``.
    """
    scheme = canonical_scheme(scheme)
    file = _resolve(path, "TweetsTrainingSetCH.tsv")
    report = ReadReport(source=str(file))
    sentences: list[Sentence] = []
    for lineno, fields in _records(file, report, expected=(3,), what="id, mentions, text"):
        tweet_id, annotations, raw_text = fields
        text, spilled = _unquote(raw_text, tweet_id, report)
        items = annotations.split(";") + spilled
        mentions = [m for item in items if (m := _parse_item(item, tweet_id, report))]
        for item in spilled:
            report.count(RECOVERED_FROM_TEXT, f"{tweet_id}: {item.strip()}")
        tokens = split_columns(text)
        spans = _align(mentions, tokens, tweet_id, report)
        if not tokens:
            report.skipped_empty += 1
            report.example("skipped empty", f"{file.name}, line {lineno} (tweet {tweet_id})")
            continue
        tags = spans_to_tags(spans, len(tokens), scheme)
        sentences.append(Sentence(tokens=tokens, tags=tags, doc_id=None, id=tweet_id))
    _finish(report, sentences, warn)
    return sentences, report


def read_msm2013_test(
    path: str | Path | None = None, *, warn: bool = True
) -> tuple[list[Sentence], ReadReport]:
    r"""Read the official test tweets (no gold annotations were published: for prediction only).

    Lines end in ``\r`` (any of ``\r``, ``\n``, ``\r\n`` is accepted) and are ``id \t text``;
    a few lines (28 in the shared copy) have three fields, ``id \t draft annotations \t text``: the
    draft column is ignored (counted under :data:`DRAFT_ANNOTATIONS_IGNORED`, which alone does not
    trigger the warning). The shared copy holds 1,526 tweets; 76 of them (ids 2560 to 2687) are also
    in the training file under the same id (74 with identical tokens): exclude them before using
    the training file to predict on this one.

    Args:
        path: the file (default: ``msm2013/TweetsTestSetCH.tsv`` under the data root).
        warn: emit one warning if anything was skipped or changed.

    Returns:
        ``(sentences, report)``: one sentence per non-empty tweet, in file order, ``tags`` ``None``,
        ``id`` the tweet id, ``doc_id`` ``None``.

    Raises:
        FileNotFoundError: the file does not exist (the path is named).
        MSM2013FormatError: a line with other than two or three tab-separated fields, or an empty id.
        TextEncodingError: the file is not UTF-8 (a :class:`ValueError` naming file and line).
    """
    file = _resolve(path, "TweetsTestSetCH.tsv")
    report = ReadReport(source=str(file))
    sentences: list[Sentence] = []
    for lineno, fields in _records(file, report, expected=(2, 3), what="id, text"):
        tweet_id, raw_text = fields[0], fields[-1]
        if len(fields) == 3:
            report.count(DRAFT_ANNOTATIONS_IGNORED, f"{tweet_id}: {fields[1]!r}")
        text, _ = _unquote(raw_text, tweet_id, report, spill=False)
        tokens = split_columns(text)
        if not tokens:
            report.skipped_empty += 1
            report.example("skipped empty", f"{file.name}, line {lineno} (tweet {tweet_id})")
            continue
        sentences.append(Sentence(tokens=tokens, tags=None, doc_id=None, id=tweet_id))
    _finish(report, sentences, warn)
    return sentences, report


def split_msm2013(
    sentences: Sequence[Sentence], *, seed: int = 13, dev: float = 0.1, test: float = 0.1
) -> tuple[list[Sentence], list[Sentence], list[Sentence]]:
    """The fixed held-out split of the training tweets: ``(train, dev, test)``.

    The sentences are sorted by tweet id (numerically), shuffled by a Fisher--Yates shuffle driven by
    ``random.Random(seed).random()`` (whose sequence Python guarantees across versions and machines,
    unlike ``Random.shuffle``); the first ``round(n * dev)`` (halves rounded up) form dev, the next
    ``round(n * test)`` test, the rest train. Each part is returned in tweet-id order.

    With the defaults (seed 13, 10 % / 10 %) the 2,815 training tweets split into 2,251 train,
    282 dev and 282 test tweets. The corpus repeats some texts under different ids (2,750
    distinct texts in 2,815 tweets): with the defaults 9 dev and 10 test tweets have the same
    tokens as a train tweet.

    Args:
        sentences: the tweets, e.g. from :func:`read_msm2013`; each needs a unique ``id``.
        seed: the shuffle seed.
        dev: the fraction held out for development.
        test: the fraction held out for testing.

    Returns:
        ``(train, dev, test)``, disjoint, together all of ``sentences``.

    Raises:
        ValueError: a missing or duplicate id, or fractions outside ``[0, 1)`` summing to 1 or more.
    """
    if not (0.0 <= dev < 1.0 and 0.0 <= test < 1.0 and dev + test < 1.0):
        raise ValueError(f"dev={dev} and test={test} must be in [0, 1) and sum to less than 1")
    order = _shuffled(sentences, seed)
    n = len(order)
    n_dev, n_test = _round(n * dev), _round(n * test)
    parts = order[:n_dev], order[n_dev : n_dev + n_test], order[n_dev + n_test :]
    dev_part, test_part, train_part = (_by_id(p) for p in parts)
    return train_part, dev_part, test_part


def kfold_msm2013(
    sentences: Sequence[Sentence], k: int = 5, seed: int = 13
) -> list[tuple[list[Sentence], list[Sentence]]]:
    """``k`` cross-validation folds: ``[(train, test), ...]``.

    The sentences are sorted by tweet id and shuffled as in :func:`split_msm2013`, then cut into
    ``k`` consecutive blocks whose sizes differ by at most one (the first ``n % k`` blocks get the
    extra tweet); fold ``i`` tests on block ``i`` and trains on the others. The test blocks partition
    the data. With the defaults the 2,815 training tweets give five folds of 563 test / 2,252 train.
    Each part is returned in tweet-id order.

    Args:
        sentences: the tweets; each needs a unique ``id``.
        k: the number of folds (2 to ``len(sentences)``).
        seed: the shuffle seed.

    Returns:
        ``k`` pairs ``(train, test)``.

    Raises:
        ValueError: ``k`` out of range, or a missing or duplicate id.
    """
    if not 2 <= k <= len(sentences):
        raise ValueError(f"k={k} folds need 2 <= k <= {len(sentences)} (the number of sentences)")
    order = _shuffled(sentences, seed)
    n = len(order)
    bounds = [0]
    for i in range(k):
        bounds.append(bounds[-1] + n // k + (1 if i < n % k else 0))
    folds = []
    for i in range(k):
        test_block = order[bounds[i] : bounds[i + 1]]
        train_block = order[: bounds[i]] + order[bounds[i + 1] :]
        folds.append((_by_id(train_block), _by_id(test_block)))
    return folds


# --- reading ------------------------------------------------------------------------------------


def _resolve(path: str | Path | None, default: str) -> Path:
    if path is None:
        return data_path("msm2013", default)
    return require_file(path, "MSM2013")


def _records(
    file: Path, report: ReadReport, *, expected: Collection[int], what: str
) -> list[tuple[int, list[str]]]:
    """``(line number, fields)`` of each non-blank line; a bad field count or empty id raises.

    The lines come from :func:`~crfhead.data.textfile.read_lines` (BOM dropped, any line ending,
    bytes that are not UTF-8 named by file and line), as for every other reader.
    """
    out = []
    for lineno, line in enumerate(read_lines(file), start=1):
        if not line.strip():
            report.count(BLANK_LINES, f"{file.name}, line {lineno}")
            continue
        fields = line.split("\t")
        if len(fields) not in expected:
            counts = " or ".join(str(n) for n in sorted(expected))
            raise MSM2013FormatError(
                f"{file}, line {lineno}: expected {counts} tab-separated fields ({what}), "
                f"got {len(fields)}: {quote(line)}"
            )
        fields[0] = fields[0].strip()
        if not fields[0]:
            raise MSM2013FormatError(f"{file}, line {lineno}: empty tweet id: {quote(line)}")
        out.append((lineno, fields))
    return out


def _unquote(
    raw: str, tweet_id: str, report: ReadReport, *, spill: bool = True
) -> tuple[str, list[str]]:
    """The text of a text field, and any annotation items that spilled into it."""
    spilled: list[str] = []
    text = raw.strip()
    if spill and (m := _SPILL.fullmatch(text)):
        spilled = [item for item in m.group(1).split(";") if item.strip()]
        text = m.group(2)
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1].replace('""', '"')
    elif text[:1] == '"' or text[-1:] == '"':
        report.count(UNBALANCED_QUOTE, f"{tweet_id}: {quote(raw, limit=100)}")
    return text, spilled


def _parse_item(item: str, tweet_id: str, report: ReadReport) -> tuple[str, list[str]] | None:
    """``(type, mention tokens)`` of an annotation item; ``None`` (counted) if empty or untyped."""
    if not item.strip():
        return None  # the empty item after the final ';'
    m = _ITEM.fullmatch(item)
    if m is None:
        report.count(NO_TYPE, f"{tweet_id}: {item.strip()!r}")
        return None
    raw_type, _sep, mention = m.groups()
    typ = _TYPE_ALIASES.get(raw_type.upper(), raw_type.upper())
    if typ not in MSM2013_TYPES:
        report.count(UNKNOWN_TYPE, f"{tweet_id}: {item.strip()!r}")
        return None
    tokens = split_columns(mention)
    if not tokens:
        report.count(EMPTY_MENTION, f"{tweet_id}: {item.strip()!r}")
        return None
    raw_prefix = item[: m.start(3)].strip()
    if raw_prefix != f"{typ}/":
        report.count(
            f"{TYPE_NORMALISED}: {raw_prefix} -> {typ}/",
            f"{tweet_id}: {item.strip()!r} -> {typ}/{' '.join(tokens)}",
        )
    return typ, tokens


def _align(
    mentions: Sequence[tuple[str, list[str]]], tokens: list[str], tweet_id: str, report: ReadReport
) -> list[Span]:
    """Token spans of the mentions, in order, each on the first free matching span (counted)."""
    used = [False] * len(tokens)
    spans = []
    for typ, words in mentions:
        n = len(words)
        for event, norm in _LEVELS:
            target = [norm(w) for w in words]
            normed = [norm(t) for t in tokens]
            start = next(
                (
                    s
                    for s in range(len(tokens) - n + 1)
                    if normed[s : s + n] == target and not any(used[s : s + n])
                ),
                None,
            )
            if start is not None:
                used[start : start + n] = [True] * n
                spans.append(Span(typ, start, start + n - 1))
                found = " ".join(tokens[start : start + n])
                report.count(event, f"{tweet_id}: {typ}/{' '.join(words)} ~ {found!r}")
                break
        else:
            report.count(UNMATCHED, f"{tweet_id}: {typ}/{' '.join(words)}")
    return spans


def _finish(report: ReadReport, sentences: list[Sentence], warn: bool) -> None:
    report.sentences = len(sentences)
    report.tokens = sum(len(s) for s in sentences)
    if warn and (report.skipped_empty or any(e not in _BENIGN for e in report.notes)):
        warnings.warn(report.summary(), stacklevel=3)


# --- splitting ----------------------------------------------------------------------------------


def _id_key(sentence: Sentence) -> tuple[int, int, str]:
    sid = sentence.id or ""
    return (0, int(sid), sid) if sid.isdigit() else (1, 0, sid)


def _by_id(sentences: Sequence[Sentence]) -> list[Sentence]:
    return sorted(sentences, key=_id_key)


def _shuffled(sentences: Sequence[Sentence], seed: int) -> list[Sentence]:
    """The sentences sorted by id, then Fisher--Yates shuffled by ``Random(seed).random()``."""
    seen: set[str] = set()
    for s in sentences:
        if s.id is None:
            raise ValueError("every sentence needs an id to be split reproducibly")
        if s.id in seen:
            raise ValueError(f"duplicate sentence id {s.id!r}: ids must be unique to split")
        seen.add(s.id)
    order = _by_id(sentences)
    rng = Random(seed)
    for i in range(len(order) - 1, 0, -1):
        j = int(rng.random() * (i + 1))
        order[i], order[j] = order[j], order[i]
    return order


def _round(x: float) -> int:
    """Round half up (``281.5`` -> ``282``), robust to float noise."""
    return int(round(x, 9) + 0.5)
