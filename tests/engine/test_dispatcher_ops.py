"""The cpu backend's dispatcher ops (``csrc/chain_ops.cpp``) in eager calls: the ctypes path's results, bit for bit.

The ops run the same kernel entry points, so every value, gold score, gradient, Viterbi score and
path must equal the ctypes path's exactly (as ``CRFHEAD_EAGER_OPS=0`` selects it), on chains with holes, empty
rows, per-edge transitions, ``-inf`` constraints, extreme scores and mixed dtypes. Gradcheck and
double backward of the C++ rule are in ``test_autograd.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from crfhead import CRF, engine
from crfhead.engine.backends.select import available
from crfhead.engine.potentials import ChainPotentials
from tests.helpers import constrained_chain, random_chain

pytestmark = pytest.mark.skipif(not available("cpu")[0], reason="no C++ compiler here")


def _dispatcher() -> object:
    from crfhead.engine.backends.cpu import dispatcher

    return dispatcher


def test_the_eager_ops_build_and_load_wherever_the_kernel_does() -> None:
    ok, why = _dispatcher().status()  # type: ignore[attr-defined]
    assert ok, why


def _run(pot: ChainPotentials, tags: torch.Tensor, weights: torch.Tensor) -> dict[str, object]:
    """Every result the eager ops give, with the gradients of a weighted sum of the losses."""
    leaves = tuple(x.detach().clone().requires_grad_(True) for x in pot.chain[:4])
    chain = ChainPotentials(*leaves, pot.mask)
    loss, gold = engine.nll(chain, tags)
    grads = torch.autograd.grad((loss * weights).sum(), leaves, retain_graph=True)
    # A reduced loss's gradient arrives expanded (stride 0), a path of its own in the C++ rule.
    sum_grads = torch.autograd.grad(loss.sum(), leaves, retain_graph=True)
    mean_grads = torch.autograd.grad(loss.mean(), leaves)
    logz = engine.log_partition(chain)
    logz_grads = torch.autograd.grad((logz * weights).sum(), leaves)
    with torch.no_grad():
        scores, paths = engine.viterbi(chain)
        marginals = engine.marginals(chain)
    return {
        "loss": loss.detach(),
        "gold": gold,
        "grads": grads,
        "sum_grads": sum_grads,
        "mean_grads": mean_grads,
        "logz": logz.detach(),
        "logz_grads": logz_grads,
        "scores": scores,
        "paths": paths,
        "marginals": marginals,
        "node": loss.grad_fn.name(),  # type: ignore[union-attr]
    }


def _same(a: object, b: object) -> None:
    if isinstance(a, tuple):
        assert isinstance(b, tuple)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        assert a.dtype == b.dtype and a.shape == b.shape
        nan = a.isnan()
        assert torch.equal(nan, b.isnan()), (a, b)
        assert torch.equal(a.masked_fill(nan, 0), b.masked_fill(nan, 0)), (a, b)


@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", ["holes", "constrained", "extreme", "empty rows", "length 1"])
def test_eager_ops_equal_the_ctypes_path_bit_for_bit(
    case: str, dtype: torch.dtype, per_position: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    B, T, K = 11, 7, 5
    if case == "constrained":
        c = constrained_chain(3, B, T, K, per_position)
    else:
        c = random_chain(3, B, T if case != "length 1" else 1, K, per_position, dtype=torch.float64)
        if case == "extreme":
            c.emissions = c.emissions * 3000.0
        if case == "empty rows":
            c.mask[2] = False
            c.mask[B - 1] = False
    scores = (c.emissions, c.transitions, c.start, c.end)
    pot = ChainPotentials(*(x.to(dtype) for x in scores), c.mask)
    g = torch.Generator().manual_seed(5)
    T = pot.shape[1]
    tags = torch.randint(0, K, (B, T), generator=g)
    if case == "constrained":  # a gold path the constraints allow: the best one
        tags = torch.where(c.mask, engine.viterbi(pot)[1].clamp(min=0), 0)
    weights = torch.rand(B, generator=g, dtype=dtype)
    dispatcher = _dispatcher()
    monkeypatch.setattr(dispatcher, "_enabled", True)
    fast = _run(pot, tags, weights)
    monkeypatch.setattr(dispatcher, "_enabled", False)  # as CRFHEAD_EAGER_OPS=0 does
    slow = _run(pot, tags, weights)
    assert "crfhead::FusedChain" in str(fast["node"])
    assert slow["node"] == "ChainFunctionBackward"
    for key in (
        "loss",
        "gold",
        "grads",
        "sum_grads",
        "mean_grads",
        "logz",
        "logz_grads",
        "scores",
        "paths",
        "marginals",
    ):
        _same(fast[key], slow[key])


def test_eager_loss_takes_each_input_in_its_own_dtype() -> None:
    """float64 emissions with float32 scores: computed in float64, each gradient in its input's dtype."""
    c = random_chain(0, 4, 6, 3)
    em = c.emissions.clone().requires_grad_(True)
    tr, st, en = (x.float().requires_grad_(True) for x in (c.transitions, c.start, c.end))
    loss, _ = engine.nll(
        ChainPotentials(em, tr, st, en, c.mask), torch.zeros(4, 6, dtype=torch.long)
    )
    assert loss.dtype == torch.float64
    loss.sum().backward()
    assert em.grad is not None and em.grad.dtype == torch.float64
    for x in (tr, st, en):
        assert x.grad is not None and x.grad.dtype == torch.float32
    want = engine.nll(
        ChainPotentials(c.emissions, tr.double(), st.double(), en.double(), c.mask),
        torch.zeros(4, 6, dtype=torch.long),
        backend="portable",
    )[0]
    assert torch.allclose(loss.detach(), want.detach(), atol=1e-5)


