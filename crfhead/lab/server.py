"""The lab's web server: the static page, and the user's own model on a sentence they type.

Standard library only (:class:`http.server.ThreadingHTTPServer`), bound to ``127.0.0.1`` and nothing
else. Two kinds of request:

* ``GET`` of a file under the static folder (``crfhead/lab/static``): the path is decoded once, and a
  path with a ``..`` or ``.`` segment, a backslash, a NUL, a symbolic link anywhere below the folder,
  or that lands outside it is answered 404, as is a folder.
* The API, answers in JSON: ``GET /api/model`` (``{"loaded", "labels", "head", "encoder", "path",
  ...}``), ``GET /api/payloads`` (``{"payloads": [tab, ...]}``, the tabs whose ``data/<tab>.json``
  exists, so the page asks for no file that is missing) and ``POST /api/tag`` with
  ``{"text": str, "k": int}`` (``k`` the number of best paths, 1 to :data:`MAX_K`, default 5): the text's tokens with character offsets, the decoded tags, the entities
  with their exact probabilities, the ``T x K`` node marginals and the ``k`` best paths with their
  probabilities ``exp(score - log Z)``. With ``"spans": [[start, end, type], ...]`` (known entities
  pinned by character offsets, ``end`` exclusive) and/or ``"forbid": [label | type | [start, end,
  label or type], ...]``, all of it is conditioned on them, as
  :meth:`~crfhead.inference.text_tagger.TextTagger.tag` with ``spans=``/``forbid=`` conditions it
  (the probabilities then ``exp(score - log Z_allowed)``), and the answer adds ``spans``,
  ``forbid``, ``pinned`` (the indices of the entities that are pins), ``free`` (the tags and
  entities without the constraints) and ``changed`` (the tokens whose tag they changed). A pin
  outside the text, of an unknown type, cutting a token, or constraints that leave no valid tag
  path are a 400 that says which (:func:`_parse_pins`, then the tagger's own message). Without
  ``spans``/``forbid`` (or with empty lists) the answer is exactly what it was before pins.
* ``POST /api/tag`` with ``{"texts": [str, ...], "group": "all" | "auto" | "none"}`` instead: the
  texts tagged together, as :meth:`~crfhead.inference.text_tagger.TextTagger.annotate` tags them
  with that ``group`` (all texts one group, the grouping the model was trained with, each alone).
  The answer (:func:`_tag_texts`) has one entry per text (tokens with offsets, tags, entities,
  ``certified``, its ``group``), the groups (``{"texts": [indices], "certified"}``), and, to
  compare, each text's ``chain_tags`` (the same model with ``group="none"``) and the token indices
  whose label the joint decoding ``changed``. A ``group`` other than ``"none"`` for a model without
  a group decoder (``GET /api/model`` says ``"group_decoder": false``) is a 400 that says so.

How much one request may ask is bounded (:class:`Limits`, each one an option of the lab's command
line): the body's ``Content-Length`` (:data:`MAX_BODY` bytes, checked before the body is read), the
characters of text (:data:`MAX_CHARS`, one text or all texts together), the tokens as the model's
tokenizer splits them (:data:`MAX_TOKENS`) and the number of texts (:data:`MAX_TEXTS`); past any of
them the answer is a 413 that names the limit and the request's size. The model runs one request
at a time; a request that cannot have it within :data:`LOCK_TIMEOUT` seconds is a 503 with a
``Retry-After`` header, so a slow request never queues the others for ever, and nothing else (the
page, ``GET /api/model``, ``GET /api/payloads``) waits for the model at all. Each request has its
own thread, the listen queue holds :data:`REQUEST_QUEUE` connections, and a client that stalls is
dropped after :data:`READ_TIMEOUT` seconds (a 408 if it stalls inside its body).

Every answer is JSON, errors included (``{"error": message}``): a malformed request is a 4xx that
says what is wrong (400 for a body that is not UTF-8 JSON, nests too deeply, holds a number of more
than :data:`MAX_DIGITS` digits, NaN, or text with a lone surrogate, or that is not an object with a
string ``text`` or a list ``texts``; 411 without a ``Content-Length``; 413 too large; 415 not typed
JSON), 409 with no model loaded, and anything unexpected a 500 with the exception's message, after
which the server goes on serving.

A ``Host`` header that is not the loopback address (DNS rebinding) is refused with a 403, and every
answer forbids the page to reach anything but this server (a ``Content-Security-Policy``).

Importing this module imports neither torch nor the model code beyond the package itself: the model
is loaded (:func:`load_model`) and run only when one is asked for.
"""

from __future__ import annotations

import contextlib
import json
import math
import mimetypes
import re
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from time import monotonic as _monotonic
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from crfhead.inference.pins import Forbid, Pin
    from crfhead.inference.text_tagger import TextTagger

__all__ = [
    "DEFAULT_K",
    "GROUPS",
    "HOST",
    "LOCK_TIMEOUT",
    "MAX_BODY",
    "MAX_CHARS",
    "MAX_DIGITS",
    "MAX_K",
    "MAX_PINS",
    "MAX_TEXTS",
    "MAX_TOKENS",
    "READ_TIMEOUT",
    "REQUEST_QUEUE",
    "STATIC",
    "LabServer",
    "LabState",
    "Limits",
    "load_model",
    "make_server",
]

