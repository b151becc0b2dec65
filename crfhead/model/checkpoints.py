"""Reading a checkpoint the user names: one clear line for anything that is not a usable crfhead checkpoint.

``train.py --ckpt_path`` (resume, validate, test, predict) and ``predict.py`` read checkpoints through
:func:`read_checkpoint`, which refuses missing, empty, truncated and foreign files (random bytes, a
plain ``state_dict``, another library's checkpoint) naming the file, and :func:`check_same_model`
refuses a checkpoint of another encoder, head or decoder than the one configured, naming both,
instead of loading it into the wrong model.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from crfhead.model.build import DEFAULT_ENCODER, DEFAULT_HEAD

__all__ = ["check_same_model", "component", "read_checkpoint"]

COMPONENTS = ("encoder", "head", "decoder")


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint at ``path``, on the CPU, checked to be a crfhead tagger checkpoint.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: an empty, truncated or unreadable file, or not a crfhead checkpoint.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"checkpoint not found: {p}")
    if p.stat().st_size == 0:
        raise ValueError(f"{p}: empty file, not a checkpoint")
    try:
        ckpt = torch.load(p, map_location="cpu", weights_only=False)
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
