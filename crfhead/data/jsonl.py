r"""JSON lines of text to tag: one object a line, with ``"text"`` (a string) or ``"tokens"``.

An object may carry an ``"id"`` (any JSON value, kept as a string); ``"tokens"``, when given, wins
over ``"text"`` and must be a list of non-empty strings. A line that is not such an object is an
error naming the source and line and quoting the line (bounded by
:func:`crfhead.data.textfile.quote`); so is a line nested too deeply for the JSON parser (a
:class:`RecursionError` otherwise, which the command line would report as a bug), and a string
holding a lone UTF-16 surrogate (the escape ``"\ud800"`` is valid JSON but no character: it could
not be written out as UTF-8, and the error would then name neither file nor line).
"""

from __future__ import annotations

import json
import re

from crfhead.data.textfile import quote

__all__ = ["parse_record"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_record(line: str, where: str) -> tuple[str | list[str], str | None]:
    """The text or tokens of one JSON line, and its ``id`` if it has one.

    Args:
        line: the line.
        where: what errors call it (``file:line``).

    Raises:
        ValueError: not JSON, not an object, or without a string ``"text"`` or a valid ``"tokens"``.
    """
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: not JSON ({err.msg}): {quote(line)}") from None
    except RecursionError:
        # The parser recurses once per nesting level: 100,000 "[" exhaust the stack. A text to
        # tag is never nested like that, so this is bad input, reported as such.
        raise ValueError(f"{where}: JSON nested too deeply to read: {quote(line)}") from None
    if not isinstance(record, dict):
        raise ValueError(f'{where}: expected an object with "text" or "tokens": {quote(line)}')
    ident = record.get("id")
    ident = None if ident is None else _no_surrogate(str(ident), "id", where)
    tokens = record.get("tokens")
    if tokens is not None:
        if not isinstance(tokens, list) or not all(isinstance(t, str) and t for t in tokens):
            raise ValueError(f'{where}: "tokens" must be a list of non-empty strings')
        return [_no_surrogate(t, "tokens", where) for t in tokens], ident
    text = record.get("text")
    if not isinstance(text, str):
        raise ValueError(f'{where}: expected "text" (a string) or "tokens": {quote(line)}')
    return _no_surrogate(text, "text", where), ident


def _no_surrogate(value: str, key: str, where: str) -> str:
    """``value`` (a string), once it is known to hold no lone surrogate.

    Raises:
        ValueError: naming ``where``, the key and the surrogate's escape.
    """
    found = _SURROGATE.search(value)
    if found is not None:
        raise ValueError(
            f'{where}: "{key}" holds a lone surrogate \\u{ord(found.group()):04x}, which is not a '
            f"character (a UTF-16 half without its pair); write the character itself or its full "
            f"surrogate pair: {quote(value)}"
        )
    return value
