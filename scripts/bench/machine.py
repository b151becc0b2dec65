"""The machine the benchmark runs on: its description, and the CPU time other processes use.

With few cores, OpenMP threads competing with another busy process inflate small-op times by
10-40x, so the benchmark measures that competition rather than assume an idle machine: the busy
time of the whole machine in ``/proc/stat`` minus this process's own CPU time.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import time
from dataclasses import dataclass

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_revision() -> str:
    """The crfhead checkout's commit, with ``+dirty`` if ``crfhead/`` has uncommitted changes."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", REPO_ROOT, *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        rev = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", "crfhead")
    except (OSError, subprocess.CalledProcessError):
        return "git n/a"
    return f"git {rev}{'+dirty' if dirty else ''}"


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def load_average() -> float | None:
    """The 1-minute load average, or ``None`` where the OS has none."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def busy_cpu_seconds() -> float | None:
    """CPU seconds all processes have spent busy since boot (Linux ``/proc/stat``), or ``None``."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuClock:
    """A starting point for the CPU time other processes use: machine busy, own CPU, wall time."""

    busy: float | None
    own: float
    wall: float

    @classmethod
    def start(cls) -> CpuClock:
        return cls(busy_cpu_seconds(), time.process_time(), time.perf_counter())

    def others_cpu_s(self) -> float | None:
        """CPU seconds other processes used since the start, or ``None`` without ``/proc/stat``."""
        busy = busy_cpu_seconds()
        if busy is None or self.busy is None:
            return None
        return max(0.0, (busy - self.busy) - (time.process_time() - self.own))

    def others_cores(self) -> float | None:
        """Mean number of cores other processes kept busy since the start."""
        others = self.others_cpu_s()
        wall = time.perf_counter() - self.wall
        return None if others is None else others / max(wall, 1e-9)
