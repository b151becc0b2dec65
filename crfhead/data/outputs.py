r"""Tagged text written out: JSON lines, or ``token tag`` lines; to a file or stdout, whole or as it comes.

The CoNLL echo of a CoNLL input (every input line and column kept, the prediction appended) is
:func:`crfhead.data.conll.echo_conll`. Files are written as UTF-8, a newline after every line; the
folder of an output file is created. :class:`LineWriter` writes batch by batch, flushing each: the
file is opened at the first write (so an error before any output leaves no file), and created empty
when the run ends with nothing to write.

A JSON line is one line for every reader: ``json.dumps(..., ensure_ascii=False)`` keeps text
readable but leaves U+0085, U+2028 and U+2029 raw, which :meth:`str.splitlines` (and JavaScript
before ES2019, and many editors) take as line breaks, so one record would read as several. Those
characters, and the other ones :meth:`str.splitlines` breaks on, are written as ``\uXXXX``
escapes: the JSON is the same, and ``json.loads`` gives back the same string.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Protocol, TextIO

from crfhead.data.tokenize import Token

__all__ = [
    "EMPTY_RECORD",
    "OUTPUT_FORMATS",
    "STDOUT",
    "LineWriter",
    "json_line",
    "token_tag_lines",
    "write_lines",
]

OUTPUT_FORMATS = ("conll", "jsonl")
"""The formats tagged text is written in."""
STDOUT = "-"
"""The output spec that names stdout."""

EMPTY_RECORD: dict[str, Any] = {"text": "", "tokens": [], "tags": [], "entities": []}
"""The JSON line of a blank input line: nothing tagged (the output keeps one line per input line)."""

# Every character str.splitlines() ends a line at, but "\n" and "\r" (json.dumps escapes those,
# and every control character below U+0020, already): each is written as its \uXXXX escape.
_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_ESCAPES = {ord(c): f"\\u{ord(c):04x}" for c in _LINE_BREAKS}


def json_line(record: Mapping[str, Any], ident: str | None) -> str:
    """One JSON line: ``{"id": ident}`` (when given) followed by ``record``'s fields.

    Not ASCII-escaped, but every character that :meth:`str.splitlines` breaks a line at is escaped
    (see the module docstring), so the result is always exactly one line.
    """
    obj: dict[str, Any] = {} if ident is None else {"id": ident}
    obj.update(record)
    return json.dumps(obj, ensure_ascii=False).translate(_ESCAPES)


def token_tag_lines(records: Iterable[tuple[str, Sequence[Token], Sequence[str]]]) -> list[str]:
    """``token tag`` lines for ``(text, tokens, tags)`` records, a blank line after each record.

    The token is written as it stands in the text (``text[start:end]``, its whitespace runs joined
    by ``_``; ``_`` for an empty one), so that the line has exactly two columns.
    """
    out: list[str] = []
    for text, tokens, tags in records:
        for token, tag in zip(tokens, tags, strict=True):
            surface = text[token.start : token.end] or token.text
            out.append(f"{'_'.join(surface.split()) or '_'} {tag}")
        out.append("")
    return out


def write_lines(spec: str, lines: Sequence[str]) -> None:
    """Write ``lines`` to the file ``spec`` (its folder created), or to stdout for ``-``, as UTF-8."""
    text = "".join(f"{line}\n" for line in lines)
    if spec == STDOUT:
        stream: TextIO = sys.stdout
        if hasattr(stream, "buffer"):
            stream.flush()
            stream.buffer.write(text.encode("utf-8"))
            stream.buffer.flush()
        else:
            stream.write(text)
        return
    path = Path(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


class _Sink(Protocol):
    def write(self, data: bytes, /) -> int: ...

    def flush(self) -> None: ...


class LineWriter:
    """Lines written as they come to the file ``spec`` (its folder created) or stdout (``-``), UTF-8.

    Each :meth:`write` is flushed. A context manager: leaving it without an error creates an empty
    file if nothing was written; with an error, what was written stays.

    Attributes:
        written: how many lines were written so far.
    """

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.written = 0
        self._out: _Sink | None = None
        self._file: BinaryIO | None = None  # the output file, closed at the end

    def _open(self) -> _Sink:
        if self._out is None:
            if self.spec == STDOUT:
                sys.stdout.flush()
                binary: BinaryIO | None = getattr(sys.stdout, "buffer", None)
                # A text stream without bytes under it (a test's StringIO) is written as text.
                self._out = _TextSink(sys.stdout) if binary is None else binary
            else:
                path = Path(self.spec)
                path.parent.mkdir(parents=True, exist_ok=True)
                self._file = path.open("wb")
                self._out = self._file
        return self._out

    def write(self, lines: Sequence[str]) -> None:
        """Write ``lines``, a newline after each, and flush them."""
        if not lines:
            return
        out = self._open()
        out.write("".join(f"{line}\n" for line in lines).encode("utf-8"))
        out.flush()
        self.written += len(lines)

    def __enter__(self) -> LineWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if error is None:
            self._open()
        if self._file is not None:
            self._file.close()


class _TextSink:
    """A text stream written to as a binary one (UTF-8)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, data: bytes) -> int:
        return self._stream.write(data.decode("utf-8"))

    def flush(self) -> None:
        self._stream.flush()
