"""The op table is the single source of the engine's ops, and the signature table that of the C ABI.

Checks: every op has a portable function and a public engine function of its name; every op a backend
registers (fused, traced, self-checked) names a table op, traced ones only where the table lets a
custom op run while tracing; every fused kernel equals the portable function on chains with holes
and per-edge transitions; the ctypes signature table equals the C++ exports (names, parameter names
and kinds, return types) and the ABI number equals the library's; ``run`` asks whether it is tracing
once per call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import torch
from helpers import random_chain

from crfhead import engine
from crfhead.engine import table
from crfhead.engine.backends import available
from crfhead.engine.potentials import make_potentials

FUSED_BACKENDS = [b for b in ("cpu", "triton") if available(b)[0]]
SOURCE_BACKENDS = ["portable", "cpu", "triton"]


class TestTheTable:
    def test_every_op_has_a_portable_function_and_an_engine_function(self) -> None:
        for name, op in table.OPS.items():
            assert op.name == name
            assert callable(op.portable)
            assert callable(getattr(engine, name))
            assert op.outputs in (1, 2)
            assert op.outputs == 1 or op.grad is table.Grad.FUSED

    @pytest.mark.parametrize("name", SOURCE_BACKENDS)
    def test_every_registration_names_a_table_op(self, name: str) -> None:
        if name == "cpu" and not available("cpu")[0]:
            pytest.skip("no C++ compiler")
        if name == "triton":
            pytest.importorskip("triton")
        where = table.registered(name)
        fused, dispatched, checked = where.fused, where.dispatched(), where.checked
        assert set(fused) <= set(table.OPS), set(fused) - set(table.OPS)
        # A dispatcher op stands in for a kernel: the op table runs it where the kernel would run.
        assert set(dispatched) <= set(fused), set(dispatched) - set(fused)
        assert set(checked) <= set(fused)
        assert all(callable(k) for k in (*fused.values(), *dispatched.values()))
        assert callable(where.scale_grads) and callable(where.glue)

    def test_portable_fuses_nothing(self) -> None:
        assert not table.registered("portable").fused


def _chain(per_position: bool, dtype: torch.dtype = torch.float64) -> engine.ChainPotentials:
    c = random_chain(5, 4, 6, 3, per_position=per_position, dtype=dtype)
    return make_potentials(*c.args())


ARGS = {"nll": lambda pot: (torch.zeros(pot.shape[:2], dtype=torch.long),), "topk": lambda _: (3,)}


@pytest.mark.parametrize("backend", FUSED_BACKENDS)
@pytest.mark.parametrize("per_position", [False, True])
def test_every_fused_kernel_equals_the_portable_function(backend: str, per_position: bool) -> None:
    pot = _chain(per_position)
    for name in table.registered(backend).fused:
        if name == "sample":
            paths = table.run(name, pot, 4, None, backend=backend)
            assert paths.shape == (4, *pot.shape[:2])
            continue
        args = ARGS.get(name, lambda _: ())(pot)
        got = table.run(name, pot, *args, backend=backend)
        want = table.run(name, pot, *args, backend="portable")
        torch.testing.assert_close(got, want, msg=lambda m, n=name: f"{n}: {m}")  # type: ignore[misc]


# ----------------------------------------------------------------------------- the C ABI
def _cpp_exports() -> dict[str, tuple[tuple[str, ...], str]]:
    """``name -> (parameters as the table writes them, return type)`` of the C++ file's exports."""
    from crfhead.engine.backends.cpu import native

    text = native.SOURCE.read_text().replace("\\\n", "\n")
    text = text[text.index('extern "C" {') :]
    kinds = {"void": "void", "int": "int", "int64_t": "i64"}
    found: dict[str, tuple[tuple[str, ...], str]] = {}
    for ret, name, params in re.findall(
        r"\b(void|int|int64_t)\s+crfhead_([\w#]+)\(([^)]*)\)", text
    ):
        table_params = []
        for param in (p.strip() for p in params.split(",") if p.strip()):
            decl, pname = param.rsplit(None, 1)
            kind = "ptr" if "*" in decl else kinds[decl.split()[-1]]
            table_params.append(pname if kind == "ptr" else f"{pname}:{kind}")
        found[name] = (tuple(table_params), kinds[ret])
    return found


def test_the_signature_table_matches_the_cpp_exports() -> None:
    from crfhead.engine.backends.cpu import abi

    exports = _cpp_exports()
    want = {f"{name}_##SUFFIX": sig for name, sig in abi.SIGNATURES.items()}
    want.update(abi.HELPERS)
    assert exports == want


def test_the_abi_number_is_the_libraries() -> None:
    from crfhead.engine.backends.cpu import abi, native

    text = native.SOURCE.read_text()
    assert f"int crfhead_abi_version() {{ return {abi.ABI}; }}" in text
    if available("cpu")[0]:
        assert native.entries()["abi_version"]() == abi.ABI


# ----------------------------------------------------------------------------- tracing asked once
@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    calls: list[int] = []
    real = torch.compiler.is_compiling

    def counting() -> bool:
        calls.append(1)
        return real()

    monkeypatch.setattr(torch.compiler, "is_compiling", counting)
    yield calls


@pytest.mark.parametrize("backend", ["portable", *FUSED_BACKENDS[:1]])
def test_run_asks_whether_it_is_tracing_once_per_call(counted: list[int], backend: str) -> None:
    c = random_chain(0, 3, 5, 4)
    pot = make_potentials(c.emissions.requires_grad_(True), *c.args()[1:])
    tags = torch.zeros(3, 5, dtype=torch.long)
    for name, args in (("nll", (tags,)), ("log_partition", ()), ("viterbi", ()), ("topk", (2,))):
        counted.clear()
        out = table.run(name, pot, *args, backend=backend)
        assert len(counted) == 1, (name, len(counted))
        value = out[0] if isinstance(out, tuple) else out
        counted.clear()
        value.sum().backward()
        assert not counted, (name, "backward", len(counted))