HOST = "127.0.0.1"
"""The only address the lab listens on."""
STATIC = Path(__file__).resolve().parent / "static"
"""The folder the page is served from."""
MAX_BODY = 64 * 1024
"""The largest ``POST /api/tag`` body accepted, in bytes, read from ``Content-Length`` (else 413)."""
MAX_K = 20
"""The most best paths ``POST /api/tag`` returns."""
DEFAULT_K = 5
"""Best paths returned when the request names no ``k``."""
MAX_PINS = 256
"""The most ``spans`` and ``forbid`` entries one ``POST /api/tag`` takes, together (else 413): each
forbidden range is matched against every token, under the model's lock."""
MAX_TEXTS = 64
"""The most texts one ``POST /api/tag`` with ``"texts"`` tags (they may all be one group; else 413)."""
MAX_CHARS = 16_000
"""The most characters one ``POST /api/tag`` tags: its ``text``, or its ``texts`` together (else 413)."""
MAX_TOKENS = 2_000
"""The most tokens (as the model's tokenizer splits the text) one ``POST /api/tag`` tags (else
413): the model's time grows with them, and it serves one request at a time."""
LOCK_TIMEOUT = 10.0
"""Seconds a ``POST /api/tag`` waits for the model while another request has it (then 503)."""
READ_TIMEOUT = 30.0
"""Seconds a connection may stay silent (between requests, or inside a body: then 408)."""
REQUEST_QUEUE = 128
"""Connections the listening socket holds before they are accepted (the standard library's 5
overflows, and resets connections, under a burst of requests)."""
MAX_DIGITS = 100
"""The most digits of a number in a request body (Python's own conversion limit is 4,300)."""
GROUPS = ("all", "auto", "none")
"""The ``"group"`` values of ``POST /api/tag`` with ``"texts"``: all texts one group, the model's
saved grouping, each text alone (the chain). Lines typed into a page have no document ids, so
``TextTagger``'s ``"document"`` mode would decode each alone: it is not offered."""

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
}
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)


class _RequestError(Exception):
    """A request the lab refuses: an HTTP status and the message sent back as ``{"error": ...}``.

    ``headers`` go with the answer (a 503's ``Retry-After``).
    """

    def __init__(
        self, status: HTTPStatus, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


@dataclass(frozen=True)
class Limits:
    """How much one request may ask of the lab; past a size limit the answer is a 413.

    Attributes:
        max_body: the largest body, in bytes (``Content-Length``, checked before reading it).
        max_chars: the most characters of text a request (its ``text``, or its ``texts`` together).
        max_tokens: the most tokens a request, as the model's tokenizer splits its text.
        max_texts: the most ``texts`` a request.
        lock_timeout: seconds a request waits for the model while another has it (then 503);
            ``0`` refuses at once.
        read_timeout: seconds a connection may stay silent (inside a body: 408).

    Raises:
        ValueError: a size that is not a positive integer, a timeout that is negative or not finite
            (``read_timeout`` must be positive).
    """

    max_body: int = MAX_BODY
    max_chars: int = MAX_CHARS
    max_tokens: int = MAX_TOKENS
    max_texts: int = MAX_TEXTS
    lock_timeout: float = LOCK_TIMEOUT
    read_timeout: float = READ_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("max_body", "max_chars", "max_tokens", "max_texts"):
            size = getattr(self, name)
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ValueError(f"{name} must be a positive integer, got {size!r}")
        for name in ("lock_timeout", "read_timeout"):
            seconds = getattr(self, name)
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, int | float)
                or not math.isfinite(seconds)
                or seconds < 0
                or (seconds == 0 and name == "read_timeout")
            ):
                raise ValueError(
                    f"{name} must be a finite number of seconds, "
                    f"{'above' if name == 'read_timeout' else 'at least'} 0, got {seconds!r}"
                )


