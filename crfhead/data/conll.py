r"""CoNLL-style column files, read and written.

One token per line, blank lines between sentences, ``-DOCSTART-`` lines between documents
(CoNLL-2003), tab- or space-separated (WNUT 2017), any tagging scheme in and out.

Columns are split on runs of ASCII spaces and tabs (:data:`COLUMN_SPACE`), or on the ``separator``
given, and nothing else: a token may hold any other character :meth:`str.isspace` calls space
(a no-break space in ``New\u00a0York``, ``\u2028``, ``\x1c``), which :meth:`str.split` would cut
the token at (silently losing its second half in a file of one-column lines, or blaming the line
after it for a column count). Lines end at ``\n``, ``\r\n`` and ``\r`` only
(:func:`crfhead.data.textfile.read_lines`). A line of spaces and tabs only is blank.

:func:`read_conll` returns the sentences and a :class:`~crfhead.data.sentence.ReadReport`
(:func:`parse_conll` does the same for lines already read, such as stdin's; :func:`iter_conll` yields
each sentence as soon as the line ending it is read, for a stream). A line with
too few columns names the file and line; a tag outside the input scheme names the tag, file and line;
an invalid tag sequence (``I-X`` after ``O`` in BIO) is repaired with a warning and counted; an empty
sentence (a run of blank lines) is skipped and counted.

Input is read by :func:`crfhead.data.textfile.read_lines`: a UTF-8 byte-order mark is dropped (so a
first ``-DOCSTART-`` is a marker, not a token), bytes that are not UTF-8 name the file, line and
column, and messages quote at most 200 characters of a line. A file read with a tag column whose
lines have one column only (the token: the tag column *is* the token column) has "no tag column",
an error rather than tokens taken as tags; read it with ``tag_col=None`` for unlabelled text. A
``-DOCSTART-`` line inside a sentence (no blank line before it) still ends the sentence, but is
counted under :data:`DOCSTART_IN_SENTENCE` and so warned about: it usually means a file made by
concatenation or a lost blank line.

:func:`write_conll` writes sentences; :func:`echo_conll` writes a file back as it was read, every
line and column kept, with one more column (a prediction) appended to each token line
(:func:`token_lines` finds them), so the output is scored as it is (conlleval).

Partial labels (issue 29): a tag cell ``B-PER|B-ORG`` is the set of labels the token may take and
``*`` any label; they land in :attr:`Sentence.allowed <crfhead.data.sentence.Sentence.allowed>`
(:mod:`crfhead.data.partial`). A malformed cell (``B-PER|``, ``|``, ``**``, ``*|O``, a member
outside the scheme) names the file and line. ``unknown_tags=["O"]`` makes every ``O`` any label.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from crfhead.data.partial import PLACEHOLDER, convert_partial, mark_unknown, parse_cell
from crfhead.data.sentence import ANY, ReadReport, Sentence, repair_sentences
from crfhead.data.textfile import quote, read_lines, require_file
from crfhead.schemes import canonical_scheme

__all__ = [
    "COLUMN_SPACE",
    "DOCSTART",
    "DOCSTART_IN_SENTENCE",
    "CoNLLFormatError",
    "echo_conll",
    "is_blank",
    "iter_conll",
    "parse_conll",
    "read_conll",
    "split_columns",
    "token_lines",
    "write_conll",
]

DOCSTART = "-DOCSTART-"
"""The first column of a line that opens a new document (CoNLL-2003)."""

DOCSTART_IN_SENTENCE = "-DOCSTART- inside a sentence (the sentence ended there)"
"""Report event: a document marker with no blank line before it, in the middle of a sentence."""


COLUMN_SPACE = " \t"
"""What separates columns when no separator is given (a run of them), and all a blank line holds."""

_COLUMN_RUN = re.compile(f"[{COLUMN_SPACE}]+")
_UNWRITABLE = frozenset(COLUMN_SPACE + "\n\r")


class CoNLLFormatError(ValueError):
    """A malformed line of a column file; the message names the file and line number."""


def read_conll(
    path: str | Path,
    *,
    token_col: int = 0,
    tag_col: int | None = -1,
    columns: Mapping[str, int] | None = None,
    scheme: str = "BIO",
    out_scheme: str | None = None,
    separator: str | None = None,
    docstart: str = DOCSTART,
    warn: bool = True,
    unknown_tags: Sequence[str] = (),
) -> tuple[list[Sentence], ReadReport]:
    """Read a column file.

    Args:
        path: the file.
        token_col: the column of the token.
        tag_col: the column of the tag (default: the last); ``None`` for unlabelled text.
        columns: extra columns to keep, by name (e.g. ``{"pos": 1, "chunk": 2}`` for CoNLL-2003).
        scheme: the tagging scheme of the file (``"BIO"``, ``"IOB1"``, ``"BIOES"``, ...).
        out_scheme: re-encode the tags in this scheme (default: keep ``scheme``).
        separator: the column separator (default: any run of ASCII spaces and tabs).
        docstart: a token that opens a new document when it is the first column of a line.
        warn: emit one warning summarising repairs and skips.
        unknown_tags: tags (in ``scheme``) read as "any label" (partial labels), e.g. ``["O"]``
            for a file where only some entities were annotated.

    Returns:
        ``(sentences, report)``; each sentence's ``doc_id`` is ``"<file stem>:<n>"`` (the n-th
        document, from 0; everything before the first ``-DOCSTART-`` is document 0) and its ``id``
        is ``"<file name>:<first line>"``.

    Raises:
        FileNotFoundError: the file does not exist (the path is named).
        CoNLLFormatError: a line with too few columns, one column only when ``tag_col`` is set
            ("no tag column"), or a tag outside ``scheme``.
        TextEncodingError: the file is not UTF-8 (a :class:`ValueError` naming file and line).
    """
    path = require_file(path, "CoNLL")
    scheme = canonical_scheme(scheme)
    sentences, report = parse_conll(
        read_lines(path),
        name=str(path),
        token_col=token_col,
        tag_col=tag_col,
        columns=columns,
        scheme=scheme,
        separator=separator,
        docstart=docstart,
    )
    if unknown_tags:
        n = mark_unknown(sentences, unknown_tags)
        report.count(f"positions tagged {'/'.join(unknown_tags)} read as any label", n=n)
    sentences = repair_sentences(sentences, scheme, report)
    if out_scheme is not None and canonical_scheme(out_scheme) != scheme:
        for s in sentences:
            convert_partial(s, scheme, out_scheme)
    report.sentences = len(sentences)
    report.tokens = sum(len(s) for s in sentences)
    if warn:
        report.warn_if_changed()
    return sentences, report


def split_columns(line: str, separator: str | None = None) -> list[str]:
    r"""The columns of a line: split on ``separator``, or on runs of spaces and tabs (``None``).

    With ``None``, spaces and tabs at either end are dropped first; no other character splits (see
    the module docstring): ``"New\u00a0York B-LOC"`` is two columns.
    """
    if separator is not None:
        return line.split(separator)
    stripped = line.strip(COLUMN_SPACE)
    return _COLUMN_RUN.split(stripped) if stripped else []


def is_blank(line: str) -> bool:
    """Whether a line holds nothing but ASCII spaces and tabs (a sentence break)."""
    return not line.strip(COLUMN_SPACE)


def parse_conll(
    lines: Iterable[str],
    *,
    name: str,
    token_col: int = 0,
    tag_col: int | None = -1,
    columns: Mapping[str, int] | None = None,
    scheme: str = "BIO",
    separator: str | None = None,
    docstart: str = DOCSTART,
) -> tuple[list[Sentence], ReadReport]:
    """Parse the lines of a column file as :func:`read_conll` does, before repairs and counts.

    Args:
        lines: the file's lines, without terminators (:func:`crfhead.data.textfile.read_lines`).
        name: what messages call the source (a path, ``<stdin>``); its stem names the documents.
        token_col: as in :func:`read_conll`.
        tag_col: as in :func:`read_conll`.
        columns: as in :func:`read_conll`.
        scheme: the tagging scheme the tags are checked in.
        separator: as in :func:`read_conll`.
        docstart: as in :func:`read_conll`.

    Returns:
        ``(sentences, report)`` as read: invalid tag sequences are not repaired, and the report's
        sentence and token totals are not filled in (:func:`read_conll` does both).

    Raises:
        CoNLLFormatError: as :func:`read_conll`.
    """
    report = ReadReport(source=name)
    sentences = list(
        iter_conll(
            lines,
            report=report,
            name=name,
            token_col=token_col,
            tag_col=tag_col,
            columns=columns,
            scheme=scheme,
            separator=separator,
            docstart=docstart,
        )
    )
    return sentences, report


def iter_conll(
    lines: Iterable[str],
    *,
    report: ReadReport,
    name: str,
    token_col: int = 0,
    tag_col: int | None = -1,
    columns: Mapping[str, int] | None = None,
    scheme: str = "BIO",
    separator: str | None = None,
    docstart: str = DOCSTART,
) -> Iterator[Sentence]:
    """:func:`parse_conll` as a generator: each sentence as soon as the line that ends it is read.

    A sentence ends at the blank line or ``-DOCSTART-`` line after it (read before the sentence is
    yielded) or at the end of ``lines``; ``lines`` is read no further than that, so a stream is
    parsed as it arrives. What :func:`parse_conll` reports is counted into ``report``.

    Raises:
        CoNLLFormatError: as :func:`read_conll`, when the stream reaches the line.
    """
    columns = dict(columns or {})
    stem = Path(name).stem
    pending: list[Sentence] = []  # what flush() made, yielded by the loop
    made = 0  # sentences made so far
    doc = 0
    tokens: list[str] = []
    tags: list[str] = []
    allowed: list[tuple[str, ...] | None] = []  # label sets (partial cells), per token
    extra: dict[str, list[str]] = {key: [] for key in columns}
    first_line = 0
    prev_blank = False  # a blank line right after another one is an empty sentence
    width: int | None = None  # columns per line, fixed by the first token line
    width_line = 0
    used = [token_col, *columns.values(), *([] if tag_col is None else [tag_col])]
    needed = max(c + 1 if c >= 0 else -c for c in used)  # columns a line must have

    def flush() -> None:
        nonlocal tokens, tags, allowed, extra, made
        if tokens:
            made += 1
            partial = tag_col is not None and any(a is not None for a in allowed)
            pending.append(
                Sentence(
                    tokens=tokens,
                    tags=tags if tag_col is not None else None,
                    doc_id=f"{stem}:{doc}",
                    columns=extra,
                    id=f"{Path(name).name}:{first_line}",
                    allowed=allowed if partial else None,
                )
            )
        tokens, tags, allowed, extra = [], [], [], {key: [] for key in columns}

    for lineno, line in enumerate(lines, start=1):
        if is_blank(line):
            if not tokens and prev_blank:
                report.skipped_empty += 1
            flush()
            yield from pending
            pending.clear()
            prev_blank = True
            continue
        fields = split_columns(line, separator)
        if fields[0] == docstart:
            if tokens:
                report.count(DOCSTART_IN_SENTENCE, f"{name}, line {lineno}")
            flush()
            if report.documents or made:
                doc += 1
            yield from pending
            pending.clear()
            report.documents += 1
            prev_blank = False
            continue
        if width is None:
            width, width_line = len(fields), lineno
        elif len(fields) != width:
            raise CoNLLFormatError(
                f"{name}, line {lineno}: expected {width} columns as on line {width_line}, "
                f"got {len(fields)}: {quote(line)}"
            )
        if len(fields) < needed:
            raise CoNLLFormatError(
                f"{name}, line {lineno}: expected at least {needed} columns, got {len(fields)}: "
                f"{quote(line)}"
            )
        # The default tag column, the last, is the token column itself on a one-column line: the
        # token would be read as its own tag (silently so for tokens like "O"), so say what is
        # missing instead. Only the first token line can get here: the others have its width.
        if tag_col is not None and tag_col % len(fields) == token_col % len(fields):
            raise CoNLLFormatError(
                f"{name}, line {lineno}: no tag column: the line has {len(fields)} column(s) and "
                f"the tag column ({tag_col}) is the token column ({token_col}); a training or "
                f"evaluation file needs 'token ... tag' lines (read unlabelled text with "
                f"tag_col=None): {quote(line)}"
            )
        if not tokens:
            first_line = lineno
        prev_blank = False
        tokens.append(fields[token_col])
        if tag_col is not None:
            tag = fields[tag_col]
            try:
                label_set = parse_cell(tag, scheme)
            except ValueError as err:
                # The scheme's message quotes the tag whole: bound it, keep the explanation.
                message = str(err).replace(repr(tag), quote(tag))
                raise CoNLLFormatError(f"{name}, line {lineno}: {message}") from None
            tags.append(tag if label_set is None else PLACEHOLDER)
            allowed.append(label_set)
        for key, col in columns.items():
            extra[key].append(fields[col])
    flush()
    yield from pending


def write_conll(
    sentences: Sequence[Sentence],
    path: str | Path,
    *,
    columns: Sequence[str] = (),
    docstart: bool = True,
    separator: str = " ",
) -> None:
    """Write sentences as ``token [extra columns...] tag`` lines.

    Args:
        sentences: what to write (unlabelled sentences get tag ``O``; partial positions their
            ``*`` or ``|``-separated cell, so the file reads back the same).
        path: the output file (its folder is created).
        columns: names of extra columns to write between token and tag.
        docstart: write a ``-DOCSTART-`` line whenever ``doc_id`` changes.
        separator: the column separator.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out: list[str] = []
    current: str | None = None
    for s in sentences:
        if docstart and s.doc_id is not None and s.doc_id != current:
            current = s.doc_id
            out.append(separator.join([DOCSTART, *(["-X-"] * len(columns)), "O"]))
            out.append("")
        tags = s.tags if s.tags is not None else ["O"] * len(s)
        # A partial position is written as the reader reads it: ``*`` or ``B-PER|B-ORG``.
        sets = s.allowed if s.allowed is not None else [None] * len(s)
        cells = [
            tag if a is None else ("*" if a == ANY else "|".join(a))
            for tag, a in zip(tags, sets, strict=True)
        ]
        for i, token in enumerate(s.tokens):
            # What the reader would split or end the line at; other space (a no-break space) is
            # kept inside the token, as the reader keeps it.
            if not token or any(ch in _UNWRITABLE for ch in token) or separator in token:
                raise ValueError(
                    f"token {token!r} of sentence {s.id} cannot be written to a column file"
                )
            out.append(separator.join([token, *(s.columns[c][i] for c in columns), cells[i]]))
        out.append("")
    path.write_text("\n".join(out) + ("\n" if out else ""), encoding="utf-8")


