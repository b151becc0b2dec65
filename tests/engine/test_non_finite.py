"""The non-finite contract: NaN or +inf scores raise NonFiniteError naming the tensor and position; -inf is
"forbidden"; masked emissions are ignored. Checked once in make_potentials, so it holds for every op and
backend: each is exercised here."""

from __future__ import annotations

import pytest
import torch

from crfhead import CRF, engine, make_potentials
from crfhead.checks import NonFiniteError
from crfhead.engine.backends.select import available
from crfhead.heads import MEMM, StructuredPerceptron

BACKENDS = [b for b in ("portable", "cpu") if available(b)[0]]
OPS = {
    "log_partition": lambda pot, be: engine.log_partition(pot, backend=be),
    "marginals": lambda pot, be: engine.marginals(pot, backend=be),
    "viterbi": lambda pot, be: engine.viterbi(pot, backend=be),
    "topk": lambda pot, be: engine.topk(pot, 2),
    "nll": lambda pot, be: engine.nll(
        pot, torch.zeros(pot.mask.shape, dtype=torch.long), backend=be
    ),
}


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    em = torch.randn(2, 4, 3, generator=g)
    tr = torch.randn(3, 3, generator=g)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    return em, tr, torch.zeros(3), torch.zeros(3), mask


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize(
    ("name", "index"),
    [("emissions", (1, 2, 0)), ("transitions", (2, 1)), ("start", (1,)), ("end", (0,))],
)
def test_nan_and_plus_inf_are_refused_naming_tensor_and_position(
    name: str, index: tuple[int, ...], value: float
) -> None:
    em, tr, start, end, mask = _inputs()
    tensors = {"emissions": em, "transitions": tr, "start": start, "end": end}
    tensors[name][index] = value
    shown = "NaN" if value != value else r"\+inf"
    where = ", ".join(map(str, index))
    with pytest.raises(NonFiniteError, match=rf"{name} is {shown} at \({where},?\)"):
        make_potentials(em, tr, start, end, mask)
    with pytest.raises(ValueError):  # NonFiniteError is a ValueError (and a FloatingPointError)
        make_potentials(em, tr, start, end, mask)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", sorted(OPS))
def test_masked_nan_emissions_are_ignored_and_minus_inf_is_forbidden(backend: str, op: str) -> None:
    em, tr, start, end, mask = _inputs()
    clean = OPS[op](make_potentials(em, tr, start, end, mask), backend)
    dirty = em.clone()
    dirty[0, 2:] = float("nan")  # padding
    got = OPS[op](make_potentials(dirty, tr, start, end, mask), backend)
    for a, b in zip(
        torch.utils._pytree.tree_leaves(clean), torch.utils._pytree.tree_leaves(got), strict=True
    ):
        assert torch.equal(a, b)
    forbid = tr.clone()
    forbid[0, 1] = float("-inf")
    out = OPS[op](make_potentials(em, forbid, start, end, mask), backend)
    assert not any(
        torch.isnan(x).any() for x in torch.utils._pytree.tree_leaves(out) if x.is_floating_point()
    )


@pytest.mark.parametrize("head_cls", [CRF, MEMM, StructuredPerceptron])
def test_every_head_refuses_a_nan_emission(head_cls: type) -> None:
    head = head_cls(3)
    em, _, _, _, mask = _inputs()
    em[1, 3, 2] = float("nan")
    tags = torch.zeros(2, 4, dtype=torch.long)
    for call in (lambda: head.loss(em, tags, mask), lambda: head.decode(em, mask)):
        with pytest.raises(NonFiniteError, match=r"emissions is NaN at \(1, 3, 2\)"):
            call()


def test_a_nan_transition_parameter_is_refused_even_when_the_loss_would_look_finite() -> None:
    head = CRF(3)
    with torch.no_grad():
        head.transitions[0, 0] = float("nan")
    em, _, _, _, mask = _inputs()
    with pytest.raises(NonFiniteError, match="transitions is NaN"):
        head.loss(em, torch.ones(2, 4, dtype=torch.long), mask)
