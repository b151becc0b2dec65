"""Every fused backend against the portable one and against enumeration (values, gradients, Viterbi
paths with their tie-breaking) over masks with holes, empty rows, constraints, per-edge transitions and
dtypes; gradcheck of the fused autograd function; backend selection and the no-compiler fallback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from brute import enumerate_rows
from helpers import Chain, chains, constrained_chain, full, random_chain
from hypothesis import given, settings
from hypothesis import strategies as st

from crfhead import make_potentials
from crfhead.engine import edge_marginals, log_partition, marginals, posterior_decode, viterbi
from crfhead.engine.backends import BACKENDS, available, resolve, use_backend
from crfhead.engine.potentials import ChainPotentials
from crfhead.heads.crf import CRF

FUSED = [name for name in ("cpu", "triton") if available(name)[0] and name != "triton"]
if os.environ.get("TRITON_INTERPRET") == "1" and available("triton")[0]:
    FUSED.append("triton")


def pot_of(c: Chain) -> ChainPotentials:
    return make_potentials(*c.args())


pytestmark = pytest.mark.skipif(not FUSED, reason="no fused backend available here")


@pytest.mark.parametrize("backend", FUSED)
@settings(max_examples=20, deadline=None)
@given(c=chains(max_T=6, max_K=4))
def test_fused_log_partition_marginals_viterbi_match_enumeration(backend: str, c: Chain) -> None:
    pot = pot_of(c)
    rows = enumerate_rows(*c.args())
    logz = log_partition(pot, backend=backend)
    torch.testing.assert_close(
        logz, torch.tensor([r.log_partition for r in rows], dtype=torch.float64)
    )
    gamma = marginals(pot, backend=backend)
    for b, row in enumerate(rows):
        torch.testing.assert_close(gamma[b], row.node_marginals(), atol=1e-10, rtol=0)
    scores, paths = viterbi(pot, backend=backend)
    ref_scores, ref_paths = viterbi(pot, backend="portable")
    assert torch.equal(paths, ref_paths)  # same tie-breaking (random floats: no ties here)
    torch.testing.assert_close(scores, ref_scores)
    for b, row in enumerate(rows):
        if row.positions:
            assert scores[b].item() == pytest.approx(row.best()[0], abs=1e-10)


@pytest.mark.parametrize("backend", FUSED)
@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fused_gradients_match_portable_with_holes_empty_rows_and_constraints(
    backend: str, per_position: bool, dtype: torch.dtype
) -> None:
    c = constrained_chain(3, 4, 6, 4, per_position)
    c.mask[2] = False  # an empty row
    tol = 1e-10 if dtype == torch.float64 else 2e-5
    grads = {}
    for name in ("portable", backend):
        leaves = [x.detach().to(dtype).requires_grad_(True) for x in c.args()[:4]]
        pot = make_potentials(*leaves, c.mask)
        weights = torch.arange(1.0, 5.0, dtype=dtype)  # a non-uniform upstream gradient
        (log_partition(pot, backend=name) * weights).sum().backward()
        grads[name] = [x.grad for x in leaves]
        assert float(log_partition(pot, backend=name)[2].detach()) == 0.0
    for got, want in zip(grads[backend], grads["portable"], strict=True):
        torch.testing.assert_close(got, want, atol=tol, rtol=tol)


@pytest.mark.parametrize("backend", FUSED)
def test_fused_log_partition_gradcheck_float64(backend: str) -> None:
    c = random_chain(5, 3, 5, 3)
    args = [x.detach().clone().requires_grad_(True) for x in c.args()[:4]]

    def f(em, tr, s, e):
        return log_partition(make_potentials(em, tr, s, e, c.mask), backend=backend)

    # Triton's interpreter takes a second a launch: there the default suite checks one random
    # direction (gradcheck's fast mode), the full suite every input.
    fast = backend == "triton" and not full()
    assert torch.autograd.gradcheck(f, args, fast_mode=fast)
    # Double backward (Hessian-vector products) runs through the portable recursion.
    assert torch.autograd.gradgradcheck(f, args, fast_mode=fast)


@pytest.mark.parametrize("backend", FUSED)
def test_fused_edge_marginals_and_posterior_decoding_agree(backend: str) -> None:
    c = constrained_chain(7, 3, 6, 4, per_position=False)
    pot = pot_of(c)
    with use_backend(backend):
        mbr = posterior_decode(pot, valid_only=True)
    assert torch.equal(mbr, posterior_decode(pot, valid_only=True, backend="portable"))
    assert edge_marginals(pot).shape == (3, 5, 4, 4)


@pytest.mark.parametrize("backend", FUSED)
def test_fused_viterbi_breaks_ties_like_portable(backend: str) -> None:
    # All-equal scores: every path ties; the lowest tag wins at every back-pointer and at the end.
    pot = make_potentials(torch.zeros(2, 5, 3), torch.zeros(3, 3), None, None, None)
    paths = viterbi(pot, backend=backend)[1]
    assert torch.equal(paths, viterbi(pot, backend="portable")[1])
    assert paths.tolist() == [[0] * 5, [0] * 5]
    # Integer-valued scores with many ties.
    g = torch.Generator().manual_seed(0)
    em = torch.randint(0, 2, (3, 6, 4), generator=g).float()
    tr = torch.randint(0, 2, (4, 4), generator=g).float()
    pot = make_potentials(em, tr, None, None, torch.rand(3, 6, generator=g) < 0.8)
    assert torch.equal(viterbi(pot, backend=backend)[1], viterbi(pot, backend="portable")[1])


@pytest.mark.parametrize(
    ("backend", "scale"),
    [
        pytest.param(b, s, marks=[pytest.mark.slow] if b == "triton" and s == 100.0 else [])
        for b in FUSED
        for s in (1.0, 100.0, 3000.0)
    ],
)  # the interpreter: 100 only with --full
def test_fused_is_exact_for_scores_of_any_magnitude(backend: str, scale: float) -> None:
    """Scaled recursions fall back to log space where a normaliser leaves the float range."""
    g = torch.Generator().manual_seed(11)
    em = torch.randn(4, 40, 6, generator=g, dtype=torch.float64) * scale
    tr = torch.randn(6, 6, generator=g, dtype=torch.float64) * scale
    pot64 = make_potentials(em, tr, None, None, None)
    pot32 = make_potentials(em.float(), tr.float(), None, None, None)
    want = log_partition(pot64, backend="portable")
    got = log_partition(pot32, backend=backend).double()
    assert float(((got - want) / want.abs().clamp(min=1)).abs().max()) < 1e-5
    torch.testing.assert_close(
        marginals(pot32, backend=backend).double(),
        marginals(pot64, backend="portable"),
        atol=1e-5,
        rtol=0,
    )


@pytest.mark.parametrize("backend", FUSED)
def test_fused_handles_length_zero_and_one_and_half_inputs(backend: str) -> None:
    for T in (0, 1):
        pot = make_potentials(torch.randn(3, T, 4), torch.randn(4, 4), None, None, None)
        torch.testing.assert_close(
            log_partition(pot, backend=backend), log_partition(pot, backend="portable")
        )
        assert torch.equal(viterbi(pot, backend=backend)[1], viterbi(pot, backend="portable")[1])
    crf = CRF(4)
    em = torch.randn(2, 5, 4).to(torch.bfloat16)
    tags = torch.randint(0, 4, (2, 5))
    with use_backend(backend):
        loss = crf.nll(em, tags)
    torch.testing.assert_close(loss, crf.nll(em.float(), tags))


def test_backend_selection_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRFHEAD_BACKEND", raising=False)  # the rules from ``auto`` up
    assert resolve(torch.device("cpu"), "portable") == "portable"
    with pytest.raises(ValueError, match="unknown crfhead backend 'fast'"):
        resolve(torch.device("cpu"), "fast")
    with pytest.raises(ValueError, match="the cpu backend runs on CPU tensors"):
        resolve(torch.device("meta"), "cpu")
    with use_backend("portable"):
        assert resolve(torch.device("cpu")) == "portable"
        assert resolve(torch.device("cpu"), "auto") in ("cpu", "portable")
    assert set(BACKENDS) == {"auto", "portable", "cpu", "triton"}
    if FUSED and "cpu" in FUSED:
        assert resolve(torch.device("cpu")) == "cpu"


def test_the_environment_variable_is_read_at_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRFHEAD_BACKEND", raising=False)
    cpu = torch.device("cpu")
    first = resolve(cpu)  # ``auto``'s choice, remembered for the device
    monkeypatch.setenv("CRFHEAD_BACKEND", "portable")
    assert resolve(cpu) == "portable"
    monkeypatch.setenv("CRFHEAD_BACKEND", "fast")
    with pytest.raises(ValueError, match="unknown crfhead backend 'fast'"):
        resolve(cpu)
    monkeypatch.delenv("CRFHEAD_BACKEND")
    assert resolve(cpu) == first


@pytest.mark.thread_invariant  # a build and its log line
def test_without_a_compiler_auto_falls_back_with_one_log_line(tmp_path: Path) -> None:
    code = """
