"""The non-finite contract in traced graphs: a compiled or exported loss, decoder or marginals raises the
eager NonFiniteError (same message) when it is run on NaN or +inf scores, on the cpu and portable backends.

Tracing cannot run the eager check (a data-dependent raise), so the check is the custom op
``crfhead::refuse_non_finite``, which runs at every call of the graph. Shapes are tiny: the tests time
the tracing, not the chain.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import Tensor

from crfhead import engine, make_potentials
from crfhead.checks import NonFiniteError
from crfhead.engine.backends.select import available

BACKENDS = [b for b in ("portable", "cpu") if available(b)[0]]
TAGS = torch.zeros(2, 3, dtype=torch.long)
MASK = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.bool)


def _ops(backend: str) -> dict[str, Callable[[Tensor, Tensor], Tensor]]:
    def loss(em: Tensor, tr: Tensor) -> Tensor:
        return engine.nll(make_potentials(em, tr, mask=MASK), TAGS, backend=backend)[0]

    def decode(em: Tensor, tr: Tensor) -> Tensor:
        return engine.viterbi(make_potentials(em, tr, mask=MASK), backend=backend)[1]

    def marginals(em: Tensor, tr: Tensor) -> Tensor:
        return engine.marginals(make_potentials(em, tr, mask=MASK), backend=backend)

    return {"loss": loss, "decode": decode, "marginals": marginals}


def _inputs() -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 3, 3, generator=g), torch.randn(3, 3, generator=g)


def _eager_message(fn: Callable[[Tensor, Tensor], Tensor], em: Tensor, tr: Tensor) -> str:
    with pytest.raises(NonFiniteError) as info:
        fn(em, tr)
    return str(info.value)


class _Module(torch.nn.Module):
    def __init__(self, fn: Callable[[Tensor, Tensor], Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, em: Tensor, tr: Tensor) -> Tensor:
        return self.fn(em, tr)


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["loss", "decode", "marginals"])
def test_a_compiled_op_raises_the_eager_error_on_nan(backend: str, op: str) -> None:
    fn = _ops(backend)[op]
    em, tr = _inputs()
    compiled = torch.compile(fn, backend="eager")
    torch.testing.assert_close(compiled(em, tr), fn(em, tr))
    bad = em.clone()
    bad[1, 2, 0] = float("nan")
    message = _eager_message(fn, bad, tr)
    with pytest.raises(NonFiniteError) as info:
        compiled(bad, tr)
    assert str(info.value) == message
    padded = em.clone()
    padded[0, 2] = float("nan")  # a masked position: ignored, as in eager mode
    torch.testing.assert_close(compiled(padded, tr), fn(padded, tr))


def test_a_compiled_differentiable_loss_raises_on_plus_inf_transitions() -> None:
    fn = _ops(BACKENDS[-1])["loss"]  # the fused custom op with its autograd where there is one
    em, tr = _inputs()
    tr.requires_grad_(True)
    compiled = torch.compile(fn, backend="aot_eager")
    compiled(em, tr).sum().backward()
    bad = tr.detach().clone()
    bad[0, 1] = float("inf")
    bad.requires_grad_(True)
    message = _eager_message(fn, em, bad)
    with pytest.raises(NonFiniteError) as info:
        compiled(em, bad)
    assert str(info.value) == message


def test_an_inductor_compiled_loss_raises_on_nan() -> None:
    fn = _ops(BACKENDS[-1])["loss"]
    em, tr = _inputs()
    compiled = torch.compile(fn, backend="inductor")
    compiled(em, tr)
    em[1, 0, 2] = float("nan")
    with pytest.raises(NonFiniteError, match=r"emissions is NaN at \(1, 0, 2\)"):
        compiled(em, tr)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["loss", "decode", "marginals"])
def test_an_exported_program_raises_the_eager_error_on_nan(backend: str, op: str) -> None:
    fn = _ops(backend)[op]
    em, tr = _inputs()
    program = torch.export.export(_Module(fn), (em, tr)).module()
    torch.testing.assert_close(program(em, tr), fn(em, tr))
    bad = em.clone()
    bad[0, 1, 1] = float("nan")
    message = _eager_message(fn, bad, tr)
    with pytest.raises(NonFiniteError) as info:
        program(bad, tr)
    assert str(info.value) == message
