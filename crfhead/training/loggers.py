"""The CSV logger ``train.py`` uses: Lightning's, with a version folder claimed atomically.

Lightning's ``CSVLogger`` picks ``version_<n>`` by listing the folder, so two runs started together
in one folder can pick the same version and write into each other's logs and checkpoints. Here the
version is claimed by creating its folder (``mkdir`` fails if another run got there first, and the
next number is tried).
"""

from __future__ import annotations

from pathlib import Path

from pytorch_lightning.loggers import CSVLogger as _LightningCSVLogger

__all__ = ["CSVLogger"]


class CSVLogger(_LightningCSVLogger):
    """Lightning's ``CSVLogger`` whose automatic version is claimed by creating its folder."""

    def _get_next_version(self) -> int:
        root = Path(self.root_dir)
        root.mkdir(parents=True, exist_ok=True)
        version = super()._get_next_version()
        while True:
            try:
                (root / f"version_{version}").mkdir()
            except FileExistsError:
                version += 1
                continue
            return version
