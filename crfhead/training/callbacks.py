"""Training callbacks: checkpoints that never lose or mix up work, and averaging for the perceptron.

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

Averaging follows Collins (2002, §2.5) and seed ``000``.

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

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO
from pytorch_lightning.callbacks import Callback
from pytorch_lightning.callbacks import ModelCheckpoint as _LightningModelCheckpoint
from pytorch_lightning.callbacks import WeightAveraging as _LightningWeightAveraging
from pytorch_lightning.trainer.states import TrainerFn

__all__ = ["AtomicCheckpointIO", "ModelCheckpoint", "OnExceptionCheckpoint", "WeightAveraging"]


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