def test_eager_loss_refuses_an_out_of_range_tag_naming_it() -> None:
    c = random_chain(0, 2, 4, 3, holes=False)
    tags = torch.zeros(2, 4, dtype=torch.long)
    tags[1, 2] = 3
    em = c.emissions.requires_grad_(True)
    with pytest.raises(ValueError, match=r"tag 3 at unmasked position \(batch 1, time 2\)"):
        engine.nll(ChainPotentials(em, c.transitions, c.start, c.end, c.mask), tags)


def test_the_crf_layer_trains_through_the_cpp_rule() -> None:
    """The wiring: a CRF loss on CPU is the eager op's node (a silent fallback would fail here)."""
    crf = CRF(5)
    em = torch.randn(3, 4, 5, requires_grad=True)
    loss = crf.nll(em, torch.zeros(3, 4, dtype=torch.long), reduction="none")
    assert "crfhead::FusedChain" in loss.grad_fn.name()  # type: ignore[union-attr]


def test_a_failed_build_falls_back_to_the_ctypes_path(monkeypatch: pytest.MonkeyPatch) -> None:
    dispatcher = _dispatcher()
    monkeypatch.setattr(dispatcher, "_ops", None)
    monkeypatch.setattr(dispatcher, "_error", None)

    def fail(*_: object, **__: object) -> None:
        raise RuntimeError("compiling chain_ops.cpp failed: error: no torch headers")

    monkeypatch.setattr(dispatcher.native, "build_library", fail)  # type: ignore[attr-defined]
    assert dispatcher.registered() == {}  # type: ignore[attr-defined]
    assert dispatcher.status() == (False, "compiling chain_ops.cpp failed: error: no torch headers")  # type: ignore[attr-defined]
    c = random_chain(1, 3, 5, 4)
    em = c.emissions.requires_grad_(True)
    loss, _ = engine.nll(ChainPotentials(em, c.transitions, c.start, c.end, c.mask), c.mask.long())
    assert loss.grad_fn is not None and loss.grad_fn.name() == "ChainFunctionBackward"
    want = engine.nll(
        ChainPotentials(c.emissions, c.transitions, c.start, c.end, c.mask),
        c.mask.long(),
        backend="portable",
    )[0]
    assert torch.allclose(loss.detach(), want.detach())


@pytest.mark.parametrize("per_position", [False, True])
def test_a_summed_loss_gives_its_saved_parts_and_keeps_them_for_a_second_backward(
    per_position: bool,
) -> None:
    """A gradient of ones returns the saved emission (and per-edge) parts as the gradients: a second
    backward through the retained graph, and gradients accumulated on top, stay exact."""
    c = random_chain(2, 5, 6, 4, per_position)
    leaves = tuple(
        x.clone().requires_grad_(True) for x in (c.emissions, c.transitions, c.start, c.end)
    )
    tags = torch.where(c.mask, c.mask.long(), 0)
    loss, _ = engine.nll(ChainPotentials(*leaves, c.mask), tags)
    loss.sum().backward(retain_graph=True)
    first = [x.grad.clone() for x in leaves]  # type: ignore[union-attr]
    for x in leaves:
        x.grad.mul_(10.0)  # type: ignore[union-attr]  # an optimizer step would change them in place
    loss.sum().backward()
    for x, g in zip(leaves, first, strict=True):
        assert torch.allclose(x.grad, 11.0 * g)  # type: ignore[arg-type]
    want = torch.autograd.grad(
        engine.nll(ChainPotentials(*leaves, c.mask), tags, backend="portable")[0].sum(), leaves
    )
    for g, w in zip(first, want, strict=True):
        assert torch.allclose(g, w, atol=1e-10)