class LabState:
    """What the server knows: where the page is, and the user's model (or none).

    Args:
        static: the folder served (default :data:`STATIC`).
        tagger: the loaded model, or ``None`` (then ``POST /api/tag`` answers 409).
        model_path: where the model was loaded from (shown on the page).
        limits: how much one request may ask (default :class:`Limits`).

    Attributes:
        static: the folder, resolved.
        tagger: the model.
        model_path: its path as given.
        limits: the limits.
        lock: held while the model runs (one request at a time uses it; the others wait at most
            ``limits.lock_timeout`` seconds for it).
    """

    def __init__(
        self,
        static: Path | None = None,
        tagger: TextTagger | None = None,
        model_path: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.static = (static or STATIC).resolve()
        self.tagger = tagger
        self.model_path = model_path
        self.limits = limits or Limits()
        self.lock = threading.Lock()

    def payloads(self) -> list[str]:
        """The tabs whose payload ``data/<tab>.json`` exists (a plain file, not a link)."""
        data = self.static / "data"
        if not data.is_dir() or data.is_symlink():
            return []
        return sorted(p.stem for p in data.glob("*.json") if p.is_file() and not p.is_symlink())

    # ------------------------------------------------------------------------------ the model
    def model_info(self) -> dict[str, Any]:
        """``GET /api/model``: whether a model is loaded, its labels, head, encoder and path.

        ``group_decoder`` says whether it decodes texts jointly (``"group"`` other than ``"none"``),
        ``grouping`` names the grouping it was trained with (``"group": "auto"``), or ``None``.
        """
        t = self.tagger
        if t is None:
            return {
                "loaded": False,
                "labels": [],
                "head": None,
                "encoder": None,
                "path": self.model_path,
                "scheme": None,
                "calibrated": None,
                "decoder": None,
                "group_decoder": False,
                "grouping": None,
            }
        head = t.model.head
        return {
            "loaded": True,
            "labels": t.labels,
            "head": type(head).__name__,
            "encoder": type(t.model.encoder).__name__,
            "path": self.model_path,
            "scheme": t.scheme,
            "calibrated": bool(head.calibrated),
            "decoder": type(t.model.decoder).__name__
            if t.model.decoder is not None
            else str(getattr(head, "decoder", "viterbi")),
            "group_decoder": t.model.decoder is not None,
            "grouping": None if t.grouping is None else repr(t.grouping),
        }

    def tag(
        self,
        text: str,
        k: int,
        spans: list[Pin] | None = None,
        forbid: list[Forbid] | None = None,
    ) -> dict[str, Any]:
        """``POST /api/tag``: the text tagged, its marginals and its ``k`` best paths.

        With ``spans``/``forbid`` all of it is conditioned on them (:func:`_tag`).

        Raises:
            _RequestError: 409 with no model loaded; 413 for too many tokens; 503 when the model
                stays busy; 400 for text the model refuses, or pins and forbids it refuses (a
                span of an unknown type or cutting a token, overlapping spans, constraints that
                leave no valid tag path: the tagger's message).
        """
        tagger = self._loaded()
        self._check_tokens(tagger, [text])
        with self._model():
            try:
                return _tag(tagger, text, k, spans, forbid)
            except ValueError as err:
                raise _RequestError(HTTPStatus.BAD_REQUEST, str(err)) from None

    def tag_texts(self, texts: list[str], group: str) -> dict[str, Any]:
        """``POST /api/tag`` with ``"texts"``: the texts decoded in ``group``'s groups (:func:`_tag_texts`).

        Raises:
            _RequestError: 409 with no model loaded; 400 for a ``group`` the model cannot decode
                (no group decoder, or ``"auto"`` with no saved grouping) or text it refuses; 413
                for too many tokens; 503 when the model stays busy.
        """
        tagger = self._loaded()
        if group != "none" and tagger.model.decoder is None:
            raise _RequestError(
                HTTPStatus.BAD_REQUEST,
                f'"group": "{group}" needs a group decoder, and this model has none (it was '
                "trained without model.decoder, so its chain decodes each text alone): send "
                '"group": "none", or load a higher-order model',
            )
        if group == "auto" and tagger.grouping is None:
            raise _RequestError(
                HTTPStatus.BAD_REQUEST,
                '"group": "auto" decodes the texts in the grouping the model was trained with, '
                'and this model saved none (trained without data.grouping): send "all" or "none"',
            )
        self._check_tokens(tagger, texts)
        with self._model():
            try:
                return _tag_texts(tagger, texts, group)
            except ValueError as err:
                raise _RequestError(HTTPStatus.BAD_REQUEST, str(err)) from None

    def _check_tokens(self, tagger: TextTagger, texts: list[str]) -> None:
        """The texts' tokens, as the model's tokenizer splits them, are within the limit.

        Tokenizing is cheap beside the model and needs no lock. A model with no saved tokenizer
        refuses raw text anyway (a 400 from :meth:`TextTagger.annotate`).

        Raises:
            _RequestError: 413 past ``limits.max_tokens``.
        """
        if tagger.tokenizer is None:
            return
        tokens = sum(len(tagger.tokenizer.tokenize(text)) for text in texts)
        limit = self.limits.max_tokens
        if tokens > limit:
            raise _RequestError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"the text is {tokens} tokens; the lab tags at most {limit} tokens a request "
                "(--max-tokens): send less text at a time",
            )

    @contextlib.contextmanager
    def _model(self) -> Iterator[None]:
        """Hold :attr:`lock` while the model runs, waiting at most ``limits.lock_timeout`` for it.

        Raises:
            _RequestError: 503 with ``Retry-After`` when another request keeps the model that long.
        """
        wait = self.limits.lock_timeout
        if not self.lock.acquire(timeout=wait):
            raise _RequestError(
                HTTPStatus.SERVICE_UNAVAILABLE,
                f"the model is busy with another request (waited {wait:g} s, --lock-timeout): "
                "try again shortly",
                {"Retry-After": str(max(1, math.ceil(wait)))},
            )
        try:
            yield
        finally:
            self.lock.release()

    def _loaded(self) -> TextTagger:
        """The model.

        Raises:
            _RequestError: 409 with no model loaded.
        """
        if self.tagger is None:
            raise _RequestError(
                HTTPStatus.CONFLICT,
                "no model is loaded: start the lab with --model PATH "
                "(a training checkpoint .ckpt or a folder written by TextTagger.save)",
            )
        return self.tagger


