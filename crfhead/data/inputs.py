"""Text to tag, read from a file or stdin in one of three formats: plain text, CoNLL, JSON lines.

* ``text``: one text a line (raw, or tokens split on whitespace when ``tokenized``);
* ``conll``: a column file, the first column the token (:func:`crfhead.data.conll.parse_conll`, with
  no tag column, so every check and warning of training data applies: column counts, a
  ``-DOCSTART-`` inside a sentence); its lines are kept, to be echoed with the predictions
  (:func:`crfhead.data.conll.echo_conll`);
* ``jsonl``: one object a line (:func:`crfhead.data.jsonl.parse_record`).

Text and JSON lines skip blank lines. Files and stdin are decoded alike
(:func:`crfhead.data.textfile.decode_lines`: UTF-8, a byte-order mark dropped, errors naming the
line and column). The format defaults to the file name's suffix (:func:`input_format`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from crfhead.data.conll import DOCSTART, parse_conll, token_lines
from crfhead.data.jsonl import parse_record
from crfhead.data.sentence import Sentence
from crfhead.data.textfile import decode_lines, read_lines, require_file

__all__ = ["INPUT_FORMATS", "STDIN", "TaggingInput", "input_format", "read_input", "source_lines"]

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
