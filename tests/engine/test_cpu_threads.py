"""The CPU kernel's threads: the per-call thread count, results independent of it, the worker pool
(concurrent callers, a forked child) and the serial section that keeps torch's own threads alone."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Iterator

import pytest
import torch
from helpers import random_chain

from crfhead import make_potentials
from crfhead.engine import log_partition, marginals, nll, viterbi
from crfhead.engine.backends import available, cpu
from crfhead.engine.potentials import ChainPotentials

pytestmark = pytest.mark.skipif(
    not available("cpu")[0], reason="the cpu kernel is unavailable here"
)

BENCHMARK_SIZES = [(32, 50, 9), (64, 128, 17), (16, 512, 17), (32, 50, 64), (8, 1024, 9)]


@pytest.fixture
def no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRFHEAD_CPU_THREADS", raising=False)


# --------------------------------------------------------------------------- the policy
@pytest.mark.usefixtures("no_override")
class TestThreadsFor:
    def test_small_work_runs_on_one_thread(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(torch, "get_num_threads", lambda: 16)
        assert cpu.threads_for(32, 50, 9) == 1  # 129,600 multiply-adds: below PARALLEL_WORK
        B, T, K = 1000, 1, 1
        assert B * T * K * K < cpu.PARALLEL_WORK and cpu.threads_for(B, T, K) == 1

    def test_large_work_uses_torch_threads_up_to_one_per_block(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
        assert cpu.threads_for(64, 128, 17) == 4  # 8 blocks of 8 lanes
        assert cpu.threads_for(16, 512, 17) == 2  # 2 blocks: no idle thread
        assert cpu.threads_for(8, 2048, 9) == 1  # one block of 8 lanes
        assert cpu.threads_for(8, 2048, 9, dtype=torch.float64) == 2  # 4 lanes: 2 blocks
        assert cpu.threads_for(3, 1024, 64, per_sequence=True) == 3  # one task per sequence

    def test_benchmark_sizes(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The choices :data:`cpu.PARALLEL_WORK` makes on a 2-thread machine."""
        monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
        got = [cpu.threads_for(*size) for size in BENCHMARK_SIZES]
        assert got == [1, 2, 2, 2, 1]

    def test_environment_overrides_the_threshold_not_the_blocks(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("CRFHEAD_CPU_THREADS", "3")
        assert cpu.threads_for(32, 50, 9) == 3  # small work, 4 blocks: the override wins
        assert cpu.threads_for(16, 512, 17) == 2  # never more than the 2 blocks
        assert cpu.threads_for(8, 4, 2) == 1
        monkeypatch.setenv("CRFHEAD_CPU_THREADS", "1")
        assert cpu.threads_for(64, 128, 17) == 1

    def test_never_more_threads_than_blocks(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(torch, "get_num_threads", lambda: 64)
        for B in (1, 7, 8, 9, 17, 100):
            blocks = -(-B // 8)
            assert 1 <= cpu.threads_for(B, 4096, 17) <= blocks
            assert cpu.threads_for(B, 4096, 17, per_sequence=True) <= B


def _dispatcher_threads() -> object:
    from crfhead.engine.backends.cpu import dispatcher

    if not dispatcher.status()[0]:
        pytest.skip("the dispatcher ops do not build here")
    return dispatcher.threads_in_ops


@pytest.mark.thread_invariant  # sets torch's thread count
@pytest.mark.parametrize("override", [None, "3", " 2 ", "1"])
def test_the_dispatcher_ops_choose_the_threads_python_does(
    override: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C++ ops' own choice (a traced graph's sizes are known only when it runs) is this policy."""
    in_ops = _dispatcher_threads()
    if override is None:
        monkeypatch.delenv("CRFHEAD_CPU_THREADS", raising=False)
    else:
        monkeypatch.setenv("CRFHEAD_CPU_THREADS", override)
    sizes = [*BENCHMARK_SIZES, (1, 1, 1), (0, 5, 3), (9, 4096, 17), (100, 100, 100), (8, 2048, 9)]
    before = torch.get_num_threads()
    try:
        for n in (1, 2, 4):
            torch.set_num_threads(n)
            for B, T, K in sizes:
                for dtype in (torch.float32, torch.float64):
                    want = cpu.threads_for(B, T, K, dtype=dtype)
                    got = in_ops(B, T, K, int(dtype == torch.float64))  # type: ignore[operator]
                    assert got == want, (n, B, T, K, dtype)
    finally:
        torch.set_num_threads(before)


def test_a_bad_thread_count_in_the_environment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    _dispatcher_threads()
    monkeypatch.setenv("CRFHEAD_CPU_THREADS", "two")
    c = random_chain(0, 2, 3, 3)
    with pytest.raises(ValueError, match="CRFHEAD_CPU_THREADS must be an integer, got 'two'"):
        torch.ops.crfhead.viterbi(*c.args())


# --------------------------------------------------------------------------- same results
def _run(pot: ChainPotentials, tags: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every fused op on ``pot``: values, the loss's gradients, marginals, Viterbi."""
    parts = (pot.emissions, pot.transitions, pot.start, pot.end)
    leaves = [x.detach().clone().requires_grad_(True) for x in parts]
    live = make_potentials(*leaves, pot.mask)
    loss, _gold = nll(live, tags, backend="cpu")
    grads = torch.autograd.grad(loss.sum(), leaves)
    with torch.no_grad():
        logz = log_partition(pot, backend="cpu")
        gamma = marginals(pot, backend="cpu")
        scores, paths = viterbi(pot, backend="cpu")
    out = {"loss": loss.detach(), "logz": logz, "marginals": gamma, "scores": scores}
    out |= {"paths": paths, **{f"grad{i}": g for i, g in enumerate(grads)}}
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("per_position", [False, True])
def test_results_are_identical_for_any_thread_count(
    monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype, per_position: bool
) -> None:
    """Each block of sequences is computed whole by one thread: the thread count changes no bit."""
    c = random_chain(3, 45, 23, 6, per_position=per_position, dtype=dtype)  # 6 or 12 blocks
    pot = make_potentials(*c.args())
    tags = torch.randint(0, 6, (45, 23), generator=torch.Generator().manual_seed(4))
    results = {}
    for threads in (1, 2, 5):
        monkeypatch.setenv("CRFHEAD_CPU_THREADS", str(threads))
        results[threads] = _run(pot, tags)
    for threads in (2, 5):
        for name, value in results[1].items():
            assert torch.equal(results[threads][name], value), (threads, name)


def test_concurrent_callers_share_the_pool_safely(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python threads calling at once (ctypes releases the GIL): every result is still exact."""
    monkeypatch.setenv("CRFHEAD_CPU_THREADS", "2")
    c = random_chain(5, 40, 30, 5, dtype=torch.float32)
    pot = make_potentials(*c.args())
    expected = marginals(pot, backend="cpu")
    bad: list[int] = []

    def work(i: int) -> None:
        for _ in range(30):
            if not torch.equal(marginals(pot, backend="cpu"), expected):
                bad.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a call never returned"
    assert bad == []


def _child_marginals(queue: multiprocessing.Queue[float]) -> None:
    os.environ["CRFHEAD_CPU_THREADS"] = "2"
    c = random_chain(5, 40, 30, 5, dtype=torch.float32)
    queue.put(float(marginals(make_potentials(*c.args()), backend="cpu").sum()))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_a_pool_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fork copies no worker thread: the child must not wait for the parent's (DataLoader workers)."""
    monkeypatch.setenv("CRFHEAD_CPU_THREADS", "2")
    c = random_chain(5, 40, 30, 5, dtype=torch.float32)
    expected = float(marginals(make_potentials(*c.args()), backend="cpu").sum())  # pool made here
    ctx = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[float] = ctx.Queue()
    child = ctx.Process(target=_child_marginals, args=(queue,))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child's call never returned")
    assert child.exitcode == 0
    assert queue.get(timeout=5) == expected


# --------------------------------------------------------------------------- torch's threads
@pytest.fixture
def two_torch_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.mark.usefixtures("no_override", "two_torch_threads")
class TestSerialTorch:
    def test_a_small_call_leaves_torch_threads_unchanged(self) -> None:
        c = random_chain(1, 4, 6, 3, dtype=torch.float32)
        pot = make_potentials(*c.args())
        tags = torch.zeros(4, 6, dtype=torch.long)
        for run in (
            lambda: cpu.FUSED["nll"](pot.chain, tags, grads=True, edges=True),
            lambda: cpu.FUSED["log_partition"](pot.chain, grads=True, edges=False),
            lambda: cpu.FUSED["viterbi"](pot.chain),
        ):
            run()
            assert torch.get_num_threads() == 2

    def test_restored_after_an_error(self) -> None:
        c = random_chain(1, 4, 6, 3, dtype=torch.float32)
        pot = make_potentials(*c.args())
        tags = torch.full((4, 6), 7, dtype=torch.long)  # out of range: the kernel refuses
        with pytest.raises(ValueError, match="out of range"):
            cpu.FUSED["nll"](pot.chain, tags, grads=False, edges=False)
        assert torch.get_num_threads() == 2

    def test_the_section_is_serial_and_only_on_the_calling_thread(self) -> None:
        if not cpu.uses_openmp():
            pytest.skip("the serial section needs the OpenMP build")
        seen: list[int] = []
        with cpu.serial_torch():
            assert torch.get_num_threads() == 1
            other = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
            other.start()
            other.join()
        assert seen == [2]
        assert torch.get_num_threads() == 2
        with cpu.serial_torch(False):
            assert torch.get_num_threads() == 2
