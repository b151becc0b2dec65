"""``crfhead lab``: serve the interactive lab on 127.0.0.1 (as ``python -m crfhead.lab`` does)."""

from __future__ import annotations

import argparse

from crfhead.cli.common import Subparsers, formatter
from crfhead.lab.cli import add_arguments, serve

__all__ = ["add_parser", "run"]


def add_parser(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    """Add ``lab`` and the lab's own options (:func:`crfhead.lab.cli.add_arguments`)."""
    parser = sub.add_parser(
        "lab",
        formatter_class=formatter,
        help="serve the interactive lab on 127.0.0.1 (--model PATH: your model on a sentence)",
        description="Serve the interactive lab on 127.0.0.1 (as python -m crfhead.lab does).",
    )
    add_arguments(parser)


def run(ns: argparse.Namespace) -> int:
    """Serve until interrupted (:func:`crfhead.lab.cli.serve`); returns its exit status."""
    return serve(ns)
