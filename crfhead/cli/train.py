"""``crfhead train | test | fit | validate ARGS``: ``ARGS`` go untouched to ``train.py``'s LightningCLI.

:func:`crfhead.training.cli.main`; ``train`` is fit then test, as ``train.py`` runs. Training's console
is its own, but its usage errors name what was typed (``crfhead train: error: ...``, not ``fit``)
and a value the configuration's components refuse is one line, exit status 2
(:class:`crfhead.training.cli.ConfigError`).
"""

from __future__ import annotations

from collections.abc import Sequence

from crfhead.cli.common import PROG

__all__ = ["PASSTHROUGH", "run"]

PASSTHROUGH: dict[str, str] = {
    "train": "fit, then test the best checkpoint (train.py's arguments: --config FILE ...)",
    "test": "test a checkpoint (--config FILE --ckpt_path CKPT)",
    "fit": "fit only (train.py's arguments)",
    "validate": "validate a checkpoint (--config FILE --ckpt_path CKPT)",
}
"""Subcommands whose arguments go untouched to :func:`crfhead.training.cli.main`, with their help."""


def run(command: str, args: Sequence[str]) -> int:
    """Run the training CLI for ``command`` (a key of :data:`PASSTHROUGH`); returns 0.

    Raises:
        SystemExit: the training CLI's own exit.
    """
    from crfhead.training.cli import main as cli_main

    if command == "train":
        cli_main(list(args), prog=f"{PROG} train")  # errors name what the user typed
    else:
        cli_main([command, *args], prog=PROG)
    return 0