def _tag(
    tagger: TextTagger,
    text: str,
    k: int,
    spans: list[Pin] | None = None,
    forbid: list[Forbid] | None = None,
) -> dict[str, Any]:
    """Tag one text as :meth:`TextTagger.annotate` does, plus its trellis and its best paths.

    One encoder pass and one build of the potentials (:meth:`TextTagger.trellis`). With ``spans``
    or ``forbid``, the trellis is conditioned on them (``tagger.trellis(text, k, spans=...,
    forbid=...)``: the tags, the entities and their probabilities, the marginals and the best
    paths with ``exp(score - log Z_allowed)``), and the answer adds :func:`_conditioned`'s keys.
    Without them, the answer has exactly the keys it had before pins.
    """
    constrained = bool(spans) or bool(forbid)
    if constrained:
        trellis = tagger.trellis(text, k, spans=spans or None, forbid=forbid or None)
    else:
        trellis = tagger.trellis(text, k)
    tagged = trellis.tagged
    labels = tagger.labels
    out: dict[str, Any] = {
        "text": text,
        "tokens": [{"text": t.text, "start": t.start, "end": t.end} for t in tagged.tokens],
        "labels": labels,
        "tags": list(tagged.tags),
        "entities": [e.to_dict() for e in tagged.entities],
        "marginals": [],
        "topk": [],
        "calibrated": bool(tagger.model.head.calibrated),
    }
    if not tagged.tokens:
        return out
    out["marginals"] = [[round(v, 6) for v in row] for row in trellis.marginals]
    out["topk"] = [
        {
            "tags": [labels[i] for i in ids],
            "score": round(score, 6),
            "probability": math.exp(score - trellis.log_partition),
        }
        for score, ids in trellis.best
        if math.isfinite(score)  # fewer than k paths exist
    ]
    if constrained:
        out.update(_conditioned(tagger, text, tagged, spans or [], forbid or []))
    return out


def _conditioned(
    tagger: TextTagger, text: str, tagged: Any, spans: list[Pin], forbid: list[Forbid]
) -> dict[str, Any]:
    """What a constrained answer adds: the constraints, which entities are pins, the free decoding.

    ``free`` is the same text decoded without the constraints (a second, unconstrained trellis of
    one best path: the page shows what the pins changed); ``changed`` the token indices whose tag
    differs between the two; ``pinned`` the indices into ``entities`` of the pinned spans (an
    entity is a pin when it has the pin's type and exactly the tokens inside the pin's offsets).
    """
    free = tagger.trellis(text, 1).tagged
    tokens = tagged.tokens
    pinned = []
    for start, end, label in spans:
        inside = [j for j, t in enumerate(tokens) if start <= t.start and t.end <= end]
        for i, e in enumerate(tagged.entities):
            if inside and (e.label, e.token_start, e.token_end) == (
                label,
                inside[0],
                inside[-1] + 1,
            ):
                pinned.append(i)
    return {
        "spans": [list(s) for s in spans],
        "forbid": [f if isinstance(f, str) else list(f) for f in forbid],
        "pinned": sorted(set(pinned)),
        "free": {
            "tags": list(free.tags),
            "entities": [e.to_dict() for e in free.entities],
        },
        "changed": [
            t for t, (a, b) in enumerate(zip(tagged.tags, free.tags, strict=True)) if a != b
        ],
    }


def _tag_texts(tagger: TextTagger, texts: list[str], group: str) -> dict[str, Any]:
    """Tag ``texts`` as ``tagger.annotate(texts, group=group)`` does, beside the chain alone.

    The groups are asked for once (:meth:`TextTagger.groups_for`) and passed back to
    :meth:`TextTagger.annotate` as index lists, so the groups reported are the groups decoded. With
    ``"none"`` the joint and the chain-alone decodings are one decoding.

    Returns:
        ``{"group", "labels", "calibrated", "groups", "texts"}``: ``groups`` lists
        ``{"texts": [indices], "certified"}`` (empty for ``"none"``; ``certified`` is ``None`` for a
        group with no tokens); each entry of ``texts`` has ``text``, ``tokens`` (with offsets),
        ``tags``, ``entities``, ``certified``, ``group`` (its index in ``groups``, or ``None``),
        ``chain_tags`` and ``changed`` (the token indices where ``tags`` and ``chain_tags`` differ).
    """
    groups = tagger.groups_for(texts, group)
    chain = tagger.annotate(texts, group=False)
    joint = chain if groups is None else tagger.annotate(texts, group=groups)
    where: dict[int, int] = {}
    for g, members in enumerate(groups or []):
        for i in members:
            where[i] = g
    entries = []
    for i, (one, alone) in enumerate(zip(joint, chain, strict=True)):
        entries.append(
            {
                "text": one.text,
                "tokens": [{"text": t.text, "start": t.start, "end": t.end} for t in one.tokens],
                "tags": list(one.tags),
                "entities": [e.to_dict() for e in one.entities],
                "certified": one.certified,
                "group": where.get(i),
                "chain_tags": list(alone.tags),
                "changed": [
                    t for t, (a, b) in enumerate(zip(one.tags, alone.tags, strict=True)) if a != b
                ],
            }
        )
    return {
        "group": group,
        "labels": tagger.labels,
        "calibrated": bool(tagger.model.head.calibrated),
        "groups": [
            {
                "texts": list(members),
                "certified": next(
                    (joint[i].certified for i in members if joint[i].certified is not None), None
                ),
            }
            for members in groups or []
        ],
        "texts": entries,
    }


def load_model(path: str | Path, device: str | None = None) -> TextTagger:
    """The model at ``path`` (:func:`crfhead.load`): a ``.ckpt`` or a saved folder.

    Raises:
        FileNotFoundError: nothing at ``path``.
        ValueError: not a crfhead model.
    """
    if not Path(path).exists():
        raise FileNotFoundError(
            f"model not found: {path} (give a .ckpt written by training or a folder written by "
            "TextTagger.save)"
        )
    import crfhead

    return crfhead.load(path, device=device)


