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
        ("crfhead.model", ("crfhead.training", "crfhead.inference", "crfhead.cli")),
        ("crfhead.inference", ("crfhead.training", "crfhead.cli")),
        ("crfhead.data", ("crfhead.inference", "crfhead.model", "crfhead.cli")),
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


ENTRY_POINTS = ("crfhead.cli", "crfhead.__main__")
"""The command line sits on top of everything (``crfhead lab`` starts the lab)."""


@pytest.mark.parametrize("room", ["crfhead.theory", "crfhead.higher_order", "crfhead.lab"])
def test_the_library_never_imports_the_rooms_beside_it(room: str) -> None:
    graph = _graph()
    # The rooms beside the library use it (and the lab shows the other two); it never uses them.
    outside = ("crfhead.theory", "crfhead.higher_order", "crfhead.lab")
    bad = sorted(
        (src, dst)
        for src, dsts in graph.items()
        if not src.startswith((*outside, *ENTRY_POINTS))
        for dst in dsts
        if dst.startswith(room)
    )
    assert not bad, bad


TESTS = PACKAGE.parent / "tests"
SCRIPTS = PACKAGE.parent / "scripts"
BENCH_TESTS = ("tests/scripts/test_bench_",)
"""The benchmark harness's own tests, which may import ``scripts/bench*`` (its ``bench`` package)."""


def _script_modules() -> set[str]:
    """The names a module under ``scripts/`` is imported by (``flair_compare``, ``bench``)."""
    names = {p.stem for p in SCRIPTS.glob("*.py")}
    return names | {p.name for p in SCRIPTS.iterdir() if (p / "__init__.py").is_file()}


_LOADS = ("spec_from_file_location", "import_module", "run_path", "run_module")
"""The calls that load a module from a file or by name (beside ``import``)."""


def _reaches_scripts(tree: ast.AST, scripts: set[str]) -> list[str]:
    """How a module's source reaches ``scripts/``: imports of its modules, ``sys.path`` edits naming
    ``scripts``, and ``importlib``/``runpy`` loads of a script file (running it as a subprocess is
    fine, and is how scripts are tested)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in scripts]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in scripts or node.module.startswith("scripts"):
                found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Call):
            func, text = ast.unparse(node.func), ast.unparse(node)
            edits_path = func.endswith(("sys.path.insert", "sys.path.append"))
            loads = func.split(".")[-1] in _LOADS
            if (edits_path or loads) and "scripts" in text.lower():
                found.append(text)
    return found


def test_the_script_finder_finds_each_way_in() -> None:
    scripts = {"flair_compare", "bench"}
    source = (
        "import flair_compare\nfrom bench.ops import x\nimport sys\n"
        "sys.path.insert(0, str(SCRIPTS))\n"
        "importlib.util.spec_from_file_location('m', ROOT / 'scripts' / 'm.py')\n"
        "runpy.run_path(str(ROOT / 'scripts' / 'm.py'))\n"
        "import crfhead\nsubprocess.run([sys.executable, str(ROOT / 'scripts' / 'm.py')])\n"
    )
    assert len(_reaches_scripts(ast.parse(source), scripts)) == 5


def test_no_script_is_imported_by_the_package_or_the_tests() -> None:
    # Scripts are thin: what a test must import belongs in the package (the benchmark harness's own
    # tests excepted); a script is tested by running it.
    scripts = _script_modules()
    bad = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *TESTS.rglob("*.py")]):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith(BENCH_TESTS) or rel == "tests/test_layout.py":
            continue
        if found := _reaches_scripts(ast.parse(path.read_text(encoding="utf-8")), scripts):
            bad[rel] = found
    assert not bad, bad
