"""Training callbacks: safe checkpoints, a console that says what matters, perceptron averaging.

* :class:`RunConsole` prints what a person needs from a run and nothing else: the run folder when it
  starts, the best checkpoint when fitting ends, the test report's path when testing ends (to stderr;
  the report table itself goes to stdout). ``train.py`` installs it on every trainer.
* :func:`progress_bar` is Lightning's progress bar (Rich when installed, else tqdm) showing the
  epoch's ``val/f1`` beside the training loss, without Lightning's ``v_num`` (the run folder names
  the version); ``train.py`` installs it unless ``enable_progress_bar`` is false or a config gives
  its own.
* :class:`OnExceptionCheckpoint` saves ``on_exception.ckpt`` in the run's own version folder when
  training stops on an exception (Ctrl-C, SIGTERM included) and prints how to resume from it. It is
  *not* Lightning's class of that name on purpose: with Lightning's, every later ``fit`` in the same
  folder silently resumes from the newest such file (its checkpoint connector turns
  ``ckpt_path=None`` into ``"last"``), keeping the old optimizer state. Here a run resumes only from
  the ``--ckpt_path`` the user gives.
* :class:`ModelCheckpoint` is Lightning's, except that ``last.ckpt`` is refreshed at every validation
  (Lightning 2.6 refreshes it only when a top-k checkpoint was saved at that step, so after the best
  epoch ``last.ckpt`` stopped being the last epoch and resuming from it redid epochs).
* :class:`AtomicCheckpointIO` writes every checkpoint to a temporary file in the same folder and
  renames it into place, so a full disk or a kill never leaves a truncated file under a valid name
  (``train.py`` installs it on every trainer).

Averaging follows Collins (2002, §2.5) and *Sequence Labeling: From HMMs to Linear-Chain CRFs*.

:class:`WeightAveraging` is Lightning's equal-weight ``WeightAveraging`` (average of the parameters
after every optimizer step, swapped in for validation, saved as the checkpoint's ``state_dict``) with
two changes:

* ``use_buffers`` defaults to ``False``: a head's buffers are constraint masks (bool), not statistics.
* Evaluating a checkpoint evaluates its average. Lightning's callback, when the same trainer runs
  ``test(ckpt_path="best")`` after ``fit``, loads the checkpoint's *current* (non-averaged) weights
  into the model (its ``on_load_checkpoint`` restores the fit state whenever an averaged model exists),
  so the test scores would silently be those of the last iterate. Outside fitting we keep the
  checkpoint's ``state_dict``, which is the average.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

import pytorch_lightning as pl
import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO
from pytorch_lightning.callbacks import Callback, ProgressBar
from pytorch_lightning.callbacks import ModelCheckpoint as _LightningModelCheckpoint
from pytorch_lightning.callbacks import RichProgressBar as _LightningRichProgressBar
from pytorch_lightning.callbacks import TQDMProgressBar as _LightningTQDMProgressBar
from pytorch_lightning.callbacks import WeightAveraging as _LightningWeightAveraging
from pytorch_lightning.trainer.states import TrainerFn

__all__ = [
    "PROGRESS_METRICS",
    "AtomicCheckpointIO",
    "ModelCheckpoint",
    "OnExceptionCheckpoint",
    "RichProgressBar",
    "RunConsole",
    "TQDMProgressBar",
    "WeightAveraging",
    "progress_bar",
]

PROGRESS_METRICS = ("val/f1",)
"""Epoch metrics shown on the progress bar beside what the module logs with ``prog_bar=True``."""


class AtomicCheckpointIO(TorchCheckpointIO):
    """``torch.save`` to a temporary file beside the target, flushed to disk, then renamed over it."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        """Write ``checkpoint`` to ``path`` atomically (the old file, if any, stays until the rename)."""
        if storage_options is not None:
            raise TypeError(f"storage_options are not supported, got {storage_options!r}")
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            mask = os.umask(0)  # read the umask (set back at once): mkstemp's 0o600 would stay
            os.umask(mask)
            os.fchmod(fd, 0o666 & ~mask)  # the mode open() would give, as the file replaced had
            with os.fdopen(fd, "wb") as handle:
                torch.save(checkpoint, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class ModelCheckpoint(_LightningModelCheckpoint):
    """Lightning's ``ModelCheckpoint``, with ``last.ckpt`` refreshed whenever it saves, best or not."""

    def _refresh_last(self, trainer: pl.Trainer, at_train_epoch_end: bool) -> None:
        if (
            self.save_last
            and not self._should_skip_saving_checkpoint(trainer)
            and self._should_save_on_train_epoch_end(trainer) == at_train_epoch_end
        ):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:  # noqa: D102
        super().on_train_epoch_end(trainer, pl_module)
        self._refresh_last(trainer, at_train_epoch_end=True)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:  # noqa: D102
        super().on_validation_end(trainer, pl_module)
        self._refresh_last(trainer, at_train_epoch_end=False)


