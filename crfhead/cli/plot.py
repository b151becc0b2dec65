"""``crfhead plot``: draw a run's learning curves (``crfhead.training.plot``) to a PNG."""

from __future__ import annotations

import argparse

from crfhead.cli.common import Subparsers

__all__ = ["add_parser", "run"]


def add_parser(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    """Add ``plot`` and its options."""
    parser = sub.add_parser(
        "plot",
        parents=[common],
        help="draw a run's learning curves to a PNG",
        description="Draw a run's learning curves (train/loss, val/loss, val/f1) from its metrics.csv.",
    )
    parser.add_argument("run", metavar="RUN", help="a run's version folder: runs/<name>/version_N")
    parser.add_argument("--output", metavar="PNG", help="default: RUN/learning_curves.png")


def run(ns: argparse.Namespace) -> int:
    """Draw the curves; prints the PNG's path. Returns the exit status (0)."""
    from crfhead.training.plot import plot_metrics

    print(plot_metrics(ns.run, ns.output))
    return 0
