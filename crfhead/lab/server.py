"""The lab's web server: the static page, and the user's own model on a sentence they type.

Standard library only (:class:`http.server.ThreadingHTTPServer`), bound to ``127.0.0.1`` and nothing
else. Two kinds of request:

* ``GET`` of a file under the static folder (``crfhead/lab/static``): the path is decoded once, and a
  path with a ``..`` or ``.`` segment, a backslash, a NUL, a symbolic link anywhere below the folder,
  or that lands outside it is answered 404, as is a folder.
* The API, answers in JSON: ``GET /api/model`` (``{"loaded", "labels", "head", "encoder", "path",
  ...}``), ``GET /api/payloads`` (``{"payloads": [tab, ...]}``, the tabs whose ``data/<tab>.json``
  exists, so the page asks for no file that is missing) and ``POST /api/tag`` with ``{"text": str, "k": int}`` (``k`` the number of best paths, 1 to
  :data:`MAX_K`, default 5): the text's tokens with character offsets, the decoded tags, the entities
  with their exact probabilities, the ``T x K`` node marginals and the ``k`` best paths with their
  probabilities ``exp(score - log Z)``. A body over :data:`MAX_BODY` bytes is a 413, a body that is not
  a JSON object with a string ``text`` a 400, another content type than JSON a 415, and a request with
  no model loaded a 409; each error is ``{"error": message}``.
* ``POST /api/tag`` with ``{"texts": [str, ...], "group": "all" | "auto" | "none"}`` instead (at most
  :data:`MAX_TEXTS` texts and :data:`MAX_CHARS` characters in all): the texts tagged together, as
  :meth:`~crfhead.inference.text_tagger.TextTagger.annotate` tags them with that ``group`` (all texts
  one group, the grouping the model was trained with, each alone). The answer (:func:`_tag_texts`)
  has one entry per text (tokens with offsets, tags, entities, ``certified``, its ``group``), the
  groups (``{"texts": [indices], "certified"}``), and, to compare, each text's ``chain_tags`` (the same
  model with ``group="none"``) and the token indices whose label the joint decoding ``changed``. A
  ``group`` other than ``"none"`` for a model without a group decoder (``GET /api/model`` says
  ``"group_decoder": false``) is a 400 that says so.

A ``Host`` header that is not the loopback address (DNS rebinding) is refused with a 403, and every
answer forbids the page to reach anything but this server (a ``Content-Security-Policy``).

Importing this module imports neither torch nor the model code beyond the package itself: the model
is loaded (:func:`load_model`) and run only when one is asked for.
"""

from __future__ import annotations

import json
import math
import mimetypes
import sys
import threading
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from crfhead.inference.text_tagger import TextTagger

__all__ = [
    "DEFAULT_K",
    "GROUPS",
    "HOST",
    "MAX_BODY",
    "MAX_CHARS",
    "MAX_K",
    "MAX_TEXTS",
    "STATIC",
    "LabServer",
    "LabState",
    "load_model",
    "make_server",
]

HOST = "127.0.0.1"
"""The only address the lab listens on."""
STATIC = Path(__file__).resolve().parent / "static"
"""The folder the page is served from."""
MAX_BODY = 64 * 1024
"""The largest ``POST /api/tag`` body accepted, in bytes (else 413)."""
MAX_K = 20
"""The most best paths ``POST /api/tag`` returns."""
DEFAULT_K = 5
"""Best paths returned when the request names no ``k``."""
MAX_TEXTS = 64
"""The most texts one ``POST /api/tag`` with ``"texts"`` tags (they may all be one group)."""
MAX_CHARS = 16_000
"""The most characters, all texts together, one ``POST /api/tag`` with ``"texts"`` tags."""
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
    """A request the lab refuses: an HTTP status and the message sent back as ``{"error": ...}``."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class LabState:
    """What the server knows: where the page is, and the user's model (or none).

    Args:
        static: the folder served (default :data:`STATIC`).
        tagger: the loaded model, or ``None`` (then ``POST /api/tag`` answers 409).
        model_path: where the model was loaded from (shown on the page).

    Attributes:
        static: the folder, resolved.
        tagger: the model.
        model_path: its path as given.
        lock: held while the model runs (one request at a time uses it).
    """

    def __init__(
        self,
        static: Path | None = None,
        tagger: TextTagger | None = None,
        model_path: str | None = None,
    ) -> None:
        self.static = (static or STATIC).resolve()
        self.tagger = tagger
        self.model_path = model_path
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

    def tag(self, text: str, k: int) -> dict[str, Any]:
        """``POST /api/tag``: the text tagged, its marginals and its ``k`` best paths.

        Raises:
            _RequestError: 409 with no model loaded; 400 for text the model refuses.
        """
        tagger = self._loaded()
        with self.lock:
            try:
                return _tag(tagger, text, k)
            except ValueError as err:
                raise _RequestError(HTTPStatus.BAD_REQUEST, str(err)) from None

    def tag_texts(self, texts: list[str], group: str) -> dict[str, Any]:
        """``POST /api/tag`` with ``"texts"``: the texts decoded in ``group``'s groups (:func:`_tag_texts`).

        Raises:
            _RequestError: 409 with no model loaded; 400 for a ``group`` the model cannot decode
                (no group decoder, or ``"auto"`` with no saved grouping) or text it refuses.
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
        with self.lock:
            try:
                return _tag_texts(tagger, texts, group)
            except ValueError as err:
                raise _RequestError(HTTPStatus.BAD_REQUEST, str(err)) from None

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