import logging, torch
logging.basicConfig(level=logging.WARNING)
from crfhead import CRF
from crfhead.engine.backends import available, resolve
crf = CRF(3)
em = torch.randn(2, 4, 3)
crf.nll(em, torch.zeros(2, 4, dtype=torch.long)).backward()
crf.decode(em)
print("AVAILABLE", available("cpu"))
print("RESOLVED", resolve(torch.device("cpu")))
try:
    resolve(torch.device("cpu"), "cpu")
except RuntimeError as err:
    print("EXPLICIT", err)
"""
    env = {**os.environ, "CXX": "no-such-compiler", "CRFHEAD_CACHE": str(tmp_path)}
    env.pop("CRFHEAD_BACKEND", None)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "RESOLVED portable" in done.stdout
    assert "EXPLICIT crfhead backend 'cpu' is unavailable: no C++ compiler found" in done.stdout
    warnings = [line for line in done.stderr.splitlines() if "fused CPU kernel unavailable" in line]
    assert len(warnings) == 1, done.stderr
    assert "using the portable PyTorch backend (slower)" in warnings[0]


def test_the_cpu_library_is_cached_by_source_hash(tmp_path: Path) -> None:
    from crfhead.engine.backends import cpu

    if not cpu.status()[0]:
        pytest.skip("no compiler")
    env_before = os.environ.get("CRFHEAD_CACHE")
    os.environ["CRFHEAD_CACHE"] = str(tmp_path)
    try:
        path = cpu.library_path(os.environ.get("CXX") or "c++")
        assert path.parent == tmp_path and path.name.startswith("chain_cpu_")
    finally:
        if env_before is None:
            del os.environ["CRFHEAD_CACHE"]
        else:
            os.environ["CRFHEAD_CACHE"] = env_before


@pytest.mark.parametrize("backend", FUSED)
def test_fused_and_portable_agree_on_long_chains(backend: str) -> None:
    T = 250 if backend == "triton" and not full() else 1000  # the interpreter: 1000 with --full
    c = random_chain(21, 4, T, 9, holes=True, dtype=torch.float32)
    pot = pot_of(c)
    pot64 = make_potentials(*(x.double() for x in c.args()[:4]), c.mask)
    torch.testing.assert_close(
        log_partition(pot, backend=backend).double(),
        log_partition(pot64, backend="portable"),
        rtol=1e-6,
        atol=1e-3,
    )
    torch.testing.assert_close(
        marginals(pot, backend=backend).double(),
        marginals(pot64, backend="portable"),
        atol=1e-5,
        rtol=0,
    )


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_posterior_decode_accepts_a_backend(seed: int) -> None:
    c = random_chain(seed, 2, 4, 3)
    pot = pot_of(c)
    for name in ("portable", *FUSED):
        assert torch.equal(posterior_decode(pot, backend=name), posterior_decode(pot))


# ----------------------------------------------------------------- the cpu kernel's blocks of sequences
# With shared transitions the cpu kernel runs W sequences (8 float / 4 double) side by side, one per
# SIMD lane, sorted by length; these tests cover full, partial and several blocks, lanes of different
# lengths, holes and empty rows in the same block, and one lane falling back to log space alone.

CPU = pytest.mark.skipif("cpu" not in FUSED, reason="the cpu kernel is unavailable here")


def _block_case(
    seed: int, B: int, T: int, K: int, dtype: torch.dtype
) -> tuple[Chain, torch.Tensor]:
    c = constrained_chain(seed, B, T, K, per_position=False)
    g = torch.Generator().manual_seed(seed + 2)
    lengths = torch.randint(0, T + 1, (B,), generator=g)
    c.mask &= torch.arange(T)[None, :] < lengths[:, None]  # ragged rows, holes, some empty
    c.emissions, c.transitions, c.start, c.end = (
        x.to(dtype) for x in (c.emissions, c.transitions, c.start, c.end)
    )
    # Gold paths the constraints allow (the Viterbi path), with -100 padding where masked.
    tags = viterbi(pot_of(c), backend="portable")[1]
    return c, torch.where(c.mask, tags, -100)


@CPU
@pytest.mark.parametrize("B", [1, 3, 8, 9, 17, 33])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cpu_blocks_match_portable_for_every_output(B: int, dtype: torch.dtype) -> None:
    c, tags = _block_case(100 + B, B, 13, 5, dtype)
    tol = {"atol": 2e-5, "rtol": 2e-5} if dtype == torch.float32 else {"atol": 1e-10, "rtol": 1e-10}
    results = {}
    for name in ("portable", "cpu"):
        leaves = [x.detach().clone().requires_grad_(True) for x in c.args()[:4]]
        pot = make_potentials(*leaves, c.mask)
        with use_backend(name):
            loss, gold = nll_of(pot, tags)
            weights = torch.linspace(0.5, 2.0, B, dtype=dtype)  # a non-uniform upstream gradient
            (loss * weights).sum().backward()
            with torch.no_grad():
                results[name] = {
                    "loss": loss.detach(),
                    "gold": gold,
                    "logz": log_partition(pot),
                    "marginals": marginals(pot),
                    "viterbi": viterbi(pot),
                    "grads": [x.grad for x in leaves],
                }
    got, want = results["cpu"], results["portable"]
    for key in ("loss", "gold", "logz", "marginals"):
        torch.testing.assert_close(got[key], want[key], **tol)
    assert torch.equal(got["viterbi"][1], want["viterbi"][1])
    torch.testing.assert_close(got["viterbi"][0], want["viterbi"][0], **tol)
    for g, w in zip(got["grads"], want["grads"], strict=True):
        torch.testing.assert_close(g, w, **tol)
    empty = ~c.mask.any(dim=1)
    assert bool((got["logz"][empty] == 0).all()) and bool((got["viterbi"][1][empty] == -1).all())


def nll_of(pot: ChainPotentials, tags: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    from crfhead.engine import nll

    return nll(pot, tags)


@CPU
def test_cpu_block_with_one_lane_out_of_float_range_recomputes_only_that_lane() -> None:
    """One sequence of a block needs the log-space fallback; its neighbours stay on the fast path."""
    c = random_chain(31, 11, 30, 6, holes=True, dtype=torch.float64)
    c.emissions[4] *= 3000.0  # normalisers far outside float32's range
    c.emissions[9, :, 2] -= 200.0  # one tag ~exp(-200) everywhere: underflows, harmlessly
    pot64 = make_potentials(*c.args())
    pot32 = make_potentials(*(x.float() for x in c.args()[:4]), c.mask)
    want = log_partition(pot64, backend="portable")
    got = log_partition(pot32, backend="cpu").double()
    assert float(((got - want) / want.abs().clamp(min=1)).abs().max()) < 1e-5
    torch.testing.assert_close(
        marginals(pot32, backend="cpu").double(),
        marginals(pot64, backend="portable"),
        atol=1e-5,
        rtol=0,
    )


@CPU
def test_cpu_kernel_reads_raw_minus_inf_potentials_as_portable_does() -> None:
    """Raw ChainPotentials (not via make_potentials) with -inf: forbidden, exactly as in make_potentials."""
    g = torch.Generator().manual_seed(5)
    em = torch.randn(10, 7, 4, generator=g)
    em[3, 2] = -float("inf")  # a position where every tag is impossible
    em[5, :, 1] = -float("inf")
    tr = torch.randn(4, 4, generator=g)
    tr[0, 2] = -float("inf")
    start, end = torch.zeros(4), torch.zeros(4)
    mask = torch.rand(10, 7, generator=g) < 0.8
    raw = ChainPotentials(em, tr, start, end, mask)
    made = make_potentials(em, tr, start, end, mask)
    made64 = make_potentials(*(x.double() for x in (em, tr, start, end)), mask)
    lz = log_partition(raw, backend="cpu").double()
    want = log_partition(made64, backend="portable")
    if bool(mask[3, 2]):  # every tag of an unmasked position forbidden: the row has no path
        assert float(want[3]) == -float("inf") and float(lz[3]) == -float("inf")
    torch.testing.assert_close(lz, want)
    torch.testing.assert_close(
        marginals(raw, backend="cpu").double(),
        marginals(made64, backend="portable"),
        atol=2e-6,
        rtol=0,
    )
    assert torch.equal(viterbi(raw, backend="cpu")[1], viterbi(made, backend="portable")[1])


@CPU
@pytest.mark.parametrize("grad", [True, False])
def test_cpu_nll_refuses_out_of_range_tags_naming_the_position(grad: bool) -> None:
    crf = CRF(4)
    em = torch.randn(10, 6, 4, requires_grad=grad)
    mask = torch.ones(10, 6, dtype=torch.bool)
    mask[7, 4:] = False
    tags = torch.randint(0, 4, (10, 6))
    tags[7, 4] = 99  # masked: ignored
    with use_backend("cpu"):
        crf.nll(em, tags, mask)
        tags[8, 3] = 4
        with pytest.raises(ValueError, match=r"tag 4 at unmasked position \(batch 8, time 3\)"):
            crf.nll(em, tags, mask)
    with use_backend("portable"), pytest.raises(ValueError, match=r"\(batch 8, time 3\)"):
        crf.nll(em, tags, mask)


@pytest.mark.thread_invariant  # sets its own threads
@CPU
def test_cpu_kernel_built_without_openmp_gives_the_same_results(tmp_path: Path) -> None:
    """A compiler that rejects -fopenmp: the build falls back to std::thread workers, one log line."""
    wrapper = tmp_path / "cxx"
    real = os.environ.get("CXX") or "c++"
    wrapper.write_text(
        '#!/bin/sh\nfor a in "$@"; do [ "$a" = "-fopenmp" ] && echo "no openmp here" >&2 && exit 1; done\n'
        f'exec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    code = """
