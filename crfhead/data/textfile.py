r"""Reading input text files, and quoting their lines in error messages, the same way everywhere.

Every reader of user files (:mod:`crfhead.data.conll`, :mod:`crfhead.data.msm2013`, the command
line's input, :mod:`crfhead.data.inputs`) goes through :func:`read_lines` (or, for bytes already read
such as stdin's, :func:`decode_lines`; for a stream read as it arrives, :class:`LineStream`), so the
same input gives the same lines and the same errors:

* a UTF-8 byte-order mark at the start of the file is dropped (editors on Windows write one; left
  in, it glues itself to the first token: ``\ufeff-DOCSTART-`` is then a token, not a marker);
* a byte sequence that is not UTF-8 raises :class:`TextEncodingError` naming the file, the line and
  the column, not a bare :class:`UnicodeDecodeError` with a byte offset;
* ``\n``, ``\r\n`` and ``\r`` all end a line (the #MSM2013 test file uses ``\r``); nothing else
  does (unlike :meth:`str.splitlines`, which also splits on ``\x1c``, ``\u2028``, ...: those stay
  inside a line, where a reader can reject or keep them).

What counts as a file to read is decided once, by :func:`require_file`: anything that exists and
is not a folder, so a FIFO (``--input <(zcat corpus.gz)``) and a character device (``/dev/null``,
``/dev/stdin``) are read like a regular file, where :meth:`pathlib.Path.is_file` would call them
"not found".

:func:`quote` bounds what a message shows of an offending line, so a 1 MB line (a file with no line
breaks, a binary file) gives a readable error rather than a megabyte of terminal output.
"""

from __future__ import annotations

import os
import re
import select
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

__all__ = [
    "QUOTE_LIMIT",
    "ByteSource",
    "LineStream",
    "TextEncodingError",
    "clip",
    "decode_lines",
    "quote",
    "read_lines",
    "require_file",
]

QUOTE_LIMIT = 200
"""The most characters of a line an error message quotes."""

_BOM = b"\xef\xbb\xbf"
_NEWLINE = re.compile(r"\r\n|\r|\n")
_BYTE_NEWLINE = re.compile(rb"[\r\n]")
# Byte-order marks of encodings that are not UTF-8 but are often mistaken for it: named in the
# error, since their bytes fail to decode on line 1 with an otherwise puzzling message.
_FOREIGN_BOMS = (
    (b"\xff\xfe", "UTF-16 (little-endian)"),
    (b"\xfe\xff", "UTF-16 (big-endian)"),
)


class TextEncodingError(ValueError):
    """A file that is not valid UTF-8; the message names the file, line and column.

    A :class:`ValueError` (as :class:`UnicodeDecodeError` is), so callers that catch bad input as
    ``ValueError`` keep working.
    """


