"""Training callbacks: parameter averaging for the averaged perceptron, and the on-exception checkpoint.

:class:`OnExceptionCheckpoint` is Lightning's, with a ``dirpath`` that may be left to ``train.py``
(which puts it in the run's folder, ``runs/<run name>``).

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
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import OnExceptionCheckpoint as _LightningOnExceptionCheckpoint
from pytorch_lightning.callbacks import WeightAveraging as _LightningWeightAveraging
from pytorch_lightning.trainer.states import TrainerFn

__all__ = ["OnExceptionCheckpoint", "WeightAveraging"]


class OnExceptionCheckpoint(_LightningOnExceptionCheckpoint):
    """Save a checkpoint when training stops on an exception (Ctrl-C included).

    Args:
        dirpath: the folder; ``None`` is filled in by ``train.py`` with the run's folder (the
            logger's ``save_dir/name``), and is the working directory elsewhere.
        filename: the file's name, without ``.ckpt``.
    """

    def __init__(self, dirpath: str | None = None, filename: str = "on_exception") -> None:
        super().__init__(os.getcwd() if dirpath is None else dirpath, filename)


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