def _tag(tagger: TextTagger, text: str, k: int) -> dict[str, Any]:
    """Tag one text as :meth:`TextTagger.annotate` does, plus its trellis and its best paths.

    One encoder pass and one build of the potentials (:meth:`TextTagger.trellis`).
    """
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
    return out


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
def _parse_tag_request(body: bytes) -> tuple[str, int] | _TextsRequest:
    """``(text, k)`` of a one-text ``POST /api/tag`` body, ``(texts, group)`` of one with ``"texts"``.

    Raises:
        _RequestError: 400 naming what is wrong.
    """
    try:
        payload = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise _RequestError(HTTPStatus.BAD_REQUEST, "the body is not UTF-8") from None
    except json.JSONDecodeError as err:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST, f"the body is not JSON: {err.msg} at character {err.pos}"
        ) from None
    if not isinstance(payload, dict):
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f'expected a JSON object {{"text": ..., "k": ...}}, got a {type(payload).__name__}',
        )
    if "texts" in payload:
        return _parse_texts(payload)
    unknown = sorted(set(payload) - {"text", "k"})
    if unknown:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST, f'unknown fields {unknown}: give "text" and optionally "k"'
        )
    if "text" not in payload:
        raise _RequestError(HTTPStatus.BAD_REQUEST, 'missing "text" (the sentence to tag)')
    text = payload["text"]
    if not isinstance(text, str):
        raise _RequestError(
            HTTPStatus.BAD_REQUEST, f'"text" must be a string, got a {type(text).__name__}'
        )
    k = payload.get("k", DEFAULT_K)
    if isinstance(k, bool) or not isinstance(k, int):
        raise _RequestError(
            HTTPStatus.BAD_REQUEST, f'"k" must be an integer, got a {type(k).__name__}'
        )
    if not 1 <= k <= MAX_K:
        raise _RequestError(HTTPStatus.BAD_REQUEST, f'"k" must be between 1 and {MAX_K}, got {k}')
    return text, k


@dataclass(frozen=True)
class _TextsRequest:
    """A ``POST /api/tag`` body with ``"texts"``: the texts and how they are grouped."""

    texts: list[str]
    group: str


def _parse_texts(payload: dict[str, Any]) -> _TextsRequest:
    """``(texts, group)`` of a ``POST /api/tag`` body with ``"texts"``.

    Raises:
        _RequestError: 400 naming what is wrong.
    """
    unknown = sorted(set(payload) - {"texts", "group"})
    if unknown:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f'unknown fields {unknown}: with "texts" give "group" only ("k" best paths are for '
            'one "text")',
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
    if len(texts) > MAX_TEXTS:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f'"texts" holds {len(texts)} texts; the lab tags at most {MAX_TEXTS} at once',
        )
    chars = sum(len(t) for t in texts)
    if chars > MAX_CHARS:
        raise _RequestError(
            HTTPStatus.BAD_REQUEST,
            f'"texts" hold {chars} characters in all; the lab tags at most {MAX_CHARS} at once',
        )
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