def clip(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text``, cut to ``limit`` characters with a note of its full length if it is longer."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters in all)"


def quote(line: str, limit: int = QUOTE_LIMIT) -> str:
    """``repr(line)`` for an error message, showing at most ``limit`` characters of it.

    A longer line is cut, and the cut is said outside the quotes (``'abc'... (1,000,000 characters
    in all)``) so that it cannot be mistaken for the line's own text.
    """
    if len(line) <= limit:
        return repr(line)
    return f"{line[:limit]!r}... ({len(line):,} characters in all)"


def require_file(path: str | Path, what: str) -> Path:
    """``path``, once it is known to name something readable as a file.

    ``what`` names it in errors: ``"input"`` gives ``input file not found: PATH`` and ``input is a
    folder, not a file: PATH``.

    A missing path and a folder are refused; anything else (a regular file, a FIFO, a character
    device, a symbolic link to one of them) is accepted: reading it is what tells whether it can be
    read (:func:`read_lines` names it then).

    Raises:
        FileNotFoundError: nothing at ``path`` (or a dangling symbolic link): ``<what> file not
            found``.
        IsADirectoryError: a folder: ``<what> is a folder, not a file``.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{what} is a folder, not a file: {path}")
    if not path.exists():
        raise FileNotFoundError(f"{what} file not found: {path}")
    return path


def read_lines(path: str | Path) -> list[str]:
    r"""The lines of a UTF-8 text file, without their terminators and without a leading BOM.

    The file is read whole (the corpora read here are tens of MB at most) and decoded strictly.
    A final line terminator does not start another (empty) line, so ``"a\nb\n"`` is two lines;
    line ``n`` of the result is ``lines[n - 1]``, the numbering every reader's messages use.

    Anything :func:`require_file` accepts can be read: a FIFO is read to its end.

    Raises:
        FileNotFoundError: the file does not exist (the caller usually checks first, naming it).
        PermissionError: the file cannot be read (naming it).
        TextEncodingError: the file is not UTF-8: the message names the file, the line and column
            of the first bad byte, the byte, and (quoted, bad bytes escaped) that line.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except PermissionError:
        raise PermissionError(f"{path}: not readable (permission denied)") from None
    return decode_lines(data, path)


def decode_lines(data: bytes, name: str | Path) -> list[str]:
    """The lines of UTF-8 ``data`` by :func:`read_lines`'s rules; ``name`` is what errors call it.

    Raises:
        TextEncodingError: ``data`` is not UTF-8 (named ``name``, with line and column).
    """
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _encoding_error(Path(name), data, err) from None
    lines = _NEWLINE.split(text)
    if lines[-1] == "":
        lines.pop()  # the terminator of the last line, or an empty file
    return lines


def _encoding_error(path: Path, data: bytes, err: UnicodeDecodeError) -> TextEncodingError:
    # Strict decoding stops at the first bad byte, so everything before it decodes: count its
    # lines with the same terminators as read_lines.
    before = _NEWLINE.split(data[: err.start].decode("utf-8"))
    start = err.start - len(before[-1].encode("utf-8"))
    newline = _BYTE_NEWLINE.search(data, err.start)
    end = newline.start() if newline else len(data)
    return _line_error(path, len(before), data[start:end], err.start - start, err.end - start, data)


def _line_error(
    path: str | Path, lineno: int, raw: bytes, start: int, end: int, head: bytes
) -> TextEncodingError:
    """The error for line ``lineno`` (bytes ``raw``) whose bytes ``[start, end)`` are not UTF-8.

    ``head`` is the start of the file, where a foreign byte-order mark is looked for.
    """
    column = len(raw[:start].decode("utf-8")) + 1
    line = raw.decode("utf-8", errors="backslashreplace")
    bad = " ".join(f"0x{b:02x}" for b in raw[start:end])
    hint = next(
        (
            f" (it starts with a {name} byte-order mark)"
            for bom, name in _FOREIGN_BOMS
            if head.startswith(bom)
        ),
        "",
    )
    return TextEncodingError(
        f"{path}, line {lineno}, column {column}: not UTF-8 (byte {bad}){hint}; save the file "
        f"as UTF-8: {quote(line)}"
    )


class ByteSource(Protocol):
    """What :class:`LineStream` reads: a binary file, a pipe, stdin's bytes, an in-memory stream."""

    def read(self, size: int = -1, /) -> bytes:
        """At most ``size`` bytes; ``b""`` at the end."""
        ...


class LineStream:
    r"""The lines of a binary stream as they arrive, by :func:`read_lines`'s rules, and whether more wait.

    Iterating gives each line (no terminator; a leading UTF-8 byte-order mark dropped) as soon as
    its terminator is read: ``\n``, ``\r\n`` or ``\r`` (a line ended by a lone ``\r`` is given
    once the next byte shows it is not ``\r\n``), and the last line at the end of the stream. A
    line that is not UTF-8 raises :class:`TextEncodingError` naming ``name``, the line and the column,
    as :func:`read_lines` does, when the iteration reaches it.

    :meth:`ready` says whether the next line can be had without waiting for the writer: a whole
    line is buffered, the stream has ended, or its file descriptor has bytes to read (``select``;
    always so for a regular file). A stream without a file descriptor (an in-memory one) is read
    in chunks, and is ready while a chunk holds a whole line.

    Attributes:
        name: what errors call the stream.
        count: the lines given so far.
    """

    CHUNK = 1 << 16
    """The most bytes one read asks for."""

    def __init__(self, source: ByteSource, name: str) -> None:
        self.name = name
        self.count = 0
        self._source = source
        self._buffer = bytearray()
        self._ended = False
        self._head = b""  # the first line's first bytes (a foreign byte-order mark is named)
        self._started = False
        self._fd: int | None = None
        fileno = getattr(source, "fileno", None)
        if fileno is not None:
            try:
                self._fd = int(fileno())
            except (OSError, ValueError):  # io.UnsupportedOperation is an OSError
                self._fd = None

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        while True:
            raw = self._take()
            if raw is not None:
                return self._decode(raw)
            if self._ended:
                raise StopIteration
            self._read()

    def ready(self) -> bool:
        """Whether the next line (or the end) can be read now, without waiting for more input."""
        if self._ended or self._whole_line() is not None:
            return True
        if self._fd is None:
            return False
        try:
            readable, _, _ = select.select([self._fd], [], [], 0)
        except (OSError, ValueError):  # not selectable here: a batch ends at each line
            return False
        return bool(readable)

    def _read(self) -> None:
        if self._fd is not None:
            chunk = os.read(self._fd, self.CHUNK)
        else:
            read1 = getattr(self._source, "read1", None)
            chunk = read1(self.CHUNK) if read1 is not None else self._source.read(self.CHUNK)
        if not chunk:
            self._ended = True
        self._buffer += chunk
        # The first bytes are kept until they show whether they are a byte-order mark.
        if not self._started and (
            self._ended
            or not _BOM.startswith(self._buffer[: len(_BOM)])
            or len(self._buffer) >= len(_BOM)
        ):
            self._started = True
            if self._buffer.startswith(_BOM):
                del self._buffer[: len(_BOM)]

    def _whole_line(self) -> tuple[int, int] | None:
        """``(end, next)`` of the first buffered line with its terminator, if it is known."""
        if not self._started:
            return None
        match = _BYTE_NEWLINE.search(self._buffer)
        if match is None:
            return (len(self._buffer), len(self._buffer)) if self._ended and self._buffer else None
        end = match.start()
        if self._buffer[end] == 0x0D:  # "\r": "\r\n" is one terminator
            if end + 1 == len(self._buffer) and not self._ended:
                return None  # the next byte decides
            if self._buffer[end + 1 : end + 2] == b"\n":
                return end, end + 2
        return end, end + 1

    def _take(self) -> bytes | None:
        if not self._started and not self._ended:
            return None
        found = self._whole_line()
        if found is None:
            return None
        end, following = found
        raw = bytes(self._buffer[:end])
        del self._buffer[:following]
        return raw

    def _decode(self, raw: bytes) -> str:
        self.count += 1
        if self.count == 1:
            self._head = raw[:4]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise _line_error(self.name, self.count, raw, err.start, err.end, self._head) from None
