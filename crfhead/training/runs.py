"""Run names and folders: a run is named after its config and chosen components; a resumed fit keeps its folder.

A run without a logger name is named after its config file (``configs/finance/indicator_crf.yaml``
→ ``runs/finance_indicator_crf``) and after the encoder or head chosen on top of it, when they differ
from what the config files state (``--model.head.class_path=crfhead.heads.MEMM`` →
``runs/finance_indicator_crf-MEMM``), so a swapped component never logs under the old name. A run
resumed from a checkpoint continues the checkpoint's own ``version_<n>`` folder.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from crfhead.model.build import DEFAULT_ENCODER, DEFAULT_HEAD
from crfhead.training.configs import BASE_CONFIG

__all__ = ["run_name", "version_folder"]


def _class_name(spec: Any, default: dict[str, Any]) -> str:
    """The class name (last dotted part) of a ``{"class_path": ...}`` spec, or of the default."""
    path = None
    if spec is not None and hasattr(spec, "get"):
        path = spec.get("class_path")
    return str(path or default["class_path"]).rpartition(".")[2]


def _config_files(config: Any) -> list[Path]:
    return [Path(str(c)) for c in config.get("config") or () if str(c) != str(BASE_CONFIG)]


def _stated(files: list[Path], key: str) -> Any:
    """The ``model.<key>`` spec the config files state (the last one that states it), if any."""
    import yaml

    stated = None
    for path in files:
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            continue
        model = data.get("model") if isinstance(data, dict) else None
        if isinstance(model, dict) and isinstance(model.get(key), dict):
            stated = model[key]
    return stated


def run_name(config: Any) -> str | None:
    """``<folder>_<stem>`` of the last config file, plus the chosen encoder's and head's class names.

    A class name is added when it differs from what the config files state (or the default when
    they state none): ``--model.head.class_path=crfhead.heads.MEMM`` → ``finance_indicator_crf-MEMM``.
    """
    files = _config_files(config)
    if not files:
        return None
    name = f"{files[-1].parent.name}_{files[-1].stem}"
    model = config.get("model") or {}
    for key, default in (("encoder", DEFAULT_ENCODER), ("head", DEFAULT_HEAD)):
        chosen = _class_name(model.get(key), default)
        if chosen != _class_name(_stated(files, key), default):
            name += f"-{chosen}"
    return name


def version_folder(ckpt_path: str) -> Path | None:
    """The ``.../<name>/version_<n>`` folder a checkpoint was written in (its own or its parent)."""
    path = Path(ckpt_path)
    for folder in (path.parent, path.parent.parent):
        if re.fullmatch(r"version_\d+", folder.name):
            return folder
    return None
