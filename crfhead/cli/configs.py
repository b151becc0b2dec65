"""``crfhead configs``: list the configs shipped with crfhead (for ``--config``), each with its first comment line."""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from crfhead.cli.common import Subparsers

__all__ = ["add_parser", "config_files", "run"]


def add_parser(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    """Add ``configs``."""
    sub.add_parser(
        "configs",
        parents=[common],
        help="list the configs shipped with crfhead",
        description="List the configs shipped with crfhead (for --config).",
    )


def config_files() -> tuple[str, list[tuple[str, str]]]:
    """Where the configs are (``crfhead:`` for the package's), and each config's name and first comment line."""
    root: Any = resources.files("crfhead").joinpath("configs")
    where = "crfhead:"
    if not root.is_dir():
        root = Path(__file__).resolve().parents[2] / "configs"  # a source checkout
        where = str(root)
        if not root.is_dir():
            return where, []
    found: list[tuple[str, str]] = []

    def walk(node: Any, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith((".yaml", ".yml")):
                found.append((prefix + child.name, _description(child.read_text("utf-8"))))

    walk(root, "")
    return where, found


def _description(text: str) -> str:
    """The first comment line of a config, or ``""`` when its first non-blank line is not one."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        return stripped.lstrip("#").strip() if stripped.startswith("#") else ""
    return ""


def run(ns: argparse.Namespace) -> int:
    """Print the configs, one a line; returns the exit status (0).

    Raises:
        FileNotFoundError: no configs found.
    """
    where, found = config_files()
    if not found:
        raise FileNotFoundError(f"no configs found (looked in the package and {where})")
    width = max(len(name) for name, _ in found)
    for name, text in found:
        print(f"{name:<{width}}  {text}".rstrip())
    if where == "crfhead:":
        print(f"({len(found)} configs in the package: --config crfhead:NAME)", file=sys.stderr)
    else:
        print(f"({len(found)} configs in {where}: --config {where}/NAME)", file=sys.stderr)
    return 0
