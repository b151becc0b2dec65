"""Where the shared corpora live: ``$CRFHEAD_DATA``, defaulting to ``../shared/data`` from the project."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["data_dir", "data_path"]

_PROJECT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """The data root: ``$CRFHEAD_DATA`` if set, else ``<project>/../shared/data``."""
    env = os.environ.get("CRFHEAD_DATA")
    return Path(env).expanduser() if env else (_PROJECT.parent / "shared" / "data")


def data_path(*parts: str) -> Path:
    """A path under :func:`data_dir`; raises ``FileNotFoundError`` naming the path if it is missing."""
    path = data_dir().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(
            f"{path} does not exist (data root {data_dir()}; set CRFHEAD_DATA to the folder that "
            "holds msm2013/, wnut17/ and conll2003/)"
        )
    return path
