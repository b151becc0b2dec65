"""Models on the Hugging Face Hub, loading: :func:`resolve_model_path` of ``org/name[@revision]``.

``crfhead.load("org/name")`` (or ``"org/name@revision"``) loads a model repository when no local
path of that name exists: :func:`resolve_model_path` downloads (or finds in the cache) the files a
saved folder holds (:mod:`crfhead.inference.saved`) with ``huggingface_hub.snapshot_download``, and
the folder is then read with every check a local folder gets (formats, checksum, strict class
paths): a repository's files are data, never code.

Decisions:

* a name is a repository id only where it cannot be a local path: exactly one ``/`` (before any
  ``@revision``), two segments of letters, digits, ``-``, ``_`` and ``.`` (the Hub's rule), no
  ``./``, ``../``, ``~`` or backslash, no file extension a model file has (``.ckpt``, ``.json``...),
  and no local folder named like its first segment (``runs/model`` with a ``runs/`` folder here is
  a mistyped path). Anything else that does not exist keeps the local ``FileNotFoundError``;
* offline (``HF_HUB_OFFLINE=1``, read when loading, not when ``huggingface_hub`` was imported) reads
  only the cache (``local_files_only``); the cache is ``cache_dir``, else ``$HF_HUB_CACHE``, else
  ``$HF_HOME/hub``, else the Hub's default, also read when loading, as is ``HF_ENDPOINT`` (a
  mirror, or the tests' local server);
* only the files a save writes are downloaded (``allow_patterns``), so a repository's other files
  (a pickle, a script) are never fetched;
* the token is the Hub's usual one (``HF_TOKEN`` or ``hf auth login``); pushing takes ``token=``.

Pushing is :func:`crfhead.inference.hub_push.push_to_hub` (it saves with :mod:`~crfhead.inference.saved`,
which reads Hub ids through this module: two files keep the imports pointing one way).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["ALLOW_PATTERNS", "parse_repo_id", "resolve_model_path", "valid_repo_id"]

ALLOW_PATTERNS = ["config.json", "vocabs.json", "model.safetensors", "README.md", "backbone/*"]
"""The files of a saved folder (:mod:`crfhead.inference.saved`, which imports this module): the
only ones downloaded from a repository."""

_SEGMENT = re.compile(r"[A-Za-z0-9](?:[\w.-]{0,94}[A-Za-z0-9_])?")
_FILE_SUFFIXES = frozenset(
    {".ckpt", ".pt", ".pth", ".bin", ".safetensors", ".json", ".yaml", ".yml", ".txt", ".onnx"}
    | {".zip", ".tar", ".gz", ".tgz", ".md"}
)
_TRUE = frozenset({"1", "on", "yes", "true"})


def _valid_segment(part: str) -> bool:
    """The Hub's rule for an owner or a name (``--`` and ``..`` are refused there too)."""
    return bool(_SEGMENT.fullmatch(part)) and "--" not in part and ".." not in part


def valid_repo_id(repo_id: str) -> bool:
    """Whether ``repo_id`` is ``owner/name`` by the Hub's rules (no revision, no local check)."""
    parts = repo_id.split("/")
    return len(parts) == 2 and all(_valid_segment(p) for p in parts)


def parse_repo_id(path: str) -> tuple[str, str | None] | None:
    """``(repo_id, revision)`` if ``path`` reads as a Hub model id (``org/name[@revision]``), else None.

    See the module docstring for what counts as a local path instead.
    """
    if "\\" in path or path.startswith(("/", "./", "../", "~")):
        return None
    name, at, revision = path.partition("@")
    if at and not revision:
        return None
    parts = name.split("/")
    if len(parts) != 2 or not all(_valid_segment(p) for p in parts):
        return None
    if Path(parts[1]).suffix.lower() in _FILE_SUFFIXES or Path(parts[0]).is_dir():
        return None
    return name, revision or None


def _offline() -> bool:
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE")
    return bool(constants.HF_HUB_OFFLINE) if env is None else env.strip().lower() in _TRUE


def _cache(cache_dir: str | Path | None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0][:200] if lines else type(err).__name__


def resolve_model_path(
    path: str | Path, *, revision: str | None = None, cache_dir: str | Path | None = None
) -> Path:
    """The local path of ``path``: itself if it exists or is not a Hub id, else the Hub snapshot.

    Args:
        path: a local checkpoint or folder, or a Hub model id ``org/name`` (``org/name@revision``).
        revision: a branch, tag or commit of the repository (default ``main``); must agree with an
            ``@revision`` in ``path``.
        cache_dir: the Hugging Face cache folder (see the module docstring for the default).

    Returns:
        ``path`` unchanged when it exists locally or cannot be a Hub id (the caller's
        ``FileNotFoundError`` then names it); else the snapshot folder in the cache.

    Raises:
        FileNotFoundError: no such repository or revision on the Hub, or offline (or the Hub
            unreachable) and the repository is not in the cache; one line saying how to fix it.
        ValueError: ``revision`` disagrees with ``path``'s ``@revision``.
        OSError: another error from the Hub (named).
    """
    local = Path(path)
    parsed = None if local.exists() else parse_repo_id(str(path))
    if parsed is None:
        return local
    repo_id, at = parsed
    if at is not None and revision is not None and at != revision:
        raise ValueError(f"{path!r} names revision {at!r} but revision={revision!r} was given")
    revision = revision or at
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    offline, cache = _offline(), _cache(cache_dir)
    what = f"no model at {str(path)!r}: not a local path, and Hub model {repo_id}"
    rev = f" (revision {revision})" if revision else ""
    try:
        folder = snapshot_download(
            repo_id,
            repo_type="model",
            revision=revision,
            cache_dir=str(cache),
            local_files_only=offline,
            allow_patterns=ALLOW_PATTERNS,
            library_name="crfhead",
            endpoint=os.environ.get("HF_ENDPOINT") or None,
        )
    except GatedRepoError:
        raise FileNotFoundError(
            f"{what} is gated: accept its conditions on the Hub, then log in "
            "(`hf auth login`) or set HF_TOKEN"
        ) from None
    except RevisionNotFoundError:
        raise FileNotFoundError(
            f"{what} has no revision {revision!r}: give an existing branch, tag or commit"
        ) from None
    except RepositoryNotFoundError:
        raise FileNotFoundError(
            f"{what} does not exist or is private (a private one needs a token: "
            "`hf auth login` or HF_TOKEN)"
        ) from None
    except LocalEntryNotFoundError as err:
        if offline:
            raise FileNotFoundError(
                f"{what}{rev} is not in the Hugging Face cache {cache} and HF_HUB_OFFLINE is set: "
                "download it once online (unset HF_HUB_OFFLINE), or pass cache_dir= / set "
                "HF_HUB_CACHE to the cache that holds it"
            ) from None
        raise FileNotFoundError(
            f"{what}{rev} is not in the Hugging Face cache {cache} and the Hub cannot be reached "
            f"({_first_line(err)}): check the connection or HF_ENDPOINT"
        ) from None
    except HfHubHTTPError as err:
        raise OSError(f"{repo_id}: the Hugging Face Hub answered: {_first_line(err)}") from None
    return Path(str(folder))
