"""A quiet console for ``train.py``: the library lines a user cannot act on are filtered, ``--verbose`` shows all.

Lightning's tips, device inventory and loop bookkeeping, the libraries' deprecations and the warnings
our own configuration causes on purpose (``num_workers=0``, a tiny corpus's logging interval, a
counting head without a loss) are hidden; crfhead's own warnings stay visible. The console also
removes the temporary folders of ``fast_dev_run`` runs at the end.
"""

from __future__ import annotations

import logging
import re
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

__all__ = ["NOISE_LOGGERS", "NoiseFilter", "QuietConsole", "split_verbose"]

_NOISE_LOG = re.compile(
    r"💡 Tip|litlogger|litmodels"
    r"|^(GPU|TPU|HPU|IPU) available:"
    r"|^Seed set to"
    r"|^`Trainer\.(fit|validate|test|predict)` stopped:"
    r"|^Restoring states from the checkpoint path|^Restored all states from the checkpoint"
    r"|^Loaded model weights from the checkpoint"
    r"|^Running in `fast_dev_run` mode"
    r"|^LOCAL_RANK: \d+ - CUDA_VISIBLE_DEVICES"
    r"|^You are using a CUDA device .* Tensor Cores"
)
"""Lightning's log lines a user cannot act on (tips, device inventory, loop bookkeeping)."""

NOISE_LOGGERS = (
    "pytorch_lightning",
    "pytorch_lightning.utilities.rank_zero",
    "pytorch_lightning.accelerators.cuda",
    "lightning_fabric",
    "lightning_fabric.utilities.rank_zero",
    "lightning_fabric.utilities.seed",
)
"""The loggers those lines come from (a filter on a logger sees only its own records)."""

_NOISE_WARNINGS = (
    # Caused by our own configuration: num_workers=0 is the default (tokenised data in memory), a
    # tiny corpus has fewer batches than the logging interval, a resumed run reuses its folder.
    r".*does not have many workers",
    r".*is smaller than the logging interval",
    r"Checkpoint directory .* exists and is not empty",
    r"The dirpath has changed from",
    r"Experiment logs directory .* exists and is not empty",
    r"You're resuming from a checkpoint that ended before the epoch ended",
    r".*GPU available but not used",
    # A counting head (the HMM) fits without a loss or an optimizer, on purpose.
    r".*configure_optimizers` returned `None`",
    r".*training_step` returned `None`",
    r"Starting from v1\.9\.0, `tensorboardX` has been removed",
    r".*`isinstance\(treespec, LeafSpec\)` is deprecated",
    r"The `srun` command is available on your system but is not used",
)
"""Warnings a user cannot act on (matched at the start of the message)."""


class NoiseFilter(logging.Filter):
    """Drops the log records a user cannot act on."""

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102
        return not _NOISE_LOG.search(record.getMessage())


class QuietConsole:
    """The noise filters of a quiet run, the temporary folders of ``fast_dev_run`` runs."""

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose
        self.scratch: list[str] = []
        self._filter = NoiseFilter()
        self._warning_filters: list[Any] = []

    @contextmanager
    def session(self) -> Iterator[QuietConsole]:
        """Quiet (unless verbose) for the block; every filter and scratch folder removed after."""
        with warnings.catch_warnings():
            # main() hands LightningCLI the command line as args, by design: never a mistake here.
            warnings.filterwarnings(
                "ignore", message=".*args parameter is intended to run from within"
            )
            if not self.verbose:
                self._quiet()
            try:
                yield self
            finally:
                self.show_all()
                for folder in self.scratch:
                    shutil.rmtree(folder, ignore_errors=True)

    def _quiet(self) -> None:
        before = list(warnings.filters)
        for message in _NOISE_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        # The libraries' deprecations (Lightning, jsonargparse, torch): crfhead's own stay visible.
        for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
            warnings.filterwarnings("ignore", category=category, module=r"(?!crfhead(\.|$))")
        self._warning_filters = [f for f in warnings.filters if f not in before]
        for name in NOISE_LOGGERS:
            logger = logging.getLogger(name)
            logger.addFilter(self._filter)
            for handler in logger.handlers:
                handler.addFilter(self._filter)

    def show_all(self) -> None:
        """Remove the filters (``--verbose``, or ``verbose: true`` found in a config file)."""
        filters = cast("list[Any]", warnings.filters)
        for entry in self._warning_filters:
            if entry in filters:
                filters.remove(entry)
        if self._warning_filters:
            warnings.filterwarnings("default", append=True)  # the default action; resets the cache
        self._warning_filters = []
        for name in NOISE_LOGGERS:
            logger = logging.getLogger(name)
            logger.removeFilter(self._filter)
            for handler in logger.handlers:
                handler.removeFilter(self._filter)


_BOOLS = ("true", "false", "yes", "no", "1", "0", "on", "off")


def split_verbose(argv: list[str]) -> tuple[bool, list[str]]:
    """Whether ``--verbose`` is on the command line, and the command line for LightningCLI.

    ``fit`` and ``predict`` have crfhead's ``--verbose``/``--no_verbose``. ``test`` and ``validate``
    have Lightning's ``--verbose BOOL`` (print the results): there a bare ``--verbose`` is crfhead's
    and is taken out, one with a value is Lightning's and is left.
    """
    verbose = False
    lightning_owns = bool(argv) and argv[0] in ("test", "validate")
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg in ("--verbose", "--no_verbose"):
            verbose = arg == "--verbose"
            bare = i + 1 >= len(argv) or argv[i + 1].lower() not in _BOOLS
            if lightning_owns and arg == "--verbose" and bare:
                continue
        out.append(arg)
    return verbose, out