class OnExceptionCheckpoint(Callback):
    """Save ``on_exception.ckpt`` when training stops on an exception, and say how to resume.

    Args:
        dirpath: the folder; ``None``: the run's version folder (the logger's ``log_dir``, else the
            trainer's ``default_root_dir``), so two runs never share the file.
        filename: the file's name, without ``.ckpt``.

    Nothing resumes from the file unless the user passes it as ``--ckpt_path``.
    """

    def __init__(self, dirpath: str | None = None, filename: str = "on_exception") -> None:
        if not filename:
            raise ValueError("filename cannot be empty")
        self.dirpath, self.filename = dirpath, filename
        self.saved: str | None = None

    def ckpt_path(self, trainer: pl.Trainer) -> str:
        """Where the checkpoint goes for this trainer's run."""
        folder = self.dirpath or trainer.log_dir or trainer.default_root_dir
        return os.path.join(folder, f"{self.filename}.ckpt")

    def on_exception(  # noqa: D102
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        if trainer.state.fn != TrainerFn.FITTING:
            return
        path = self.ckpt_path(trainer)
        trainer.save_checkpoint(path)
        self.saved = path
        if trainer.is_global_zero:
            print(
                f"training stopped ({type(exception).__name__}) at epoch {trainer.current_epoch}, "
                f"step {trainer.global_step}; saved {path}: resume with --ckpt_path={path}",
                file=sys.stderr,
            )


class WeightAveraging(_LightningWeightAveraging):
    """Equal-weight parameter averaging; evaluation and checkpoints use the average.

    Args:
        use_buffers: average the buffers too (default ``False``).
        kwargs: passed to Lightning's ``WeightAveraging`` (``device``, ``avg_fn``...).
    """

    def __init__(self, use_buffers: bool = False, **kwargs: Any) -> None:
        super().__init__(use_buffers=use_buffers, **kwargs)

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        """Restore the fit state when resuming a fit; otherwise keep the averaged ``state_dict``."""
        if trainer.state.fn != TrainerFn.FITTING:
            return
        super().on_load_checkpoint(trainer, pl_module, checkpoint)


def _with_epoch_metrics(
    metrics: dict[str, int | str | float | dict[str, float]], trainer: pl.Trainer
) -> dict[str, int | str | float | dict[str, float]]:
    """The bar's items: ``v_num`` dropped, :data:`PROGRESS_METRICS` added once they exist."""
    metrics.pop("v_num", None)
    for key in PROGRESS_METRICS:
        value = trainer.callback_metrics.get(key)
        if value is not None and key not in metrics:
            metrics[key] = round(float(value), 4)
    return metrics


class RichProgressBar(_LightningRichProgressBar):
    """Lightning's Rich progress bar with the epoch's ``val/f1`` and without ``v_num``."""

    def get_metrics(  # noqa: D102
        self, trainer: pl.Trainer, pl_module: pl.LightningModule
    ) -> dict[str, int | str | float | dict[str, float]]:
        return _with_epoch_metrics(super().get_metrics(trainer, pl_module), trainer)


class TQDMProgressBar(_LightningTQDMProgressBar):
    """Lightning's tqdm progress bar with the epoch's ``val/f1`` and without ``v_num``."""

    def get_metrics(  # noqa: D102
        self, trainer: pl.Trainer, pl_module: pl.LightningModule
    ) -> dict[str, int | str | float | dict[str, float]]:
        return _with_epoch_metrics(super().get_metrics(trainer, pl_module), trainer)


def progress_bar() -> ProgressBar:
    """The bar Lightning would choose (Rich when installed, else tqdm), with the epoch's ``val/f1``."""
    if importlib.util.find_spec("rich") is not None:
        return RichProgressBar()
    return TQDMProgressBar()


class RunConsole(Callback):
    """Print where a run's results are: its folder, its best checkpoint, its test report.

    Args:
        stream: where the lines go (default ``sys.stderr`` at the time of printing).

    Lines (global rank 0 only; a ``fast_dev_run`` keeps nothing, and says so once)::

        run folder: runs/finance_indicator_crf/version_0
        best checkpoint: runs/finance_indicator_crf/version_0/checkpoints/epoch=13-step=56.ckpt (val/f1 0.9350)
        test report: runs/finance_indicator_crf/version_0/test_report.json
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self.lines: list[str] = []
        self._folder: str | None = None

    def _say(self, trainer: pl.Trainer, line: str) -> None:
        if trainer.is_global_zero:
            self.lines.append(line)
            print(line, file=self.stream or sys.stderr, flush=True)

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:  # noqa: D102
        folder = trainer.log_dir  # a collective under DDP: every rank asks
        if getattr(trainer, "fast_dev_run", False):
            if self._folder is None:
                self._folder = ""
                self._say(trainer, "fast_dev_run: one batch per loop; nothing is kept")
            return
        if folder and folder != self._folder:
            self._folder = folder
            self._say(trainer, f"run folder: {folder}")

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:  # noqa: D102
        checkpoint = trainer.checkpoint_callback
        best = getattr(checkpoint, "best_model_path", "")
        if getattr(trainer, "fast_dev_run", False) or not best:
            return
        score = getattr(checkpoint, "best_model_score", None)
        monitor = getattr(checkpoint, "monitor", None)
        detail = f" ({monitor} {float(score):.4f})" if score is not None and monitor else ""
        self._say(trainer, f"best checkpoint: {best}{detail}")

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:  # noqa: D102
        if getattr(trainer, "fast_dev_run", False):
            return
        # Where TaggerModule writes it (its report_dir, else the logger's folder).
        folder = (
            getattr(pl_module, "report_dir", None) or trainer.log_dir or trainer.default_root_dir
        )
        report = Path(folder) / "test_report.json"
        if report.is_file():
            self._say(trainer, f"test report: {report}")
