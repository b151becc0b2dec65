"""The lab: an interactive page that shows the chain, and the user's own model, at work.

``python -m crfhead.lab [--model PATH] [--port P] [--no-browser]`` (or ``crfhead lab``) serves
``crfhead/lab/static`` on 127.0.0.1 (:mod:`crfhead.lab.server`). The page is plain HTML, CSS and
JavaScript drawing SVG, with no build step and nothing fetched from outside the machine. Each tab reads
its data from ``static/data/<tab>.json``; the "Your model" tab asks the server to tag a sentence with
the model given by ``--model`` (a higher-order model also decodes several lines jointly there), and
can pin known spans or forbid labels on a range, showing the decoding and span probabilities
conditioned on them (``POST /api/tag`` with ``spans=``/``forbid=``). The
server bounds what one request may ask and how long it waits for the model (``--max-chars``,
``--max-tokens``, ``--lock-timeout``, ...: :class:`crfhead.lab.server.Limits`).

The library never imports this room; importing it imports nothing heavy (the model code is imported
when a model is loaded).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """The lab's command line (:func:`crfhead.lab.cli.main`)."""
    from crfhead.lab.cli import main as cli_main

    return cli_main(argv)