import logging, torch
logging.basicConfig(level=logging.INFO)
from crfhead.engine.backends import cpu
from crfhead import make_potentials
from crfhead.engine import log_partition, marginals
from crfhead.engine import viterbi
g = torch.Generator().manual_seed(0)
pot = make_potentials(torch.randn(19, 9, 5, generator=g), torch.randn(5, 5, generator=g), None, None,
                      torch.rand(19, 9, generator=g) < 0.8)
torch.set_num_threads(2)
assert not cpu.uses_openmp()
for fn in (log_partition, marginals):
    torch.testing.assert_close(fn(pot, backend="cpu"), fn(pot, backend="portable"))
assert torch.equal(viterbi(pot, backend="cpu")[1], viterbi(pot, backend="portable")[1])
print("OK")
"""
    env = {**os.environ, "CXX": str(wrapper), "CRFHEAD_CACHE": str(tmp_path / "cache")}
    env.pop("CRFHEAD_CPU_OPENMP", None)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert "OK" in done.stdout
    assert "built without OpenMP: compiling chain_cpu.cpp failed: no openmp here" in done.stderr


@CPU
def test_cpu_nll_gradcheck_and_gradgradcheck_float64() -> None:
    """The fused loss (one native call for value and gradient, one for the scaling) in float64."""
    from crfhead.engine import nll

    c, tags = _block_case(8, 11, 6, 3, torch.float64)
    args = [x.detach().clone().requires_grad_(True) for x in c.args()[:4]]

    def f(em, tr, s, e):
        return nll(make_potentials(em, tr, s, e, c.mask), tags, backend="cpu")[0]

    assert torch.autograd.gradcheck(f, args)
    assert torch.autograd.gradgradcheck(f, args)
