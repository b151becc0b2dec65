"""Text to tag, read from a file or stdin in one of three formats: plain text, CoNLL, JSON lines.

* ``text``: one text a line (raw, or tokens split on whitespace when ``tokenized``);
* ``conll``: a column file, the first column the token (:func:`crfhead.data.conll.parse_conll`, with
  no tag column, so every check and warning of training data applies: column counts, a
  ``-DOCSTART-`` inside a sentence); its lines are kept, to be echoed with the predictions
  (:func:`crfhead.data.conll.echo_conll`);
* ``jsonl``: one object a line (:func:`crfhead.data.jsonl.parse_record`).

:func:`read_input` reads the whole input, and its text and JSON lines skip blank lines.
:class:`InputStream` (:func:`open_input`; what ``crfhead predict`` reads) reads as the input
arrives, one :class:`InputRecord` a line of text or JSON lines (a blank line is a record with
nothing to tag, so that the output keeps one line per input line) and one a CoNLL sentence (with
the lines it spans, to echo); :func:`batches` groups records up to a size, but never waits for a
batch to fill while the input has nothing more ready. Files and stdin are decoded alike
(:mod:`crfhead.data.textfile`: UTF-8, a byte-order mark dropped, errors naming the line and column).
The format defaults to the file name's suffix (:func:`input_format`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TextIO, TypeVar

from crfhead.data.conll import DOCSTART, iter_conll, parse_conll, token_lines
from crfhead.data.jsonl import parse_record
from crfhead.data.sentence import ReadReport, Sentence
from crfhead.data.textfile import ByteSource, LineStream, decode_lines, read_lines, require_file

__all__ = [
    "INPUT_FORMATS",
    "STDIN",
    "InputRecord",
    "InputStream",
    "TaggingInput",
    "batches",
    "input_format",
    "open_input",
    "read_input",
    "source_lines",
]

_T = TypeVar("_T")

INPUT_FORMATS = ("text", "conll", "jsonl")
"""The formats :func:`read_input` reads."""
STDIN = "-"
"""The input spec that names stdin."""
_SUFFIX_FORMATS = {".conll": "conll", ".iob": "conll", ".bio": "conll", ".jsonl": "jsonl"}
_SUFFIX_FORMATS |= {".json": "jsonl", ".ndjson": "jsonl"}


@dataclass
class TaggingInput:
    """What :func:`read_input` read: records to tag and, for CoNLL, the raw lines to echo.

    Attributes:
        name: the source as messages name it (a path, or ``<stdin>``).
        fmt: its format.
        items: text and JSON lines: each record, a raw text or a list of tokens.
        ids: each record's id (``file:line`` for text; a JSON line's ``"id"``; a sentence's id).
        sentences: CoNLL: the sentences.
        lines: CoNLL: every input line.
        token_lines: CoNLL: the indices of the token lines in :attr:`lines`.
    """

    name: str
    fmt: str
    items: list[str | list[str]] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)
    sentences: list[Sentence] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    token_lines: list[int] = field(default_factory=list)


def input_format(spec: str, given: str | None = None) -> str:
    """``given``, else the format of ``spec``'s suffix (``.conll`` conll, ``.jsonl`` jsonl, else text)."""
    if given is not None:
        return given
    return "text" if spec == STDIN else _SUFFIX_FORMATS.get(Path(spec).suffix.lower(), "text")


def source_lines(spec: str) -> tuple[list[str], str]:
    """The lines of ``spec`` (a path, or ``-`` for stdin) read as training data is, and its name.

    A FIFO (``<(cmd)``) or a character device (``/dev/null``) is read as a file is
    (:func:`~crfhead.data.textfile.require_file`).

    Raises:
        FileNotFoundError: no such file.
        IsADirectoryError: a folder.
        PermissionError: not readable.
        TextEncodingError: not UTF-8 (names the file, line and column).
    """
    if spec == STDIN:
        stream = sys.stdin
        data = stream.buffer.read() if hasattr(stream, "buffer") else stream.read().encode("utf-8")
        return decode_lines(data, "<stdin>"), "<stdin>"
    path = require_file(spec, "input")
    return read_lines(path), str(path)


def read_input(
    spec: str, fmt: str, *, separator: str | None = None, tokenized: bool = False
) -> TaggingInput:
    """Read text to tag: ``fmt`` is ``"text"``, ``"conll"`` or ``"jsonl"`` (see the module docstring).

    Args:
        spec: a path, or ``-`` for stdin.
        fmt: the format.
        separator: CoNLL's column separator (default: any whitespace).
        tokenized: text: split each line on whitespace (no tokenizer).

    Raises:
        FileNotFoundError: no such file.
        ValueError: a malformed line (CoNLL columns, JSON, a record without ``text`` or
            ``tokens``), naming the file and line; a file that is not UTF-8.
    """
    lines, name = source_lines(spec)
    read = TaggingInput(name=name, fmt=fmt)
    if fmt == "conll":
        sentences, report = parse_conll(
            lines, name=name, tag_col=None, separator=separator, docstart=DOCSTART
        )
        report.sentences, report.tokens = len(sentences), sum(len(s) for s in sentences)
        report.warn_if_changed()
        read.sentences, read.lines = sentences, lines
        read.token_lines = token_lines(lines, separator=separator, docstart=DOCSTART)
        assert len(read.token_lines) == report.tokens  # every token line is one token
        read.ids = [s.id for s in sentences]
        return read
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        if fmt == "text":
            read.items.append(line.split() if tokenized else line)
            read.ids.append(where)
            continue
        item, ident = parse_record(line, where)
        read.items.append(item)
        read.ids.append(ident)
    return read


