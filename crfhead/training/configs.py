"""The configs shipped inside the package, named from anywhere: ``--config crfhead:finance/indicator_crf.yaml``.

Every run reads ``base.yaml`` (the trainer settings every config shares; ``configs/`` in a checkout
links to the folder) before the ``--config`` files, which state only what differs.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "BASE_CONFIG",
    "CONFIG_PREFIX",
    "PACKAGED_CONFIGS",
    "packaged_config",
    "packaged_configs",
    "resolve_configs",
]

PACKAGED_CONFIGS = Path(__file__).resolve().parents[1] / "configs"
"""The configs shipped inside the package (``crfhead/configs``)."""
BASE_CONFIG = PACKAGED_CONFIGS / "base.yaml"
"""The trainer settings every config shares (read before the ``--config`` files)."""
CONFIG_PREFIX = "crfhead:"
"""``--config crfhead:NAME`` names a packaged config: ``crfhead:finance/indicator_crf.yaml``."""


def packaged_configs() -> list[str]:
    """The packaged configs by name (``finance/indicator_crf.yaml``, ...), ``base.yaml`` left out."""
    return sorted(
        path.relative_to(PACKAGED_CONFIGS).as_posix()
        for path in PACKAGED_CONFIGS.rglob("*.yaml")
        if path != BASE_CONFIG
    )


def packaged_config(name: str) -> Path:
    """The path of a packaged config: ``finance/indicator_crf.yaml`` (``.yaml`` may be left out).

    Raises:
        FileNotFoundError: naming the config and listing the packaged ones.
    """
    name = name.removeprefix(CONFIG_PREFIX)
    path = PACKAGED_CONFIGS / name
    if path.suffix != ".yaml":
        path = path.with_name(path.name + ".yaml")
    if not path.resolve().is_relative_to(PACKAGED_CONFIGS) or not path.is_file():
        raise FileNotFoundError(
            f"no packaged config {CONFIG_PREFIX}{name}; packaged: {', '.join(packaged_configs())}"
        )
    return path


def resolve_configs(argv: list[str]) -> list[str]:
    """``--config crfhead:NAME`` (or ``--config=crfhead:NAME``) → the packaged file's path."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg.startswith(f"--config={CONFIG_PREFIX}"):
            arg = f"--config={packaged_config(arg.split('=', 1)[1])}"
        elif arg.startswith(CONFIG_PREFIX) and i > 0 and argv[i - 1] == "--config":
            arg = str(packaged_config(arg))
        out.append(arg)
    return out
