"""The loggers ``train.py`` uses: Lightning's CSV and TensorBoard loggers, with two changes.

* **A version folder is claimed atomically.** Lightning picks ``version_<n>`` by listing the folder,
  so two runs started together in one folder can pick the same version and write into each other's
  logs and checkpoints. Here the version is claimed by creating its folder (``mkdir`` fails if another
  run got there first, and the next number is tried).
* **``hparams.yaml`` is written by libyaml** (the CSV logger's): Lightning's writer dumps every value
  twice through PyYAML's pure-Python emitter, which took 6 s of a 25 s WNUT17 BiLSTM epoch for the
  vocabularies in the hyper-parameters. The same YAML (safe types, sorted keys) comes from
  ``yaml.CSafeDumper`` in a fraction of that; values only Lightning's writer can represent go
  through it as before.
* **A resumed run continues its own folder.** ``train.py fit --ckpt_path=runs/x/version_3/...`` logs
  into ``version_3`` again (:mod:`crfhead.training.cli` sets the version) and calls
  :meth:`CSVLogger.continue_run` with the checkpoint's step: ``metrics.csv`` keeps the rows logged
  before the checkpoint and drops those after it (a crashed epoch's), where Lightning's writer would
  delete the whole file. TensorBoard purges the events from that step on (``purge_step``).

CSV is the default (``configs/base.yaml``). TensorBoard is the ``tensorboard`` extra
(``pip install 'crfhead[tensorboard]'``), chosen with
``--trainer.logger=crfhead.training.loggers.TensorBoardLogger``; without the package ``train.py``
says so in one line and logs to CSV (:func:`tensorboard_available`).
"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path
from typing import Any

import yaml
from lightning_fabric.loggers.csv_logs import _ExperimentWriter as _FabricExperimentWriter
from lightning_fabric.loggers.logger import rank_zero_experiment
from lightning_fabric.utilities.logger import _convert_params
from pytorch_lightning.core.saving import save_hparams_to_yaml
from pytorch_lightning.loggers import CSVLogger as _LightningCSVLogger
from pytorch_lightning.loggers import TensorBoardLogger as _LightningTensorBoardLogger
from pytorch_lightning.loggers.csv_logs import ExperimentWriter
from pytorch_lightning.utilities import rank_zero_only

__all__ = ["CSVLogger", "TensorBoardLogger", "save_hparams", "tensorboard_available"]


def tensorboard_available() -> bool:
    """Whether Lightning's TensorBoard logger can write: ``tensorboard`` or ``tensorboardX`` installed."""
    return any(
        importlib.util.find_spec(name) is not None for name in ("tensorboard", "tensorboardX")
    )


def _claim_next_version(root_dir: str, first: int) -> int:
    """Create ``root_dir/version_<n>`` for the first free ``n >= first``; return ``n``."""
    root = Path(root_dir)
    root.mkdir(parents=True, exist_ok=True)
    version = first
    while True:
        try:
            (root / f"version_{version}").mkdir()
        except FileExistsError:
            version += 1
            continue
        return version


def save_hparams(path: str | Path, hparams: dict[str, Any]) -> None:
    """Write ``hparams`` to ``path`` as YAML with libyaml's safe dumper (Lightning's writer as a fallback).

    The fallback runs for what the safe dumper cannot represent (a tuple, an object) and where
    PyYAML was built without libyaml.
    """
    dumper = getattr(yaml, "CSafeDumper", None)
    if dumper is None:
        save_hparams_to_yaml(path, hparams)
        return
    try:
        text = yaml.dump(dict(hparams), Dumper=dumper)
    except yaml.YAMLError:
        save_hparams_to_yaml(path, hparams)
        return
    Path(path).write_text(text, encoding="utf-8")


def _step(row: dict[str, str]) -> float:
    try:
        return float(row.get("step") or "nan")
    except ValueError:
        return float("nan")


class _ContinuedWriter(ExperimentWriter):
    """Lightning's CSV writer on an existing ``metrics.csv``: rows before ``before_step`` are kept."""

    def __init__(self, log_dir: str, before_step: int) -> None:
        super().__init__(log_dir=log_dir)
        if not self._fs.isfile(self.metrics_file_path):
            return
        with self._fs.open(self.metrics_file_path, "r", newline="") as file:
            reader = csv.DictReader(file)
            header = list(reader.fieldnames or [])
            # A row without a step is kept; one at or after the checkpoint's step is dropped.
            rows = [row for row in reader if not _step(row) >= before_step]
        with self._fs.open(self.metrics_file_path, "w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=header)
            writer.writeheader()
            writer.writerows(rows)
        self.metrics_keys = header

    def _check_log_dir_exists(self) -> None:
        """Lightning warns here and deletes ``metrics.csv``; a continued run keeps it."""


class CSVLogger(_LightningCSVLogger):
    """Lightning's ``CSVLogger``: the automatic version claimed by creating its folder; runs resumable."""

    _continue_before: int | None = None

    def _get_next_version(self) -> int:
        return _claim_next_version(self.root_dir, super()._get_next_version())

    def continue_run(self, step: int) -> None:
        """Continue this version's ``metrics.csv`` from a checkpoint at global step ``step``.

        Rows logged before ``step`` are kept, later ones (logged after the checkpoint was written)
        dropped. Call before anything is logged.

        Raises:
            RuntimeError: if the logger has already written.
        """
        if self._experiment is not None:
            raise RuntimeError("continue_run must be called before the logger writes")
        self._continue_before = int(step)

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Any = None) -> None:
        """Merge ``params`` into the run's hyper-parameters and write ``hparams.yaml`` (:func:`save_hparams`)."""
        writer = self.experiment
        assert isinstance(writer, ExperimentWriter)
        writer.hparams.update(_convert_params(params))
        save_hparams(Path(writer.log_dir) / writer.NAME_HPARAMS_FILE, writer.hparams)

    @property
    @rank_zero_experiment
    def experiment(self) -> _FabricExperimentWriter:  # noqa: D102
        if self._experiment is not None:
            return self._experiment
        if self._continue_before is None:
            writer: _FabricExperimentWriter = super().experiment
            return writer
        self._fs.makedirs(self.root_dir, exist_ok=True)
        self._experiment = _ContinuedWriter(self.log_dir, self._continue_before)
        return self._experiment


class TensorBoardLogger(_LightningTensorBoardLogger):
    """Lightning's ``TensorBoardLogger``: the automatic version claimed atomically; runs resumable."""

    def _get_next_version(self) -> int:
        return _claim_next_version(self.root_dir, super()._get_next_version())

    def continue_run(self, step: int) -> None:
        """Continue this version's event files from a checkpoint at ``step`` (later events purged).

        Raises:
            RuntimeError: if the logger has already written.
        """
        if self._experiment is not None:
            raise RuntimeError("continue_run must be called before the logger writes")
        kwargs: dict[str, Any] = self._kwargs
        kwargs["purge_step"] = int(step)
