"""The cached native kernel is validated before loading: a truncated or corrupt library is rebuilt, never loaded.

Every kind of damage is detected in-process (the check that runs before loading); the rebuild itself
runs in fresh interpreters (the library is loaded once per process) with their own ``CRFHEAD_CACHE``,
for a truncated library in the default suite and for every kind of damage under ``--full`` (each is a
compile of about 12 s). Loading a truncated shared library would kill the process with SIGBUS.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(
        shutil.which(os.environ.get("CXX") or "c++") is None, reason="no C++ compiler"
    ),
    pytest.mark.thread_invariant,  # files and builds
]

PROBE = (
    "import logging, sys; logging.basicConfig(level=logging.WARNING, stream=sys.stdout)\n"
    "import torch; torch.manual_seed(0); from crfhead.engine.backends import cpu\n"
    "ok, why = cpu.status(); assert ok, why\n"
    "from crfhead import engine, make_potentials\n"
    "pot = make_potentials(torch.randn(2, 5, 3), torch.randn(3, 3))\n"
    "print('logZ', engine.log_partition(pot, backend='cpu').sum().item())\n"
)


def _probe(cache: Path) -> subprocess.CompletedProcess[str]:
    # The kernel's cache alone: the eager ops (another library, built beside it) stay off.
    env = {
        **os.environ,
        "CRFHEAD_CACHE": str(cache),
        "CRFHEAD_CPU_OPENMP": "0",
        "CRFHEAD_EAGER_OPS": "0",
    }
    return subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A cache holding a freshly built library, and the probe's output with it."""
    cache = tmp_path_factory.mktemp("cache")
    first = _probe(cache)
    assert first.returncode == 0, first.stderr[-2000:]
    return cache, first.stdout


def _damaged_copy(built: tuple[Path, str], folder: Path, damage: str) -> tuple[Path, bytes]:
    """A copy of the built cache in ``folder`` with its library damaged; ``(library, its old bytes)``."""
    shutil.copytree(built[0], folder, dirs_exist_ok=True)
    (lib,) = folder.glob("chain_cpu_*.so")
    record = lib.with_name(lib.name + ".sha256")
    assert record.is_file()
    data = lib.read_bytes()
    if damage == "truncate":
        lib.write_bytes(data[: len(data) // 3])
    elif damage == "flip":
        middle = len(data) // 2
        lib.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    else:
        record.unlink()
    return lib, data


DAMAGES = ["truncate", "flip", "no_record"]


def test_a_healthy_cached_library_passes_the_check(built: tuple[Path, str]) -> None:
    from crfhead.engine.backends.cpu import native

    (lib,) = built[0].glob("chain_cpu_*.so")
    assert native.cached(lib)


@pytest.mark.parametrize("damage", DAMAGES)
def test_every_damage_is_detected_before_loading(
    tmp_path: Path, built: tuple[Path, str], damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    from crfhead.engine.backends.cpu import native

    lib, _ = _damaged_copy(built, tmp_path, damage)
    with caplog.at_level(logging.WARNING, logger=native.__name__):
        assert not native.cached(lib)
    assert (
        f"{lib} does not match {lib.name}.sha256 (truncated or corrupt); rebuilding" in caplog.text
    )


@pytest.mark.parametrize(
    "damage", [d if d == "truncate" else pytest.param(d, marks=pytest.mark.slow) for d in DAMAGES]
)
def test_a_damaged_cached_library_is_rebuilt_with_a_warning(
    tmp_path: Path, built: tuple[Path, str], damage: str
) -> None:
    first_out = built[1]
    lib, data = _damaged_copy(built, tmp_path, damage)
    record = lib.with_name(lib.name + ".sha256")
    again = _probe(tmp_path)
    assert again.returncode == 0, f"exit {again.returncode}: {again.stderr[-2000:]}"
    assert "rebuilding" in again.stdout
    assert again.stdout.split("logZ")[-1] == first_out.split("logZ")[-1]
    assert lib.read_bytes() != data[: len(data) // 3] and record.is_file()
    # Healthy again: the third run loads it without a warning.
    third = _probe(tmp_path)
    assert third.returncode == 0 and "rebuilding" not in third.stdout