def token_lines(
    lines: Sequence[str], *, separator: str | None = None, docstart: str = DOCSTART
) -> list[int]:
    """The indices of the token lines of a column file: neither blank nor a document marker."""
    return [
        i
        for i, line in enumerate(lines)
        if not is_blank(line) and split_columns(line, separator)[0] != docstart
    ]


def echo_conll(
    lines: Sequence[str], tokens_at: Sequence[int], column: Sequence[str], separator: str | None
) -> list[str]:
    """Every line of a column file, each token line with one more column appended.

    Args:
        lines: the file's lines.
        tokens_at: the indices of its token lines (:func:`token_lines`).
        column: the value appended to each token line (a predicted tag), aligned with ``tokens_at``.
        separator: the file's separator; ``None`` (runs of spaces and tabs): the line's trailing
            spaces and tabs are dropped and the new column copies a tab if the line has one, else a
            space.

    Raises:
        AssertionError: ``column`` and ``tokens_at`` differ in length (a caller's bug).
    """
    if len(column) != len(tokens_at):
        raise AssertionError(f"{len(column)} tags for {len(tokens_at)} token lines")
    out = list(lines)
    for i, value in zip(tokens_at, column, strict=True):
        line = out[i]
        if separator is None:
            line = line.rstrip(COLUMN_SPACE)
            sep = "\t" if "\t" in line else " "
        else:
            sep = separator
        out[i] = f"{line}{sep}{value}"
    return out