# ------------------------------------------------------------------------------------ requests
def _parse_int(digits: str) -> int:
    """A JSON integer, refused past :data:`MAX_DIGITS` digits (before Python's own 4,300-digit limit).

    Raises:
        _RequestError: 400 for too long a number.
    """
    n = len(digits) - digits.startswith("-")
    if n > MAX_DIGITS:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f"the body holds a number of {n} digits; the lab reads numbers of at most {MAX_DIGITS}",
        )
    return int(digits)


def _refuse_constant(name: str) -> Any:
    """``NaN``, ``Infinity`` and ``-Infinity``, which Python reads but JSON does not have.

    Raises:
        _RequestError: 400, always.
    """
    raise _RequestError(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {name} is not a JSON value")


def _loads(body: bytes) -> Any:
    """The body read as JSON.

    Raises:
        _RequestError: 400 for a body that is not UTF-8 or not JSON, that nests too deeply for the
            parser, or that holds too long a number or a ``NaN``.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST, f"the body is not UTF-8 (byte {err.start} is not)"
        ) from None
    try:
        return json.loads(text, parse_int=_parse_int, parse_constant=_refuse_constant)
    except json.JSONDecodeError as err:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST, f"the body is not JSON: {err.msg} at character {err.pos}"
        ) from None
    except RecursionError:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            "the body nests arrays or objects too deeply to read (a tag request is one object "
            "of strings, numbers and a list of strings)",
        ) from None
    except ValueError as err:  # another value Python will not convert
        raise _RequestError(HTTPStatus.BAD_REQUEST, f"the body cannot be read: {err}") from None


def _check_unicode(text: str, where: str) -> None:
    r"""``text`` is valid Unicode: no lone surrogate (JSON's ``"\ud800"``), which UTF-8 cannot hold.

    Raises:
        _RequestError: 400 naming the surrogate and where it is.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f"{where} holds a lone surrogate (\\u{ord(text[err.start]):04x}) at character "
            f"{err.start}: send valid Unicode text",
        ) from None


def _check_chars(chars: int, limits: Limits) -> None:
    """A request's characters of text are within ``limits.max_chars``.

    Raises:
        _RequestError: 413 past it.
    """
    if chars > limits.max_chars:
        raise _RequestError(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            f"the text is {chars} characters; the lab tags at most {limits.max_chars} characters "
            "a request (--max-chars): send less text at a time",
        )


def _parse_tag_request(body: bytes, limits: Limits | None = None) -> _TextRequest | _TextsRequest:
    """The one-text request of a ``POST /api/tag`` body, or ``(texts, group)`` of one with ``"texts"``.

    Raises:
        _RequestError: 400 naming what is wrong; 413 past ``limits`` (default :class:`Limits`).
    """
    limits = limits or Limits()
    payload = _loads(body)
    if not isinstance(payload, dict):
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f'expected a JSON object {{"text": ..., "k": ...}}, got a {type(payload).__name__}',
        )
    if "texts" in payload:
        return _parse_texts(payload, limits)
    unknown = sorted(set(payload) - {"text", "k", "spans", "forbid"})
    if unknown:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f'unknown fields {unknown}: give "text" and optionally "k", "spans" and "forbid"',
        )
    if "text" not in payload:
        raise _RequestError(HTTPStatus.BAD_REQUEST, 'missing "text" (the sentence to tag)')
    text = payload["text"]
    if not isinstance(text, str):
        raise _RequestError(
            HTTPStatus.BAD_REQUEST, f'"text" must be a string, got a {type(text).__name__}'
        )
    _check_unicode(text, '"text"')
    _check_chars(len(text), limits)
    k = payload.get("k", DEFAULT_K)
    if isinstance(k, bool) or not isinstance(k, int):
        raise _RequestError(
            HTTPStatus.BAD_REQUEST, f'"k" must be an integer, got a {type(k).__name__}'
        )
    if not 1 <= k <= MAX_K:
        raise _RequestError(HTTPStatus.BAD_REQUEST, f'"k" must be between 1 and {MAX_K}, got {k}')
    spans, forbid = _parse_pins(payload, text)
    return _TextRequest(text, k, spans, forbid)


@dataclass(frozen=True)
class _TextRequest:
    """A one-text ``POST /api/tag`` body: the text, ``k`` best paths, its pins and forbids.

    ``spans`` and ``forbid`` are ``None`` when the request gave none (or empty lists): the text is
    then tagged exactly as without pins.
    """

    text: str
    k: int
    spans: list[Pin] | None = None
    forbid: list[Forbid] | None = None


def _offsets(item: Any, where: str, text: str, what: str) -> tuple[int, int, str]:
    """``item`` read as ``[start, end, label]`` with ``0 <= start < end <= len(text)``.

    Raises:
        _RequestError: 400 naming the entry, what it holds and the text's length.
    """
    if (
        not isinstance(item, list)
        or len(item) != 3
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in item[:2])
        or not isinstance(item[2], str)
    ):
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f"{where} must be [start, end, {what}] (character offsets, end exclusive, and a "
            f"string), got {json.dumps(item)[:200]}",
        )
    start, end, label = item
    _check_unicode(label, where)
    if not 0 <= start < end <= len(text):
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f"{where} = {json.dumps(item)[:200]} is outside the text or empty: need 0 <= start < "
            f"end <= {len(text)} (the text's length in characters)",
        )
    return start, end, label