@dataclass(frozen=True)
class InputRecord:
    """One record of an :class:`InputStream`.

    Attributes:
        item: what to tag: a raw text or a list of tokens; ``None`` for nothing (a blank line of
            text or JSON lines; the CoNLL lines after the last sentence).
        ident: its id (as :attr:`TaggingInput.ids`).
        lines: CoNLL: the input lines this record spans (those since the previous record, up to
            and including the line that ended the sentence), to echo.
        sentence: CoNLL: the sentence.
    """

    item: str | list[str] | None
    ident: str | None = None
    lines: tuple[str, ...] = ()
    sentence: Sentence | None = None


class InputStream:
    """The records of a file or stdin, read as they arrive (iterate it once); a context manager.

    Attributes:
        name: the source as messages name it (a path, or ``<stdin>``).
        fmt: its format.
    """

    def __init__(
        self,
        source: ByteSource,
        name: str,
        fmt: str,
        *,
        separator: str | None = None,
        tokenized: bool = False,
        close: bool = False,
    ) -> None:
        self.name, self.fmt = name, fmt
        self._source, self._close = source, close
        self._lines = LineStream(source, name)
        self._separator, self._tokenized = separator, tokenized
        self._report = ReadReport(source=name)

    @property
    def lines_read(self) -> int:
        """How many input lines were read so far."""
        return self._lines.count

    def ready(self) -> bool:
        """Whether more input (or its end) can be read now, without waiting for the writer."""
        return self._lines.ready()

    def __iter__(self) -> Iterator[InputRecord]:
        if self.fmt == "conll":
            return self._conll()
        return self._records()

    def _records(self) -> Iterator[InputRecord]:
        for lineno, line in enumerate(self._lines, 1):
            where = f"{self.name}:{lineno}"
            if not line.strip():
                yield InputRecord(None)
            elif self.fmt == "text":
                yield InputRecord(line.split() if self._tokenized else line, where)
            else:
                item, ident = parse_record(line, where)
                yield InputRecord(item, ident)

    def _conll(self) -> Iterator[InputRecord]:
        seen: list[str] = []

        def recorded() -> Iterator[str]:
            for line in self._lines:
                seen.append(line)
                yield line

        report = self._report
        sentences = iter_conll(
            recorded(), report=report, name=self.name, tag_col=None, separator=self._separator
        )
        for sentence in sentences:
            report.sentences += 1
            report.tokens += len(sentence)
            lines = tuple(seen)
            seen.clear()
            at = token_lines(lines, separator=self._separator, docstart=DOCSTART)
            # The lines since the previous sentence hold this one's tokens and no other's.
            assert len(at) == len(sentence), (len(at), len(sentence))
            yield InputRecord(list(sentence.tokens), sentence.id, lines, sentence)
        if seen:
            yield InputRecord(None, lines=tuple(seen))
        report.warn_if_changed()

    def __enter__(self) -> InputStream:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        close = getattr(self._source, "close", None)
        if self._close and close is not None:
            close()


def open_input(
    spec: str, fmt: str, *, separator: str | None = None, tokenized: bool = False
) -> InputStream:
    """The :class:`InputStream` of ``spec`` (a path, or ``-`` for stdin) in format ``fmt``.

    Args:
        spec: a path (anything :func:`~crfhead.data.textfile.require_file` accepts: a FIFO is read
            as it is written), or ``-`` for stdin.
        fmt: ``"text"``, ``"conll"`` or ``"jsonl"``.
        separator: CoNLL's column separator (default: runs of spaces and tabs).
        tokenized: text: split each line on whitespace (no tokenizer).

    Raises:
        FileNotFoundError: no such file.
        IsADirectoryError: a folder.
        PermissionError: not readable.
    """
    source: ByteSource
    if spec == STDIN:
        name, close = "<stdin>", False
        binary = getattr(sys.stdin, "buffer", None)
        # A text stream without bytes under it (a test's StringIO) is read line by line.
        source = _Encoded(sys.stdin) if binary is None else binary
    else:
        path = require_file(spec, "input")
        name, close = str(path), True
        try:
            source = path.open("rb", buffering=0)
        except PermissionError:
            raise PermissionError(f"{path}: not readable (permission denied)") from None
    return InputStream(source, name, fmt, separator=separator, tokenized=tokenized, close=close)


class _Encoded:
    """A text stream read as UTF-8 bytes, a line at a time (it has no file descriptor)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def read(self, size: int = -1, /) -> bytes:
        return self._stream.readline().encode("utf-8")


def batches(
    records: Iterable[_T], size: int, ready: Callable[[], bool] = lambda: True
) -> Iterator[list[_T]]:
    """``records`` in lists of at most ``size``, each ended early when ``ready()`` says nothing waits.

    A batch is given once it holds ``size`` records, or as soon as the next record cannot be read
    without waiting (``ready()`` is false), or at the end; so a slow writer's records are tagged as
    they come, a file's ``size`` at a time. When reading a record raises, the records read before it
    are given first, then the error is raised.
    """
    batch: list[_T] = []
    try:
        for record in records:
            batch.append(record)
            if len(batch) >= size or not ready():
                yield batch
                batch = []
    except Exception:
        if batch:
            yield batch
        raise
    if batch:
        yield batch
