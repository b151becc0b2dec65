"""The lab's command line: ``python -m crfhead.lab`` and ``crfhead lab`` (:func:`main`).

``[--model PATH] [--port P] [--no-browser]``: load the model once, serve the page on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["DEFAULT_PORT", "add_arguments", "build_parser", "main", "serve"]

DEFAULT_PORT = 8765


def build_parser(prog: str = "python -m crfhead.lab") -> argparse.ArgumentParser:
    """The lab's arguments: ``--model``, ``--port``, ``--no-browser``, ``--device``, ``--verbose``."""
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
        server = make_server(ns.port, tagger=tagger, model_path=ns.model, verbose=ns.verbose)
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
