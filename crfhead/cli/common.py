"""What every ``crfhead`` subcommand shares: the program's name, option helpers, loading a model.

Nothing here imports Lightning or transformers (``crfhead --help`` answers at once); the model code
is imported when a model is loaded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from crfhead.inference import TextTagger

__all__ = ["PROG", "Subparsers", "add_model_options", "formatter", "load_tagger", "positive", "say"]

PROG = "crfhead"
"""The command's name, which starts every message it prints."""

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What ``ArgumentParser.add_subparsers`` returns, where each command adds its parser."""


def formatter(prog: str) -> argparse.HelpFormatter:
    """The help layout: descriptions kept as written, options aligned at column 32."""
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def positive(text: str) -> int:
    """An ``int`` option of at least 1.

    Raises:
        argparse.ArgumentTypeError: naming the value (argparse prints the usage line).
    """
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """``--model PATH`` (alias ``--checkpoint``), ``--device`` and ``--batch-size``."""
    parser.add_argument(
        "--model",
        "--checkpoint",
        dest="model",
        required=True,
        metavar="PATH",
        help="a folder written by TextTagger.save() (loading it runs no code from it) or a "
        "training checkpoint (.ckpt: a pickle, read with weights_only; one from an untrusted "
        "source can run code if you set CRFHEAD_TRUST_CHECKPOINT=1)",
    )
    parser.add_argument("--device", default=None, help="e.g. cpu, cuda, cuda:1 (default: cpu)")
    parser.add_argument(
        "--batch-size",
        type=positive,
        default=None,
        metavar="N",
        help="chains (sentences) per batch (default: the model's own, TextTagger.batch_size)",
    )


def say(message: str) -> None:
    """``crfhead: message`` on stderr (what was read, written or left out)."""
    print(f"{PROG}: {message}", file=sys.stderr)


def load_tagger(path: str, device: str | None) -> TextTagger:
    """The model at ``path`` (:func:`crfhead.load`), with the command line's message when missing.

    Raises:
        FileNotFoundError: nothing at ``path``.
        ValueError: not a crfhead model (one line naming it).
    """
    import crfhead

    if not Path(path).exists():
        raise FileNotFoundError(
            f"checkpoint not found: {path} (give a .ckpt written by training or a folder written "
            "by TextTagger.save)"
        )
    return crfhead.load(path, device=device)
