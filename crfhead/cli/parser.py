"""The ``crfhead`` argument parser: every subcommand's options, the pass-through ones listed by name only."""

from __future__ import annotations

import argparse

from crfhead.cli import configs, evaluate, export, lab, plot, predict
from crfhead.cli.common import PROG, formatter
from crfhead.cli.train import PASSTHROUGH

__all__ = ["build_parser", "version"]


def version() -> str:
    """``crfhead <version> (torch <version>)``: what ``crfhead --version`` prints."""
    import torch  # already imported by crfhead itself

    import crfhead

    return f"{PROG} {crfhead.__version__} (torch {torch.__version__})"


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand but the pass-through ones (listed in the help only)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Neural sequence tagging with structured heads: train, tag, score, export.",
        epilog="Run 'crfhead SUBCOMMAND --help' for a subcommand's options.",
        formatter_class=formatter,
    )
    parser.add_argument("--verbose", action="store_true", help="show tracebacks on errors")
    parser.add_argument(
        "--version",
        action="version",
        version=version(),
        help="print crfhead's and torch's versions",
    )
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND")
    for name, text in PASSTHROUGH.items():
        sub.add_parser(name, help=text, add_help=False)
    common = argparse.ArgumentParser(add_help=False)  # --verbose after the subcommand, too
    common.add_argument(
        "--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    for command in (predict, evaluate, export, configs, plot, lab):
        command.add_parser(sub, common)
    return parser