def _parse_pins(payload: dict[str, Any], text: str) -> tuple[list[Pin] | None, list[Forbid] | None]:
    """``"spans"`` and ``"forbid"`` of a one-text request, checked as JSON against the text.

    The shapes and offsets are checked here, where the message can name the request's own field
    and index; whether a type exists, a span cuts a token, spans overlap or the constraints leave
    a path is the tagger's to say (:func:`crfhead.inference.pins.text_constraint`), under the lock.

    Raises:
        _RequestError: 400 for a field that is not a list, an entry that is not ``[start, end,
            type]`` (``forbid``: or a label or type), offsets outside the text; 413 past
            :data:`MAX_PINS` entries.
    """
    spans_in, forbid_in = payload.get("spans"), payload.get("forbid")
    for name, value in (("spans", spans_in), ("forbid", forbid_in)):
        if value is not None and not isinstance(value, list):
            raise _RequestError(
                HTTPStatus.BAD_REQUEST,
                f'"{name}" must be a list, got a {type(value).__name__}'
                + (" (give [[start, end, type], ...])" if name == "spans" else ""),
            )
    spans_in, forbid_in = spans_in or [], forbid_in or []
    count = len(spans_in) + len(forbid_in)
    if count > MAX_PINS:
        raise _RequestError(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            f'"spans" and "forbid" hold {count} entries; the lab takes at most {MAX_PINS} a request',
        )
    spans: list[Pin] = [
        _offsets(item, f'"spans"[{i}]', text, "type") for i, item in enumerate(spans_in)
    ]
    forbid: list[Forbid] = []
    for i, item in enumerate(forbid_in):
        if isinstance(item, str):
            _check_unicode(item, f'"forbid"[{i}]')
            forbid.append(item)
        elif not isinstance(item, list):
            raise _RequestError(
                HTTPStatus.BAD_REQUEST,
                f'"forbid"[{i}] must be a label or type ("B-PER", "PER", "O") or [start, end, '
                f"label or type], got {json.dumps(item)[:200]}",
            )
        else:
            forbid.append(_offsets(item, f'"forbid"[{i}]', text, "label or type"))
    return spans or None, forbid or None


@dataclass(frozen=True)
class _TextsRequest:
    """A ``POST /api/tag`` body with ``"texts"``: the texts and how they are grouped."""

    texts: list[str]
    group: str


def _parse_texts(payload: dict[str, Any], limits: Limits) -> _TextsRequest:
    """``(texts, group)`` of a ``POST /api/tag`` body with ``"texts"``.

    Raises:
        _RequestError: 400 naming what is wrong; 413 past ``limits``.
    """
    unknown = sorted(set(payload) - {"texts", "group"})
    if unknown:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f'unknown fields {unknown}: with "texts" give "group" only ("k" best paths, "spans" '
            'and "forbid" are for one "text")',
        )
    texts = payload["texts"]
    if not isinstance(texts, list):
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f'"texts" must be a list of strings, got a {type(texts).__name__}',
        )
    if not texts:
        raise _RequestError(HTTPStatus.BAD_REQUEST, '"texts" is empty: give at least one text')
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise _RequestError(
                HTTPStatus.BAD_REQUEST,
                f'"texts"[{i}] must be a string, got a {type(text).__name__}',
            )
        _check_unicode(text, f'"texts"[{i}]')
    if len(texts) > limits.max_texts:
        raise _RequestError(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            f'"texts" holds {len(texts)} texts; the lab tags at most {limits.max_texts} at once '
            "(--max-texts)",
        )
    _check_chars(sum(len(t) for t in texts), limits)
    if "group" not in payload:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f'missing "group" (how the texts are decoded: one of {list(GROUPS)})',
        )
    group = payload["group"]
    if not isinstance(group, str) or group not in GROUPS:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f'"group" must be one of {list(GROUPS)} (all texts one group, the model\'s saved '
            f"grouping, each alone), got {json.dumps(group)}",
        )
    return _TextsRequest(texts, group)


def _static_file(root: Path, url_path: str) -> Path | None:
    """The file under ``root`` that ``url_path`` names, or ``None`` (then 404).

    ``/`` is ``index.html``. Refused: any ``.`` or ``..`` segment (also percent-encoded: the path is
    decoded first), a backslash or NUL, a hidden segment, a symbolic link at any level below ``root``,
    a folder, and anything that resolves outside ``root``.
    """
    path = unquote(url_path, errors="strict") if "%" in url_path else url_path
    if "\\" in path or "\x00" in path or not path.startswith("/"):
        return None
    parts = [p for p in path.split("/") if p]
    if not parts:
        parts = ["index.html"]
    if any(p in (".", "..") or p.startswith(".") or ":" in p for p in parts):
        return None
    here = root
    for part in parts:
        here = here / part
        if here.is_symlink():
            return None
    try:
        resolved = here.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not resolved.is_relative_to(root) or not resolved.is_file():
        return None
    return resolved


_LINGER_BYTES = 1024 * 1024
"""After refusing a body unread, the most of it read and dropped before the connection closes, so
the client reads the answer rather than a reset."""
_LINGER_SECONDS = 2.0
"""And the most time spent doing so."""
_LENGTH = re.compile(r"[0-9]{1,19}")


