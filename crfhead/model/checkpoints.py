"""Reading a checkpoint the user names: one clear line for anything that is not a usable crfhead checkpoint.

``train.py --ckpt_path`` (resume, validate, test, predict) and ``predict.py`` read checkpoints through
:func:`read_checkpoint`, which refuses missing, empty, truncated and foreign files (random bytes, a
plain ``state_dict``, another library's checkpoint) naming the file, and :func:`check_same_model`
refuses a checkpoint of another encoder, head or decoder than the one configured, naming both,
instead of loading it into the wrong model.

A ``.ckpt`` is a pickle, and unpickling can run code. :func:`read_checkpoint` therefore loads with
``torch.load(weights_only=True)``, which rebuilds only tensors and plain containers (a crfhead
checkpoint holds nothing else). A checkpoint that needs more (another library's objects in its
hyper-parameters, say) is refused with one line saying so; it loads only if explicitly trusted:
``trust=True`` from Python or the environment variable ``CRFHEAD_TRUST_CHECKPOINT=1`` (for the
command line). Trust only a checkpoint you wrote yourself.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from crfhead.model.build import DEFAULT_ENCODER, DEFAULT_HEAD

__all__ = ["TRUST_ENV", "check_same_model", "component", "read_checkpoint"]

TRUST_ENV = "CRFHEAD_TRUST_CHECKPOINT"
"""Set to ``1`` to unpickle checkpoints that ``weights_only`` refuses (code may run)."""

COMPONENTS = ("encoder", "head", "decoder")


class _UntrustedError(Exception):
    """A checkpoint ``weights_only`` refuses, not trusted: kept apart from unreadable files."""


def read_checkpoint(path: str | Path, *, trust: bool = False) -> dict[str, Any]:
    """The checkpoint at ``path``, on the CPU, checked to be a crfhead tagger checkpoint.

    Args:
        path: the ``.ckpt`` file.
        trust: unpickle it fully if ``weights_only`` refuses it (runs any code it holds); also
            set by the environment variable :data:`TRUST_ENV` = ``1``.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: an empty, truncated or unreadable file, or not a crfhead checkpoint.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"checkpoint not found: {p}")
    if p.stat().st_size == 0:
        raise ValueError(f"{p}: empty file, not a checkpoint")
    trusted = trust or os.environ.get(TRUST_ENV) == "1"
    try:
        try:
            ckpt = torch.load(p, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as err:
            message = str(err).lower()
            # Only a refused class is a question of trust; bad opcodes are a broken file.
            if "weights only load failed" not in message or "global" not in message:
                raise
            if not trusted:
                first = next(
                    (ln for ln in str(err).splitlines() if "GLOBAL" in ln),
                    "",
                ).strip()[:200]
                raise _UntrustedError(
                    f"{p}: holds objects other than tensors and plain data ({first}); a .ckpt is a "
                    "pickle that can run code when loaded: if you wrote it yourself, load it with "
                    f"trust=True or {TRUST_ENV}=1"
                ) from None
            ckpt = torch.load(p, map_location="cpu", weights_only=False)
    except _UntrustedError as err:
        raise ValueError(str(err)) from None
    except Exception as err:  # torch raises many types for bad files (EOFError, UnpicklingError...)
        reason = f"{type(err).__name__}: {str(err)[:200]}"
        raise ValueError(
            f"{p}: not a readable checkpoint, truncated or not a torch file ({reason})"
        ) from None
    hparams = ckpt.get("hyper_parameters") if isinstance(ckpt, dict) else None
    if (
        not isinstance(ckpt, dict)
        or not isinstance(ckpt.get("state_dict"), Mapping)
        or not isinstance(hparams, Mapping)
        or "vocabs" not in hparams
    ):
        raise ValueError(
            f"{p}: not a crfhead checkpoint (no tagger state_dict and hyper-parameters; "
            "train.py writes them)"
        )
    return ckpt


DEFAULTS: dict[str, dict[str, Any]] = {"encoder": DEFAULT_ENCODER, "head": DEFAULT_HEAD}


def component(hparams: Mapping[str, Any], name: str) -> str | None:
    """The ``class_path`` of component ``name`` (``encoder``, ``head``, ``decoder``) in hyper-parameters.

    An unset encoder or head is the module's default; an unset decoder is ``None``.
    """
    spec = hparams.get(name) or DEFAULTS.get(name)
    if isinstance(spec, Mapping):
        value = spec.get("class_path")
        return None if value is None else str(value)
    return None


def check_same_model(ckpt: Mapping[str, Any], hparams: Mapping[str, Any], path: str | Path) -> None:
    """Refuse a checkpoint whose encoder, head or decoder class differs from the configured one.

    Raises:
        ValueError: naming the component, the checkpoint's class and the configured class.
    """
    saved = ckpt["hyper_parameters"]
    for name in COMPONENTS:
        theirs, ours = component(saved, name), component(hparams, name)
        if theirs != ours:
            raise ValueError(
                f"{path} holds a model with {name} {theirs}, but the configuration builds {name} "
                f"{ours}: use the checkpoint's own config (saved beside it as config.yaml) or "
                "another checkpoint"
            )