class _Handler(BaseHTTPRequestHandler):
    """One request: a static file or the API."""

    server: LabServer
    server_version = "crfhead-lab"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    # ------------------------------------------------------------------------------ answers
    def _send(
        self, status: HTTPStatus, body: bytes, content_type: str, *, cache: bool = False
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache" if cache else "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", _CSP)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: HTTPStatus, payload: Any) -> None:
        body = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8")

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._json(status, {"error": message})

    def _host_ok(self) -> bool:
        """``Host`` names the loopback address (a page on another name cannot reach the API)."""
        host = (self.headers.get("Host") or "").strip().lower()
        if host.startswith("["):
            name = host[: host.find("]") + 1]
        else:
            name = host.rsplit(":", 1)[0] if ":" in host else host
        return name in ("127.0.0.1", "localhost", "[::1]")

    # ------------------------------------------------------------------------------ methods
    def do_GET(self) -> None:
        """A static file, or ``GET /api/model``."""
        if not self._host_ok():
            self._error(HTTPStatus.FORBIDDEN, "the lab answers on 127.0.0.1 only")
            return
        path = urlsplit(self.path).path
        if path == "/api/model":
            self._json(HTTPStatus.OK, self.server.state.model_info())
            return
        if path == "/api/payloads":
            self._json(HTTPStatus.OK, {"payloads": self.server.state.payloads()})
            return
        if path.startswith("/api/"):
            self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: {path}")
            return
        try:
            found = _static_file(self.server.state.static, path)
        except UnicodeDecodeError:
            found = None
        if found is None:
            self._error(HTTPStatus.NOT_FOUND, "not found")
            return
        ctype = _TYPES.get(found.suffix.lower()) or (
            mimetypes.guess_type(found.name)[0] or "application/octet-stream"
        )
        self._send(HTTPStatus.OK, found.read_bytes(), ctype, cache=True)

    def do_HEAD(self) -> None:
        """As ``GET``, without the body."""
        self.do_GET()

    def do_POST(self) -> None:
        """``POST /api/tag``."""
        if not self._host_ok():
            self._error(HTTPStatus.FORBIDDEN, "the lab answers on 127.0.0.1 only")
            return
        path = urlsplit(self.path).path
        if path != "/api/tag":
            self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: POST {path}")
            return
        try:
            body = self._read_body()
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if ctype != "application/json":
                raise _RequestError(
                    HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                    f"send the body as application/json, not {ctype or 'no content type'}",
                )
            request = _parse_tag_request(body)
            if isinstance(request, _TextsRequest):
                result = self.server.state.tag_texts(request.texts, request.group)
            else:
                result = self.server.state.tag(*request)
        except _RequestError as err:
            self._error(err.status, err.message)
            return
        except Exception as err:  # a bug or a broken model: say so, keep serving
            self.log_error("tagging failed: %r", err)
            self._error(
                HTTPStatus.INTERNAL_SERVER_ERROR,
                f"the model failed on this text: {type(err).__name__}: {err}",
            )
            return
        self._json(HTTPStatus.OK, result)

    def do_PUT(self) -> None:
        """Refused: the lab changes nothing."""
        self._error(HTTPStatus.METHOD_NOT_ALLOWED, "the lab takes GET and POST /api/tag only")

    do_DELETE = do_PUT  # noqa: N815
    do_PATCH = do_PUT  # noqa: N815

    def _read_body(self) -> bytes:
        """The request body, at most :data:`MAX_BODY` bytes.

        Raises:
            _RequestError: 411 without a length, 400 for a bad one, 413 for too long a body.
        """
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            self.close_connection = True
            raise _RequestError(HTTPStatus.LENGTH_REQUIRED, "send a Content-Length, not chunks")
        raw = self.headers.get("Content-Length")
        if raw is None:
            self.close_connection = True
            raise _RequestError(HTTPStatus.LENGTH_REQUIRED, "a Content-Length is required")
        try:
            length = int(raw)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            raise _RequestError(HTTPStatus.BAD_REQUEST, f"bad Content-Length: {raw!r}")
        if length > MAX_BODY:
            self.close_connection = True  # the unread body must not be taken for a request
            raise _RequestError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"the body is {length} bytes; the lab takes at most {MAX_BODY}",
            )
        return self.rfile.read(length)

    def log_message(self, format: str, *args: Any) -> None:
        """Request lines only when the server is verbose; errors always, on stderr."""
        if self.server.verbose:
            super().log_message(format, *args)

    def log_error(self, format: str, *args: Any) -> None:
        """Errors on stderr."""
        sys.stderr.write(f"crfhead lab: {format % args}\n")


class LabServer(ThreadingHTTPServer):
    """A :class:`~http.server.ThreadingHTTPServer` on ``127.0.0.1`` holding a :class:`LabState`.

    Attributes:
        state: the static folder and the model.
        verbose: log every request line.
    """

    daemon_threads = True

    def __init__(self, state: LabState, port: int = 0, *, verbose: bool = False) -> None:
        self.state = state
        self.verbose = verbose
        super().__init__((HOST, port), _Handler)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/``."""
        return f"http://{HOST}:{self.server_address[1]}/"


def make_server(
    port: int = 0,
    *,
    tagger: TextTagger | None = None,
    model_path: str | None = None,
    static: Path | None = None,
    verbose: bool = False,
) -> LabServer:
    """A lab server on ``127.0.0.1:port`` (``0``: any free port; read it from ``.url``), not yet serving.

    Call ``serve_forever()`` (in a thread, for tests) and ``shutdown()`` / ``server_close()``.
    """
    return LabServer(LabState(static, tagger, model_path), port, verbose=verbose)
