"""The lab's command line: ``python -m crfhead.lab`` and ``crfhead lab`` (:func:`main`).

``[--model PATH] [--port P] [--no-browser]``: load the model once, serve the page on 127.0.0.1.
``--max-body``, ``--max-chars``, ``--max-tokens``, ``--max-texts``, ``--lock-timeout`` and
``--read-timeout`` bound what one request may ask (:class:`crfhead.lab.server.Limits`; the defaults
are the server's).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crfhead.lab.server import Limits

__all__ = ["DEFAULT_PORT", "add_arguments", "build_parser", "limits_of", "main", "serve"]

DEFAULT_PORT = 8765


def _positive_int(text: str) -> int:
    """An argument that must be a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds(*, zero: bool) -> Callable[[str], float]:
    """An argument that must be a finite number of seconds, above 0 (or at least 0 with ``zero``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            bound = "at least 0" if zero else "above 0"
            raise argparse.ArgumentTypeError(
                f"must be a finite number of seconds {bound}, got {text}"
            )
        return value

    return parse


def build_parser(prog: str = "python -m crfhead.lab") -> argparse.ArgumentParser:
    """The lab's arguments: model, port, browser, device, verbosity and the request limits."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Serve the crfhead lab on 127.0.0.1: the trellis, learning curves, label bias, the "
            "perceptron's bound, the finance table, the higher-order decoder, and your own model "
            "on a sentence you type (with --model)."
        ),
    )
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the lab's options to ``parser`` (``crfhead lab`` shares them)."""
    parser.add_argument(
        "--model",
        "--checkpoint",
        dest="model",
        default=None,
        metavar="PATH",
        help="a training checkpoint (.ckpt) or a folder written by TextTagger.save() "
        "for the 'Your model' tab",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        metavar="P",
        help=f"the port on 127.0.0.1 (default {DEFAULT_PORT}; 0: any free port)",
    )
    parser.add_argument(
        "--no-browser", action="store_true", help="do not open the page in a web browser"
    )
    parser.add_argument("--device", default=None, help="where the model runs (default: cpu)")
    parser.add_argument(
        "--verbose", action="store_true", default=False, help="log every request line"
    )
    from crfhead.lab import server as srv

    limits = parser.add_argument_group(
        "request limits", "what one request may ask; past a size limit the answer is a 413"
    )
    limits.add_argument(
        "--max-body",
        type=_positive_int,
        default=srv.MAX_BODY,
        metavar="BYTES",
        help=f"the largest request body (default {srv.MAX_BODY})",
    )
    limits.add_argument(
        "--max-chars",
        type=_positive_int,
        default=srv.MAX_CHARS,
        metavar="N",
        help=f"the most characters of text a request, all texts together (default {srv.MAX_CHARS})",
    )
    limits.add_argument(
        "--max-tokens",
        type=_positive_int,
        default=srv.MAX_TOKENS,
        metavar="N",
        help=f"the most tokens of text a request, as the model splits it (default {srv.MAX_TOKENS})",
    )
    limits.add_argument(
        "--max-texts",
        type=_positive_int,
        default=srv.MAX_TEXTS,
        metavar="N",
        help=f"the most texts decoded together (default {srv.MAX_TEXTS})",
    )
    limits.add_argument(
        "--lock-timeout",
        type=_seconds(zero=True),
        default=srv.LOCK_TIMEOUT,
        metavar="S",
        help="seconds a request waits while the model serves another, then 503 "
        f"(default {srv.LOCK_TIMEOUT:g}; 0: refuse at once)",
    )
    limits.add_argument(
        "--read-timeout",
        type=_seconds(zero=False),
        default=srv.READ_TIMEOUT,
        metavar="S",
        help=f"seconds a connection may stay silent (default {srv.READ_TIMEOUT:g})",
    )


def limits_of(ns: argparse.Namespace) -> Limits:
    """The :class:`~crfhead.lab.server.Limits` that the parsed options ask for."""
    from crfhead.lab.server import Limits

    return Limits(
        max_body=ns.max_body,
        max_chars=ns.max_chars,
        max_tokens=ns.max_tokens,
        max_texts=ns.max_texts,
        lock_timeout=ns.lock_timeout,
        read_timeout=ns.read_timeout,
    )


def serve(ns: argparse.Namespace) -> int:
    """Load the model (if any), serve until interrupted; returns the exit status."""
    from crfhead.lab.server import load_model, make_server

    if not 0 <= ns.port <= 65535:
        print(f"crfhead lab: error: --port must be 0 to 65535, got {ns.port}", file=sys.stderr)
        return 2
    tagger = None
    if ns.model is not None:
        try:
            tagger = load_model(ns.model, ns.device)
        except (OSError, ValueError) as err:
            print(f"crfhead lab: error: {err}", file=sys.stderr)
            return 2
    try:
        server = make_server(
            ns.port, tagger=tagger, model_path=ns.model, verbose=ns.verbose, limits=limits_of(ns)
        )
    except OSError as err:
        print(f"crfhead lab: error: cannot listen on 127.0.0.1:{ns.port}: {err}", file=sys.stderr)
        return 2
    print(f"crfhead lab: serving on {server.url} (Ctrl-C to stop)", flush=True)
    if tagger is None:
        print("crfhead lab: no model loaded ('Your model' needs --model PATH)", flush=True)
    if not ns.no_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("crfhead lab: stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and :func:`serve`."""
    return serve(build_parser().parse_args(argv))
