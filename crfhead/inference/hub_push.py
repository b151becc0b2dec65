"""Sharing a model on the Hugging Face Hub: :func:`push_to_hub` (loading is :mod:`~crfhead.inference.hub`).

The model folder is written with :func:`~crfhead.inference.saved.save_folder` into a temporary
folder (from a :class:`~crfhead.inference.TextTagger`, or re-saved from a saved folder after reading
it with every check, so what is uploaded is always exactly what a save writes) and uploaded with
``HfApi.create_repo(exist_ok=True)`` and ``HfApi.upload_folder``; ``api=`` takes any object with
those two methods (the tests use a local, file-based one). The upload replaces the files an
earlier push of a saved folder left (``delete_patterns``), and no others. ``card=`` metadata
(license, language...) goes into the model card's front matter and into ``config.json``, so it
survives a reload and a later push.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crfhead.inference.hub import ALLOW_PATTERNS, valid_repo_id
from crfhead.inference.saved import read_model, save_folder

__all__ = ["push_to_hub"]

_CARD_KEYS = frozenset({"license", "language", "datasets", "tags", "name"})


def push_to_hub(
    tagger_or_folder: Any,
    repo_id: str,
    *,
    private: bool = False,
    commit_message: str = "Upload crfhead model",
    token: str | None = None,
    api: Any = None,
    card: Mapping[str, Any] | None = None,
) -> str:
    """Upload a model to a Hub model repository (created if missing); return the commit's URL.

    Args:
        tagger_or_folder: a :class:`~crfhead.inference.TextTagger`, or what
            :func:`~crfhead.inference.saved.read_model` reads (a saved folder, a checkpoint), read
            with every check and saved again: what is uploaded is always a fresh save.
        repo_id: ``org/name``.
        private: create the repository private (an existing one keeps its visibility).
        commit_message: the commit's message.
        token: a Hub token (default: the Hub's usual one, ``HF_TOKEN`` or ``hf auth login``).
        api: an ``HfApi`` (default ``HfApi(token=token)``), or any object with its
            ``create_repo`` and ``upload_folder``.
        card: model card metadata (kept in ``config.json``): ``license`` (``"mit"``),
            ``language`` (``"en"`` or a list), ``datasets`` and ``tags`` (lists of str), ``name``
            (default ``repo_id``).

    Raises:
        ValueError: ``repo_id`` is not ``org/name``; an unknown ``card`` key; a folder that is
            not a saved crfhead model.
        TypeError: ``tagger_or_folder`` is neither a tagger nor a path.
    """
    if not valid_repo_id(repo_id):
        raise ValueError(f"repo_id must be 'org/name' (letters, digits, -, _, .), got {repo_id!r}")
    meta = {"name": repo_id, **dict(card or {})}
    bad = sorted(set(meta) - _CARD_KEYS)
    if bad:
        raise ValueError(f"unknown card keys {bad}; allowed: {sorted(_CARD_KEYS)}")
    if isinstance(tagger_or_folder, str | Path):
        files = read_model(tagger_or_folder)
        model, config, vocabs, report = files.build(), files.config, files.vocabs, files.report
    elif all(hasattr(tagger_or_folder, a) for a in ("model", "config", "vocabs")):
        t = tagger_or_folder
        model, config, vocabs, report = t.model, t.config, t.vocabs, getattr(t, "report", None)
    else:
        raise TypeError(
            f"push_to_hub takes a TextTagger or a saved folder's path, got "
            f"{type(tagger_or_folder).__name__}"
        )
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
    with tempfile.TemporaryDirectory(prefix="crfhead-push-") as tmp:
        folder = save_folder(Path(tmp) / "model", model, config, vocabs, report, card=meta)
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True, token=token)
        info = api.upload_folder(
            repo_id=repo_id,
            folder_path=str(folder),
            repo_type="model",
            commit_message=commit_message,
            token=token,
            delete_patterns=ALLOW_PATTERNS,  # a stale backbone/ of an earlier push goes
        )
    return str(getattr(info, "commit_url", info))
