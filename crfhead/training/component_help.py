"""``--model.encoder.help CLASS`` (``head``, ``decoder``): a component's config arguments, or the classes on offer.

The model takes its components as plain-data ``{"class_path": ..., "init_args": ...}`` specs
(:data:`crfhead.model.build.Spec`), so LightningCLI has no help of its own for them; this prints what
it would, leaving out the arguments the data fills in (:data:`crfhead.model.build.DATA_OWNED`).
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from crfhead.model.build import DATA_OWNED

__all__ = ["component_help"]

_COMPONENT_PACKAGES = {
    "encoder": "crfhead.encoders",
    "head": "crfhead.heads",
    "decoder": "crfhead.higher_order",
}
_HELP = re.compile(r"--model\.(encoder|head|decoder)\.help(?:=(.*))?")


def _components(key: str) -> dict[str, type]:
    """The concrete classes a package offers for ``model.<key>``, by name."""
    import importlib
    import inspect

    from torch import nn

    from crfhead.heads.base import ChainHead, CountingHead
    from crfhead.model.group_decoder import GroupDecoder

    base = {"encoder": nn.Module, "head": ChainHead, "decoder": GroupDecoder}[key]
    package = importlib.import_module(_COMPONENT_PACKAGES[key])
    found = {}
    for name in getattr(package, "__all__", ()):
        value = getattr(package, name, None)
        if (
            isinstance(value, type)
            and issubclass(value, base)
            and value not in (base, CountingHead)
            and not inspect.isabstract(value)
        ):
            found[name] = value
    return found


def component_help(argv: list[str]) -> str | None:
    """``--model.encoder.help CLASS`` (also ``head``, ``decoder``): the class's config arguments.

    The model takes these components as ``{"class_path": ..., "init_args": ...}`` specs, so
    LightningCLI has no ``--model.encoder.help`` of its own; this prints what it would, leaving out
    the arguments the data fills in. Without a class, the classes on offer.
    """
    for i, arg in enumerate(argv):
        match = _HELP.fullmatch(arg)
        if match is None:
            continue
        key, value = match[1], match[2]
        if value is None and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            value = argv[i + 1]
        offered = _components(key)
        if not value:
            return f"model.{key} classes ({_COMPONENT_PACKAGES[key]}): {', '.join(sorted(offered))}"
        return _class_help(key, value, offered)
    return None


def _class_help(key: str, value: str, offered: dict[str, type]) -> str:
    import importlib

    from jsonargparse import ArgumentParser

    cls: Any = offered.get(value)
    if cls is None and "." in value:
        module, _, name = value.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError):
            cls = None
    if not isinstance(cls, type):
        raise FileNotFoundError(
            f"no model.{key} class {value!r}; on offer: {', '.join(sorted(offered))} "
            "(or a full class path)"
        )
    path = f"{_COMPONENT_PACKAGES[key]}.{value}" if value in offered else value
    parser = ArgumentParser(prog="train.py", usage=argparse.SUPPRESS, add_help=False)
    parser.add_class_arguments(
        cls, f"model.{key}.init_args", skip=set(DATA_OWNED), fail_untyped=False
    )
    owned = sorted(p for p in _parameters(cls) if p in DATA_OWNED)
    text = f"--model.{key}.class_path={path}\n\n{parser.format_help().strip()}\n"
    if owned:
        text += f"\nset from the data (never in a config): {', '.join(owned)}\n"
    return text


def _parameters(cls: type) -> list[str]:
    import inspect

    return list(inspect.signature(cls).parameters)
