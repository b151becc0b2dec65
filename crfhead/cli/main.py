"""The ``crfhead`` command's entry points: :func:`run` one command line, :func:`main` report its errors.

Errors a user can act on (a missing file, a file that is not a model, a malformed input line, a
missing extra) print one line, ``crfhead: error: ...``, and exit with status 2; anything else is a
bug and exits with 1; ``--verbose`` shows the traceback. Warnings print as ``crfhead: warning:
...``. The pass-through subcommands (:data:`crfhead.cli.train.PASSTHROUGH`) keep training's own
console.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import TextIO

from crfhead.cli import configs, evaluate, export, lab, plot, predict, train
from crfhead.cli.common import PROG
from crfhead.cli.parser import build_parser
from crfhead.cli.train import PASSTHROUGH

__all__ = ["USER_ERRORS", "main", "run"]

USER_ERRORS = (OSError, ValueError, ImportError)
"""Errors reported in one line with exit status 2; anything else is a bug: status 1."""

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "predict": predict.run,
    "evaluate": evaluate.run,
    "export": export.run,
    "configs": configs.run,
    "plot": plot.run,
    "lab": lab.run,
}


def run(argv: Sequence[str] | None = None) -> int:
    """Run one command line; errors propagate as exceptions (``main`` reports them).

    Returns:
        The exit status (0; 2 with no subcommand).

    Raises:
        SystemExit: from argparse (``--help``, a usage error) or the training CLI.
        Exception: whatever the command raised.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    first = next((i for i, a in enumerate(args) if a != "--verbose"), len(args))
    if first < len(args) and args[first] in PASSTHROUGH:
        return train.run(args[first], args[first + 1 :])
    parser = build_parser()
    ns = parser.parse_args(args)
    if ns.command is None:
        parser.print_help(sys.stderr)
        return 2
    return _COMMANDS[ns.command](ns)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``crfhead`` console script: :func:`run`, with errors reported in one line.

    Returns:
        0 on success; 2 for a usage error or bad input (a missing file, not a model, a malformed
        line), 1 for an unexpected error, 130 when interrupted; a training run's own status.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in args
    try:
        first = next((a for a in args if a != "--verbose"), None)
        if verbose or first in PASSTHROUGH:  # training's console is its own
            return run(args)
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return run(args)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()  # the reader went away (| head): not an error
        return 0
    except Exception as exc:
        if verbose:
            traceback.print_exc()
        user = isinstance(exc, USER_ERRORS)
        print(f"{PROG}: error: {_one_line(exc, user)}", file=sys.stderr)
        return 2 if user else 1


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A warning as ``crfhead: warning: ...`` (what was read or skipped), without source lines."""
    print(f"{PROG}: warning: {message}", file=sys.stderr if file is None else file)


def _one_line(exc: BaseException, user: bool) -> str:
    """The first line of the error's message (the type too, for a bug), with where to see the rest."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    message = lines[0] if lines else type(exc).__name__
    if len(lines) > 1:
        message += " (--verbose for the rest)"
    return message if user else f"{type(exc).__name__}: {message} (--verbose for the traceback)"


def _silence_stdout() -> None:
    """Point stdout at the null device, so that flushing it at exit cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
