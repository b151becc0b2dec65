"""JSON lines of text to tag: one object a line, with ``"text"`` (a string) or ``"tokens"``.

An object may carry an ``"id"`` (any JSON value, kept as a string); ``"tokens"``, when given, wins
over ``"text"`` and must be a list of non-empty strings. A line that is not such an object is an
error naming the source and line and quoting the line (bounded by
:func:`crfhead.data.textfile.quote`).
"""

from __future__ import annotations

import json

from crfhead.data.textfile import quote

__all__ = ["parse_record"]


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
    if not isinstance(record, dict):
        raise ValueError(f'{where}: expected an object with "text" or "tokens": {quote(line)}')
    ident = record.get("id")
    ident = None if ident is None else str(ident)
    tokens = record.get("tokens")
    if tokens is not None:
        if not isinstance(tokens, list) or not all(isinstance(t, str) and t for t in tokens):
            raise ValueError(f'{where}: "tokens" must be a list of non-empty strings')
        return list(tokens), ident
    text = record.get("text")
    if not isinstance(text, str):
        raise ValueError(f'{where}: expected "text" (a string) or "tokens": {quote(line)}')
    return text, ident
