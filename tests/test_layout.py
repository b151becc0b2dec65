"""The package's layout as the README states it: imports point one way, with no cycle anywhere.

Read from the source (``ast``), imports inside functions included; a module's package ``__init__`` is
not counted as a dependency of its submodules (Python runs it first whatever the import says).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "crfhead"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle_in_the_package() -> None:
    graph = _graph()
    # A package's __init__ re-exporting its submodules is not a cycle with them.
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(f"{t}.")}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize(
    ("room", "forbidden"),
    [
        (
            "crfhead.engine",
            ("crfhead.heads", "crfhead.data", "crfhead.training", "crfhead.schemes"),
        ),
        ("crfhead.heads", ("crfhead.data", "crfhead.training", "crfhead.encoders")),
        ("crfhead.encoders", ("crfhead.heads", "crfhead.training")),
        (
            "crfhead.data",
            ("crfhead.heads", "crfhead.training", "crfhead.encoders", "crfhead.engine"),
        ),
        ("crfhead.evaluation", ("crfhead.training",)),
        ("crfhead.model", ("crfhead.training", "crfhead.inference", "crfhead.console")),
        ("crfhead.inference", ("crfhead.training", "crfhead.console")),
    ],
)
def test_imports_point_down(room: str, forbidden: tuple[str, ...]) -> None:
    graph = _graph()
    bad = sorted(
        (src, dst)
        for src, dsts in graph.items()
        if src == room or src.startswith(f"{room}.")
        for dst in dsts
        if any(dst == f or dst.startswith(f"{f}.") for f in forbidden)
    )
    assert not bad, bad


ENTRY_POINTS = ("crfhead.console", "crfhead.__main__")
"""The command line sits on top of everything (``crfhead lab`` starts the lab)."""


@pytest.mark.parametrize("room", ["crfhead.theory", "crfhead.higher_order", "crfhead.lab"])
def test_the_library_never_imports_the_rooms_beside_it(room: str) -> None:
    graph = _graph()
    # The rooms beside the library use it (and the lab shows the other two); it never uses them.
    outside = ("crfhead.theory", "crfhead.higher_order", "crfhead.lab")
    bad = sorted(
        (src, dst)
        for src, dsts in graph.items()
        if not src.startswith(outside) and src not in ENTRY_POINTS
        for dst in dsts
        if dst.startswith(room)
    )
    assert not bad, bad
