"""Every Triton kernel compiles for a real GPU (CUDA sm_90, to a cubin through the ``ptxas`` Triton
ships), in each variant the backend launches: float32 and float64, shared and per-edge transitions,
each flag on and off. The interpreter runs the kernels' Python semantics, which accept programs the
compiler rejects (types that do not unify across a branch, masks of the wrong rank, ...): this is the
check that the first lent GPU will not fail on a compile error. No GPU is needed."""

from __future__ import annotations

import inspect
import itertools
from typing import Any

import pytest

triton = pytest.importorskip("triton")

INTS = {"mask_ptr": "*u8", "bp_ptr": "*i32", "path_ptr": "*i64"}
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "forward_backward_kernel": [
        dict(PER_POSITION=p, WANT_NODE=n, WANT_EDGE=e, EDGE_PER_STEP=s, BLOCK_K=16)
        for p, n, e, s in itertools.product((False, True), repeat=4)
        if (n or not e) and (s or not p)  # edges need the backward pass; per-edge stores per step
    ],
    "viterbi_kernel": [dict(PER_POSITION=p, BLOCK_K=32) for p in (False, True)],
    "max_marginals_kernel": [dict(PER_POSITION=p, BLOCK_K=32) for p in (False, True)],
    "topk_kernel": [
        dict(PER_POSITION=p, BLOCK_K=k, BLOCK_R=r, BLOCK_J=j)
        for p in (False, True)
        for k, r, j in ((16, 8, 16), (64, 8, 16))  # one chunk of next tags, and four
    ],
    "sample_kernel": [dict(PER_POSITION=p, BLOCK_K=32, BLOCK_S=128) for p in (False, True)],
}


def _compile(name: str, consts: dict[str, Any], dtype: str) -> Any:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from crfhead.engine.backends import triton_kernels

    fn = getattr(triton_kernels, name)
    signature = {
        arg: "constexpr"
        if arg in consts
        else INTS.get(arg, dtype if arg.endswith("_ptr") else "i32")
        for arg in inspect.signature(fn.fn).parameters
    }
    src = ASTSource(fn, signature, constexprs=consts)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})


def test_the_variants_cover_every_kernel() -> None:
    from crfhead.engine.backends import triton_kernels

    assert set(VARIANTS) == set(triton_kernels.__all__)


@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.parametrize("dtype", ["*fp32", "*fp64"])
def test_kernel_compiles_to_a_cubin(name: str, dtype: str) -> None:
    for consts in VARIANTS[name]:
        try:
            compiled = _compile(name, consts, dtype)
        except RuntimeError as e:  # no ptxas on this platform: nothing to check here
            if "ptxas" in str(e).lower() and "not found" in str(e).lower():
                pytest.skip(str(e))
            raise
        assert compiled.asm.get("cubin"), (name, consts)
