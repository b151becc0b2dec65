"""Where the shared corpora live (CoNLL-2003, MSM2013, WNUT-17): one data root, chosen in this order.

1. ``$CRFHEAD_DATA``, when set: the folder that holds ``conll2003/``, ``msm2013/``, ``wnut17/``.
2. ``<checkout>/../shared/data``, only when crfhead runs from a source checkout (the folder above the
   package has ``pyproject.toml``) and that folder exists: the project's own layout, which the tests use.
3. The user data folder :func:`user_data_dir`: ``$XDG_DATA_HOME/crfhead/data``, by default
   ``~/.local/share/crfhead/data`` (``%LOCALAPPDATA%/crfhead/data`` on Windows).

An installed package never looks inside ``site-packages``: the corpora are licensed separately and
never shipped, so the installed default is a per-user folder the user fills (or points elsewhere with
``CRFHEAD_DATA``). The synthetic finance corpus is generated and needs none of this.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["DATA_ENV", "data_dir", "data_path", "user_data_dir"]

DATA_ENV = "CRFHEAD_DATA"
"""The environment variable that names the data root."""

_CHECKOUT = Path(__file__).resolve().parents[2]


def user_data_dir() -> Path:
    """The per-user data folder: ``$XDG_DATA_HOME/crfhead/data`` (``~/.local/share/crfhead/data``).

    On Windows ``%LOCALAPPDATA%/crfhead/data``. Not created: only named.
    """
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "crfhead" / "data"
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "crfhead" / "data"


def _checkout_data_dir() -> Path | None:
    """``<checkout>/../shared/data`` when running from a source checkout that has it, else ``None``."""
    if not (_CHECKOUT / "pyproject.toml").is_file():
        return None  # installed: the folder above the package is site-packages
    shared = _CHECKOUT.parent / "shared" / "data"
    return shared if shared.is_dir() else None


def data_dir() -> Path:
    """The data root: ``$CRFHEAD_DATA``, else a source checkout's ``../shared/data``, else :func:`user_data_dir`."""
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    return _checkout_data_dir() or user_data_dir()


def data_path(*parts: str) -> Path:
    """A path under :func:`data_dir`.

    Raises:
        FileNotFoundError: if it is missing; the message names the path, the data root and how it was
            chosen, and how to set ``CRFHEAD_DATA``.
    """
    root = data_dir()
    path = root.joinpath(*parts)
    if not path.exists():
        chosen = f"${DATA_ENV}" if os.environ.get(DATA_ENV) else "the default data root"
        raise FileNotFoundError(
            f"{path} does not exist ({chosen} is {root}); put the corpora there or set "
            f"{DATA_ENV} to the folder that holds conll2003/, msm2013/ and wnut17/, e.g. "
            f"export {DATA_ENV}=/path/to/data"
        )
    return path