def _encode(payload: Any) -> bytes:
    r"""``payload`` as UTF-8 JSON; a string UTF-8 cannot hold (a lone surrogate) is ``\u``-escaped.

    Raises:
        ValueError: a NaN or an infinity in ``payload``.
    """
    try:
        return json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload, ensure_ascii=True, allow_nan=False).encode("ascii")


class _Handler(BaseHTTPRequestHandler):
    """One connection's requests: a static file or the API, each answered in JSON or as a file.

    Every ``do_*`` runs under :meth:`_guarded`: a refusal is its status and message, anything else
    a 500, and the connection's thread goes on (or ends) cleanly either way.
    """

    server: LabServer
    server_version = "crfhead-lab"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        """The connection's socket times out after ``limits.read_timeout`` seconds of silence."""
        self._linger = False  # a refused body is still on the socket: drain it before closing
        self._answered = False  # this request's status line is sent: no second answer
        super().setup()
        self.connection.settimeout(self.server.state.limits.read_timeout)

    def finish(self) -> None:
        """Flush the answer; after a body refused unread, read some of it first (see :meth:`_drain`)."""
        super().finish()
        if self._linger:
            self._drain()

    def _drain(self) -> None:
        """Half-close, then drop what the client still sends, for a little while.

        Closing a socket with unread data in it sends a reset, and a client still sending its body
        may then lose the answer it was sent; the standard library's ``shutdown_request`` closes it
        straight after.
        """
        conn = self.connection
        try:
            conn.shutdown(socket.SHUT_WR)
            conn.settimeout(0.2)
            deadline = _monotonic() + _LINGER_SECONDS
            left = _LINGER_BYTES
            while left > 0 and _monotonic() < deadline:
                chunk = conn.recv(min(left, 65536))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:  # the client closed, reset or went quiet: nothing more to wait for
            return

    # ------------------------------------------------------------------------------ answers
    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        *,
        cache: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._answered = True
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache" if cache else "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", _CSP)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(
        self, status: HTTPStatus, payload: Any, headers: dict[str, str] | None = None
    ) -> None:
        body = _encode(payload)  # before the status line: a failure here can still be a 500
        self._send(status, body, "application/json; charset=utf-8", headers=headers)

    def _error(
        self, status: HTTPStatus, message: str, headers: dict[str, str] | None = None
    ) -> None:
        self._json(status, {"error": message}, headers)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals, as JSON like every other answer.

        A bad request line, too long a header or an unknown method; the connection closes after.
        """
        try:
            status = HTTPStatus(code)
        except ValueError:
            status = HTTPStatus.BAD_REQUEST
        self.close_connection = True
        text = message or status.phrase
        if explain and explain != text:
            text = f"{text}: {explain}"
        with contextlib.suppress(OSError):  # the client is gone
            self._error(status, text)

    def _host_ok(self) -> bool:
        """``Host`` names the loopback address (a page on another name cannot reach the API)."""
        host = (self.headers.get("Host") or "").strip().lower()
        if host.startswith("["):
            name = host[: host.find("]") + 1]
        else:
            name = host.rsplit(":", 1)[0] if ":" in host else host
        return name in ("127.0.0.1", "localhost", "[::1]")

    def _guarded(self, handle: Callable[[], None]) -> None:
        """Run ``handle``; a refusal is answered with its status, anything else with a 500.

        A client that went away is let go; an error after the answer had begun can only close the
        connection.
        """
        self._answered = False
        try:
            if not self._host_ok():
                raise _RequestError(HTTPStatus.FORBIDDEN, "the lab answers on 127.0.0.1 only")
            handle()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True  # nobody to answer (a timed-out body is a 408, below)
        except _RequestError as err:
            self._answer_error(err.status, err.message, err.headers)
        except Exception as err:  # a bug or a broken model: say so, keep serving
            self.log_error("%s %s failed: %r", self.command, self.path, err)
            self._answer_error(
                HTTPStatus.INTERNAL_SERVER_ERROR,
                f"the lab failed on this request: {type(err).__name__}: {err}",
            )

    def _answer_error(
        self, status: HTTPStatus, message: str, headers: dict[str, str] | None = None
    ) -> None:
        """An error answer, unless this request was answered already (then the connection closes)."""
        if self._answered:
            self.close_connection = True
            return
        try:
            self._error(status, message, headers)
        except OSError:
            self.close_connection = True

    # ------------------------------------------------------------------------------ methods
    def do_GET(self) -> None:
        """A static file, ``GET /api/model`` or ``GET /api/payloads``."""
        self._guarded(self._get)

    def do_HEAD(self) -> None:
        """As ``GET``, without the body."""
        self._guarded(self._get)

    def do_POST(self) -> None:
        """``POST /api/tag``."""
        self._guarded(self._post)

    def do_PUT(self) -> None:
        """Refused: the lab changes nothing."""
        self._guarded(self._refuse)

    do_DELETE = do_PUT  # noqa: N815
    do_PATCH = do_PUT  # noqa: N815

    def _refuse(self) -> None:
        self._unread()  # its body, if any
        raise _RequestError(
            HTTPStatus.METHOD_NOT_ALLOWED, "the lab takes GET and POST /api/tag only"
        )

    def _get(self) -> None:
        path = urlsplit(self.path).path
        state = self.server.state
        if path == "/api/model":
            self._json(HTTPStatus.OK, state.model_info())
            return
        if path == "/api/payloads":
            self._json(HTTPStatus.OK, {"payloads": state.payloads()})
            return
        if path.startswith("/api/"):
            raise _RequestError(HTTPStatus.NOT_FOUND, f"no such endpoint: {path}")
        try:
            found = _static_file(state.static, path)
        except UnicodeDecodeError:
            found = None
        if found is None:
            raise _RequestError(HTTPStatus.NOT_FOUND, "not found")
        ctype = _TYPES.get(found.suffix.lower()) or (
            mimetypes.guess_type(found.name)[0] or "application/octet-stream"
        )
        self._send(HTTPStatus.OK, found.read_bytes(), ctype, cache=True)

    def _post(self) -> None:
        path = urlsplit(self.path).path
        if path != "/api/tag":
            self._unread()
            raise _RequestError(HTTPStatus.NOT_FOUND, f"no such endpoint: POST {path}")
        state = self.server.state
        body = self._read_body()
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise _RequestError(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                f"send the body as application/json, not {ctype or 'no content type'}",
            )
        request = _parse_tag_request(body, state.limits)
        if isinstance(request, _TextsRequest):
            result = state.tag_texts(request.texts, request.group)
        elif request.spans is None and request.forbid is None:
            result = state.tag(request.text, request.k)  # no pins: the call as before them
        else:
            result = state.tag(request.text, request.k, request.spans, request.forbid)
        self._json(HTTPStatus.OK, result)

    def _read_body(self) -> bytes:
        """The request body, at most ``limits.max_body`` bytes, its length checked before reading.

        Raises:
            _RequestError: 411 without a length (or in chunks), 400 for a malformed one or a body
                that ends early, 413 for too long a body, 408 for one that stalls.
        """
        limit = self.server.state.limits.max_body
        if (self.headers.get("Transfer-Encoding") or "identity").strip().lower() != "identity":
            self._unread()
            raise _RequestError(HTTPStatus.LENGTH_REQUIRED, "send a Content-Length, not chunks")
        values = self.headers.get_all("Content-Length") or []
        if not values:
            self._unread()
            raise _RequestError(HTTPStatus.LENGTH_REQUIRED, "a Content-Length is required")
        raw = values[0].strip()
        if len(values) > 1 or not _LENGTH.fullmatch(raw):
            self._unread()
            shown = ", ".join(values)
            raise _RequestError(
                HTTPStatus.BAD_REQUEST,
                f"bad Content-Length: {shown!r} (one decimal number of bytes is expected)",
            )
        length = int(raw)
        if length > limit:
            self._unread()  # the unread body must not be taken for a request
            raise _RequestError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"the body is {length} bytes; the lab takes at most {limit} (--max-body)",
            )
        try:
            body = self.rfile.read(length)
        except TimeoutError:
            self.close_connection = True
            raise _RequestError(
                HTTPStatus.REQUEST_TIMEOUT,
                f"the body did not arrive: {length} bytes announced, nothing more for "
                f"{self.server.state.limits.read_timeout:g} s (--read-timeout)",
            ) from None
        if len(body) < length:
            self.close_connection = True
            raise _RequestError(
                HTTPStatus.BAD_REQUEST,
                f"the body ended after {len(body)} of its {length} bytes",
            )
        return body

    def _unread(self) -> None:
        """The body stays unread: close the connection after the answer, draining a little first."""
        self.close_connection = True
        self._linger = True

    def log_message(self, format: str, *args: Any) -> None:
        """Request lines only when the server is verbose; errors always, on stderr."""
        if self.server.verbose:
            super().log_message(format, *args)

    def log_error(self, format: str, *args: Any) -> None:
        """Errors on stderr."""
        sys.stderr.write(f"crfhead lab: {format % args}\n")


class LabServer(ThreadingHTTPServer):
    """A :class:`~http.server.ThreadingHTTPServer` on ``127.0.0.1`` holding a :class:`LabState`.

    Each connection has its own thread, so a request waiting for the model holds up no other; the
    listen queue holds :data:`REQUEST_QUEUE` connections (the standard library's default is 5).

    Attributes:
        state: the static folder, the model and the limits.
        verbose: log every request line.
    """

    daemon_threads = True
    request_queue_size = REQUEST_QUEUE

    def __init__(self, state: LabState, port: int = 0, *, verbose: bool = False) -> None:
        self.state = state
        self.verbose = verbose
        super().__init__((HOST, port), _Handler)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/``."""
        return f"http://{HOST}:{self.server_address[1]}/"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """An exception that escaped a request's handler: one line on stderr, and serve on."""
        err = sys.exc_info()[1]
        sys.stderr.write(f"crfhead lab: a connection from {client_address} failed: {err!r}\n")


def make_server(
    port: int = 0,
    *,
    tagger: TextTagger | None = None,
    model_path: str | None = None,
    static: Path | None = None,
    verbose: bool = False,
    limits: Limits | None = None,
) -> LabServer:
    """A lab server on ``127.0.0.1:port`` (``0``: any free port; read it from ``.url``), not yet serving.

    ``limits`` bounds each request (default :class:`Limits`). Call ``serve_forever()`` (in a
    thread, for tests) and ``shutdown()`` / ``server_close()``.
    """
    return LabServer(LabState(static, tagger, model_path, limits), port, verbose=verbose)
