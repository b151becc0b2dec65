"""Time the fused CPU kernel's C entry points alone (no PyTorch around them), optionally against
another version of ``crfhead/engine/backends/csrc/chain_cpu.cpp``.

``scripts/bench_chain.py`` times what a user calls (validation, autograd and all); this script times
what the native library does: ``crfhead_nll_grad`` (loss and gradient), ``crfhead_forward_backward``
(node marginals) and ``crfhead_viterbi``, with preallocated outputs, full-length float32 sequences,
shared transitions. Each cell is the minimum over ``--rounds`` rounds of the mean of 10 calls (the
minimum, because on a small shared VM single timings vary by ±30% between processes).

``--source OTHER.cpp`` also builds another version of the kernel (e.g. ``git show
REV:crfhead/engine/backends/csrc/chain_cpu.cpp > old.cpp``) with the same flags into a temporary folder and prints
both side by side; the other version must export the same C functions (the loss's return value is
ignored, so sources before the in-kernel tag check work too).

Run::

    python scripts/bench_kernel.py
    python scripts/bench_kernel.py --threads 1 --source old.cpp --sizes 16,512,17 8,1024,9
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from crfhead.engine.backends import cpu

SIZES = ("32,50,9", "64,128,17", "16,512,17", "32,50,64", "8,1024,9")
OPS = ("loss", "marginals", "viterbi")


def load(path: Path) -> ctypes.CDLL:
    """The library at ``path`` with the argument types of the three entry points (float32)."""
    lib = ctypes.CDLL(str(path))
    p, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib.crfhead_nll_grad_f32.argtypes = [
        p,
        p,
        p,
        p,
        p,
        i64,
        i64,
        i64,
        c_int,
        p,
        p,
        p,
        p,
        p,
        p,
        p,
        c_int,
    ]
    lib.crfhead_nll_grad_f32.restype = None
    lib.crfhead_forward_backward_f32.argtypes = [
        p,
        p,
        p,
        p,
        p,
        i64,
        i64,
        i64,
        c_int,
        p,
        p,
        p,
        p,
        p,
        c_int,
    ]
    lib.crfhead_forward_backward_f32.restype = None
    lib.crfhead_viterbi_f32.argtypes = [p, p, p, p, p, i64, i64, i64, c_int, p, p, c_int]
    lib.crfhead_viterbi_f32.restype = None
    return lib


def build(source: Path, out_dir: Path) -> Path:
    """Compile ``source`` with the backend's flags (OpenMP if the compiler has it)."""
    compiler = shutil.which(os.environ.get("CXX") or "c++")
    if compiler is None:
        sys.exit("no C++ compiler found (set $CXX)")
    target = out_dir / f"{source.stem}.so"
    for extra in (cpu.OPENMP, cpu.NO_OPENMP):
        done = subprocess.run(
            [compiler, *cpu.FLAGS, *extra, str(source), "-o", str(target)],
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            return target
    sys.exit(f"compiling {source} failed:\n{done.stderr[-2000:]}")


def calls(
    lib: ctypes.CDLL, B: int, T: int, K: int, threads: int
) -> tuple[dict[str, Callable[[], None]], tuple[object, ...]]:
    """One closure per operation on fixed random inputs and preallocated outputs, and the tensors
    the closures point into (keep them alive while timing)."""
    g = torch.Generator().manual_seed(0)
    em, tr = torch.randn(B, T, K, generator=g), torch.randn(K, K, generator=g)
    start, end = torch.randn(K, generator=g), torch.randn(K, generator=g)
    mask = torch.ones(B, T, dtype=torch.bool).view(torch.uint8)
    tags = torch.randint(0, K, (B, T), generator=g)
    out = {
        name: torch.empty(shape)
        for name, shape in [
            ("a", (B,)),
            ("b", (B,)),
            ("node", (B, T, K)),
            ("edge", (B, K, K)),
            ("first", (B, K)),
            ("last", (B, K)),
        ]
    }
    paths = torch.empty(B, T, dtype=torch.long)
    args = [x.data_ptr() for x in (em, tr, start, end, mask)] + [B, T, K, 0]
    ptr = {k: v.data_ptr() for k, v in out.items()}
    keep = (em, tr, start, end, mask, tags, out, paths)

    def loss() -> None:
        lib.crfhead_nll_grad_f32(
            *args,
            tags.data_ptr(),
            ptr["a"],
            ptr["b"],
            ptr["node"],
            ptr["edge"],
            ptr["first"],
            ptr["last"],
            threads,
        )

    def marginals() -> None:
        lib.crfhead_forward_backward_f32(
            *args, ptr["a"], ptr["node"], None, ptr["first"], ptr["last"], threads
        )

    def viterbi() -> None:
        lib.crfhead_viterbi_f32(*args, ptr["a"], paths.data_ptr(), threads)

    return {"loss": loss, "marginals": marginals, "viterbi": viterbi}, keep


def best_ms(fn: Callable[[], None], rounds: int) -> float:
    for _ in range(5):
        fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(10):
            fn()
        best = min(best, (time.perf_counter() - t0) / 10)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), metavar="B,T,K")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--source", type=Path, help="another chain_cpu.cpp to compare against")
    args = parser.parse_args()
    ok, why = cpu.status()
    if not ok:
        sys.exit(f"the cpu kernel is unavailable: {why}")
    loaded = cpu.native.load()
    assert loaded is not None
    libs = {"current": load(Path(loaded._name))}
    with tempfile.TemporaryDirectory() as tmp:
        if args.source is not None:
            libs[args.source.name] = load(build(args.source, Path(tmp)))
        names = list(libs)
        print(f"kernel alone, float32, full lengths, {args.threads} thread(s); ms (min of means)")
        header = (
            "| B, T, K | op | " + " | ".join(names) + (" | ratio |" if len(names) == 2 else " |")
        )
        print(header)
        print("|---" * (header.count("|") - 1) + "|")
        for size in args.sizes:
            B, T, K = (int(x) for x in size.split(","))
            timed = {name: calls(lib, B, T, K, args.threads) for name, lib in libs.items()}
            for op in OPS:
                ms = [best_ms(timed[name][0][op], args.rounds) for name in names]
                cells = " | ".join(f"{m:.3f}" for m in ms)
                ratio = f" | {ms[1] / ms[0]:.2f} |" if len(ms) == 2 else " |"
                print(f"| {B}, {T}, {K} | {op} | {cells}{ratio}", flush=True)


if __name__ == "__main__":
    main()