class _NoGradient(torch.autograd.Function):
    """The identity whose backward passes no gradient on."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> None:
        return None


def test_a_loss_whose_gradient_never_arrives_gives_its_inputs_none() -> None:
    """The rule's backward with no gradient for the value (only gold's, never differentiable, is
    left): no gradient for its inputs, not zeros, and the other paths' gradients intact."""
    c = random_chain(2, 5, 6, 4, False)
    leaves = tuple(
        x.clone().requires_grad_(True) for x in (c.emissions, c.transitions, c.start, c.end)
    )
    tags = torch.zeros_like(c.mask, dtype=torch.long)
    loss, gold = engine.nll(ChainPotentials(*leaves, c.mask), tags)
    assert not gold.requires_grad
    (_NoGradient.apply(loss).sum() + leaves[0].sum()).backward()
    assert torch.equal(leaves[0].grad, torch.ones_like(c.emissions))  # type: ignore[arg-type]
    assert all(x.grad is None for x in leaves[1:])


def test_the_ops_refuse_shapes_that_would_read_out_of_bounds() -> None:
    """Called directly (not through the op table), the ops check the shapes they index by."""
    from crfhead.engine.backends.cpu import dispatcher

    ops = dispatcher.ops()
    assert ops is not None
    em, mask = torch.randn(2, 3, 4), torch.ones(2, 3, dtype=torch.bool)
    tr, st, en = torch.randn(4, 4), torch.randn(4), torch.randn(4)
    tags = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="transitions must be"):
        ops.nll(em, torch.randn(5, 5), st, en, mask, tags)
    with pytest.raises(ValueError, match="start and end must be"):
        ops.log_partition(em, tr, torch.randn(3), en, mask)
    with pytest.raises(ValueError, match=r"mask must be \(B, T\)"):
        ops.viterbi(em, tr, st, en, mask[:, :2])
    with pytest.raises(ValueError, match=r"mask must be \(B, T\)"):
        ops.marginals(em, tr, st, en, mask[:1])
    with pytest.raises(ValueError, match=r"tags must be \(B, T\)"):
        ops.nll(em, tr, st, en, mask, tags[:1])
    parts = torch.ops.crfhead.nll(em, tr, st, en, mask, tags, True, True)
    with pytest.raises(ValueError, match="scale_grads takes the parts"):
        torch.ops.crfhead.scale_grads(torch.ones(2), parts[2][:, :, :3], *parts[3:])
    with pytest.raises(ValueError, match=r"the loss's gradient must be \(B,\) = \(2\)"):
        torch.ops.crfhead.scale_grads(torch.ones(3), *parts[2:])
    assert ops.check(em, tr, torch.randn(3), en, mask) == -3  # left to torch's reductions
    assert ops.check(em, tr, st, en, mask) == -1


@pytest.mark.thread_invariant  # builds and files
def test_a_first_use_builds_the_ops_beside_the_kernel_once(tmp_path: Path) -> None:
    """A fresh cache: asking for the kernel starts the ops' build too; the first call waits for it."""
    code = (
        "import torch\n"
        "from crfhead.engine.backends import cpu\n"
        "from crfhead.engine.backends.cpu import dispatcher\n"
        "assert cpu.status()[0]\n"
        "from crfhead import CRF\n"
        "loss = CRF(3).nll(torch.randn(2, 4, 3, requires_grad=True), torch.zeros(2, 4).long(), "
        "reduction='none')\n"
        "print('NODE', loss.grad_fn.name())\n"
    )
    env = {**os.environ, "CRFHEAD_CACHE": str(tmp_path)}
    env.pop("CRFHEAD_EAGER_OPS", None)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "crfhead::FusedChain" in done.stdout
    assert done.stderr.count("compiling chain_ops.cpp") == 1, done.stderr
    assert len(list(tmp_path.glob("chain_ops_*.so"))) == 1
    assert len(list(tmp_path.glob("chain_cpu_*.so"))) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_does_not_inherit_a_held_build_lock() -> None:
    """A DataLoader worker forked while the ops build in a background thread can still load them."""
    dispatcher = _dispatcher()
    lock = dispatcher._lock  # type: ignore[attr-defined]
    lock.acquire()
    try:
        pid = os.fork()
        if pid == 0:  # the child: the lock it sees must be free
            os._exit(0 if dispatcher._lock.acquire(timeout=5) else 1)  # type: ignore[attr-defined]
        _, status = os.waitpid(pid, 0)
    finally:
        lock.release()
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize("per_position", [False, True])
def test_frozen_transitions_gradcheck_through_the_cpp_rule(per_position: bool) -> None:
    """Only the emissions and start require gradients: the parts without edges, first and second order."""
    c = random_chain(4, 3, 5, 4, per_position)
    tags = torch.where(c.mask, c.mask.long(), 0)

    def f(em: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
        loss, _ = engine.nll(ChainPotentials(em, c.transitions, start, c.end, c.mask), tags)
        assert "crfhead::FusedChain" in loss.grad_fn.name()  # type: ignore[union-attr]
        return loss

    inputs = (c.emissions.clone().requires_grad_(True), c.start.clone().requires_grad_(True))
    assert torch.autograd.gradcheck(f, inputs)
    assert torch.autograd.gradgradcheck(f, inputs)
