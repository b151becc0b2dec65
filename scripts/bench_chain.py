"""Benchmark crfhead's linear-chain CRF against pytorch-crf and torch-struct, side by side.

What it measures, for each size ``(B, T, K)`` with full lengths and with variable lengths (random
lengths in ``[T/2, T]``, first row full length, left-aligned masks, the same data for every library):

* ``loss``: forward + backward of the summed negative log-likelihood, gradients with respect to the
  emissions and the CRF parameters (transitions, start, end). crfhead: ``CRF.nll``; pytorch-crf:
  ``-CRF.forward``; torch-struct: ``LinearChainCRF(...).partition`` minus the gold-path score,
  read off the edge potentials.
* ``decode``: Viterbi paths. crfhead: ``CRF.decode`` (a ``(B, T)`` tensor); pytorch-crf:
  ``CRF.decode`` (lists); torch-struct: ``.argmax`` (edge indicators) turned into ``(B, T)`` paths.
* ``marginals``: node marginals ``p(z_t = k | x)``. crfhead: ``CRF.marginals``; torch-struct:
  ``.marginals`` (edge marginals, summed into node marginals); pytorch-crf has none ("—").

torch-struct's times include building its ``(B, T-1, K, K)`` edge potentials from the emissions and
the transition/start/end parameters (start is folded into the first edge, end into the last edge of
each sequence), since that is what a user of it has to do. Its edge convention is
``log_potentials[b, n, z_{n+1}, z_n]`` ([to, from]); crfhead's and pytorch-crf's transitions are
``[from, to]``. crfhead and pytorch-crf decode / marginals run under ``torch.no_grad()``; torch-struct
needs autograd for them (they are gradients of its partition function), so it runs with grad enabled.

Timing: float32, ``torch.set_num_threads`` left at the default, ``--warmup`` (default 2) warm-up calls,
then the median of ``--repeats`` (default 10) timed calls, ``time.perf_counter`` around each call
(``torch.cuda.synchronize`` on CUDA). Time cap: if the first warm-up call takes longer than
``--cap-s`` (default 3 s; torch-struct at K=64 materialises ``(B, T/2, K, K, K)`` tensors and takes
5-20 s a call), the other warm-up calls are skipped (except the memory-profiled one) and only 3 timed
calls are made; such cells are marked ``*``. The default run takes about 10 minutes on 2 cores.

Peak memory (MiB): the peak *extra* memory of one untimed call. On CPU, the second warm-up call runs
under ``torch.profiler.profile(profile_memory=True)``; every allocation and free of PyTorch's CPU
allocator is then a ``[memory]`` event with a signed byte count, and the peak is the maximum running
sum of those events in time order (so it counts intermediate tensors, saved activations, outputs and
``.grad`` tensors, but not Python objects such as pytorch-crf's lists of paths, nor memory the C
library keeps after a free; RSS-based measures were rejected as too coarse: ``ru_maxrss`` only ever
grows within a process). On CUDA it is a separate call after the timed ones:
``torch.cuda.max_memory_allocated()`` after ``reset_peak_memory_stats()``, minus the memory allocated
before the call.

Run it on an otherwise idle machine: with few cores, OpenMP threads competing with another busy
process inflate small-op times by 10-40x. The report prints the load average before the run and
the CPU time other processes used during it (the machine's busy time in ``/proc/stat`` minus this
process's own CPU time), and marks with ``†`` every cell during which other processes used more than
a quarter of a core. The exit status is 1 if any library disagrees, else 0.

Agreement (from the outputs of the timed calls): crfhead vs pytorch-crf log-likelihood (1e-3
relative), emission gradients (1e-3 absolute) and Viterbi paths (identical); crfhead vs torch-struct
log-partition and NLL (1e-3 relative), emission gradients and node marginals (1e-3 absolute) and
paths (identical). Any disagreement is printed loudly to stderr and listed in the report, with the
errors of both sides against a float64 reference (pytorch-crf's own code run in float64) to tell
which side is off.

Ratios are ``anchor_time / crfhead_time``: above 1 means crfhead is faster.

torch-struct 0.5 imports and runs unchanged on torch 2.13; no shim is needed. The script only
silences the ``UserWarning`` torch.distributions raises because its classes lack ``arg_constraints``.

Run (progress goes to stderr, the report to stdout)::

    pip install --no-deps torch-struct==0.5   # pytorch-crf==0.7.2 comes with the dev extras
    python scripts/bench_chain.py --markdown > bench.md
    python scripts/bench_chain.py --sizes 32,50,9 16,512,17 --repeats 20 --skip-struct
    python scripts/bench_chain.py --device cuda --markdown
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import importlib.metadata
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from crfhead import CRF
from crfhead.backends import resolve, use_backend

try:
    import torchcrf
except ImportError:  # pragma: no cover - the benchmark needs it
    sys.exit("pytorch-crf is missing: pip install pytorch-crf==0.7.2")

try:
    import torch_struct
except ImportError:  # pragma: no cover - optional with --skip-struct
    torch_struct = None

# torch-struct 0.5 predates ``Distribution.arg_constraints``; torch warns on every new class. Harmless.
warnings.filterwarnings("ignore", message=".*does not define `arg_constraints`")

DEFAULT_SIZES = [(32, 50, 9), (64, 128, 17), (16, 512, 17), (32, 50, 64), (8, 1024, 9)]
LIBS = ("crfhead", "crfhead-portable", "pytorch-crf", "torch-struct")
"""``crfhead`` runs the engine's backend for the device (``--backend``, default ``auto``: the fused
C++ kernel on CPU, the Triton kernels on CUDA); ``crfhead-portable`` the same layer on the portable
PyTorch backend."""
ANCHORS = ("pytorch-crf", "torch-struct")
OPS = ("loss", "decode", "marginals")
CAPPED_REPEATS = 3
RTOL = 1e-3
CONTENDED_CORES = 0.25  # cells during which other processes used more CPU than this are marked †
ATOL = 1e-3


# --------------------------------------------------------------------------- data and results
@dataclass(frozen=True)
class Case:
    """One benchmark case: a size and a length regime."""

    B: int
    T: int
    K: int
    variable: bool

    @property
    def seed(self) -> int:
        """The data seed: a function of the case alone, so a case reproduces in any ``--sizes``."""
        return ((self.B * 10007 + self.T) * 1009 + self.K) * 2 + int(self.variable)

    @property
    def label(self) -> str:
        return f"B={self.B} T={self.T} K={self.K} {'var' if self.variable else 'full'}"


@dataclass
class Measurement:
    """Time and memory of one (case, library, op)."""

    ms: float | None = None
    repeats: int = 0
    capped: bool = False
    mib: float | None = None
    error: str | None = None
    skipped: bool = False
    unsupported: bool = False
    others_cores: float | None = None  # mean CPU use of other processes while this cell ran


@dataclass
class Agreement:
    """Agreement numbers of one case; ``problems`` lists every disagreement in words."""

    llh_rel: float | None = None
    grad_abs: float | None = None
    paths_torchcrf: str | None = None
    logz_rel: float | None = None
    struct_nll_rel: float | None = None
    struct_grad_abs: float | None = None
    marg_abs: float | None = None
    paths_struct: str | None = None
    problems: list[str] = field(default_factory=list)


@dataclass
class Inputs:
    """The data and the three CRFs of one case, on the benchmark device."""

    emissions: Tensor
    tags: Tensor
    mask: Tensor
    lengths: Tensor
    ours: CRF
    theirs: torchcrf.CRF
    struct_params: nn.ParameterDict


def parse_size(text: str) -> tuple[int, int, int]:
    """``"B,T,K"`` -> ``(B, T, K)`` (an argparse ``type``)."""
    try:
        B, T, K = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"size must be B,T,K (e.g. 32,50,9), got {text!r}"
        ) from None
    if min(B, K) < 1 or T < 2:
        raise argparse.ArgumentTypeError(f"need B, K >= 1 and T >= 2, got {text!r}")
    return B, T, K


def make_inputs(case: Case, device: torch.device) -> Inputs:
    gen = torch.Generator().manual_seed(case.seed)
    B, T, K = case.B, case.T, case.K
    emissions = torch.randn(B, T, K, generator=gen)
    tags = torch.randint(0, K, (B, T), generator=gen)
    if case.variable:
        lengths = torch.randint(math.ceil(T / 2), T + 1, (B,), generator=gen)
        lengths[0] = T
    else:
        lengths = torch.full((B,), T, dtype=torch.long)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    theirs = torchcrf.CRF(K, batch_first=True)
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))
    ours = CRF(K)
    ours.load_state_dict(theirs.state_dict())
    struct_params = nn.ParameterDict(
        {name: nn.Parameter(p.detach().clone()) for name, p in theirs.named_parameters()}
    )
    return Inputs(
        emissions=emissions.to(device),
        tags=tags.to(device),
        mask=mask.to(device),
        lengths=lengths.to(device),
        ours=ours.to(device),
        theirs=theirs.to(device),
        struct_params=struct_params.to(device),
    )


# --------------------------------------------------------------------------- torch-struct adapters
def struct_log_potentials(
    emissions: Tensor, transitions: Tensor, start: Tensor, end: Tensor, lengths: Tensor
) -> Tensor:
    """torch-struct edge potentials ``(B, T-1, K_to, K_from)`` of a CRF with start/end scores.

    Edge ``n`` scores ``z_n -> z_{n+1}``: ``transitions[z_n, z_{n+1}] + emissions[n+1, z_{n+1}]``;
    edge 0 also carries ``start[z_0] + emissions[0, z_0]`` and edge ``length - 2`` carries
    ``end[z_{length-1}]``. Needs every length >= 2.
    """
    T = emissions.shape[1]
    edge = transitions.t()[None, None] + emissions[:, 1:, :, None]
    first = (start + emissions[:, 0])[:, None, None, :]
    edge = torch.cat([edge[:, :1] + first, edge[:, 1:]], dim=1)
    last = torch.arange(T - 1, device=emissions.device)[None, :] == (lengths - 2)[:, None]
    return edge + last.to(edge.dtype)[:, :, None, None] * end[None, None, :, None]


def struct_gold_score(log_potentials: Tensor, tags: Tensor, lengths: Tensor) -> Tensor:
    """Score of the gold paths under edge potentials, ``(B,)`` (vectorised ``.log_prob`` numerator)."""
    B, N1, K, _ = log_potentials.shape
    flat = log_potentials.reshape(B, N1, K * K)
    pair = flat.gather(2, (tags[:, 1:] * K + tags[:, :-1]).unsqueeze(-1)).squeeze(-1)
    valid = torch.arange(N1, device=tags.device)[None, :] < (lengths - 1)[:, None]
    return torch.where(valid, pair, torch.zeros_like(pair)).sum(1)


def struct_paths(edge_argmax: Tensor, mask: Tensor) -> Tensor:
    """``(B, T)`` tags from torch-struct's ``(B, T-1, K_to, K_from)`` argmax indicators, -1 masked."""
    first = edge_argmax[:, 0].sum(-2).argmax(-1)
    rest = edge_argmax.sum(-1).argmax(-1)
    path = torch.cat([first[:, None], rest], dim=1)
    return torch.where(mask, path, torch.full_like(path, -1))


def struct_node_marginals(edge_marginals: Tensor) -> Tensor:
    """``(B, T, K)`` node marginals from ``(B, T-1, K_to, K_from)`` edge marginals (0 where masked)."""
    first = edge_marginals[:, 0].sum(-2)
    return torch.cat([first[:, None], edge_marginals.sum(-1)], dim=1)


# --------------------------------------------------------------------------- the operations
def build_ops(
    inp: Inputs, libs: tuple[str, ...]
) -> dict[tuple[str, str], Callable[[], dict[str, Any]]]:
    """The closures to time, keyed by ``(lib, op)``; each returns its outputs for the agreement."""
    ops: dict[tuple[str, str], Callable[[], dict[str, Any]]] = {}
    em_det = inp.emissions
    tags, mask, lengths = inp.tags, inp.mask, inp.lengths

    def leaf() -> Tensor:
        return em_det.clone().requires_grad_(True)

    def clear(module: nn.Module) -> None:
        for p in module.parameters():
            p.grad = None

    # crfhead
    ours = inp.ours
    em_ours = leaf()

    def ours_loss() -> dict[str, Any]:
        clear(ours)
        em_ours.grad = None
        nll = ours.nll(em_ours, tags, mask, reduction="none")
        torch.autograd.backward(nll.sum())
        return {"nll": nll.detach(), "grad": em_ours.grad}

    def ours_decode() -> dict[str, Any]:
        with torch.no_grad():
            return {"paths": ours.decode(em_det, mask)}

    def ours_marginals() -> dict[str, Any]:
        with torch.no_grad():
            return {"marginals": ours.marginals(em_det, mask)}

    ops["crfhead", "loss"] = ours_loss
    ops["crfhead", "decode"] = ours_decode
    ops["crfhead", "marginals"] = ours_marginals

    def portable(fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
        def run() -> dict[str, Any]:
            with use_backend("portable"):
                return fn()

        return run

    ops["crfhead-portable", "loss"] = portable(ours_loss)
    ops["crfhead-portable", "decode"] = portable(ours_decode)
    ops["crfhead-portable", "marginals"] = portable(ours_marginals)

    # pytorch-crf
    theirs = inp.theirs
    em_theirs = leaf()

    def theirs_loss() -> dict[str, Any]:
        clear(theirs)
        em_theirs.grad = None
        llh = theirs(em_theirs, tags, mask, reduction="none")
        torch.autograd.backward((-llh).sum())
        return {"nll": -llh.detach(), "grad": em_theirs.grad}

    def theirs_decode() -> dict[str, Any]:
        with torch.no_grad():
            return {"paths": theirs.decode(em_det, mask)}

    ops["pytorch-crf", "loss"] = theirs_loss
    ops["pytorch-crf", "decode"] = theirs_decode

    if "torch-struct" in libs:
        assert torch_struct is not None
        sp = inp.struct_params
        em_struct = leaf()

        def potentials(em: Tensor) -> Tensor:
            return struct_log_potentials(
                em, sp["transitions"], sp["start_transitions"], sp["end_transitions"], lengths
            )

        def struct_loss() -> dict[str, Any]:
            clear(sp)
            em_struct.grad = None
            lp = potentials(em_struct)
            partition = torch_struct.LinearChainCRF(lp, lengths=lengths).partition
            nll = partition - struct_gold_score(lp, tags, lengths)
            torch.autograd.backward(nll.sum())
            return {"nll": nll.detach(), "logz": partition.detach(), "grad": em_struct.grad}

        def struct_decode() -> dict[str, Any]:
            with torch.no_grad():
                lp = potentials(em_det)
            argmax = torch_struct.LinearChainCRF(lp, lengths=lengths).argmax
            return {"paths": struct_paths(argmax.detach(), mask)}

        def struct_marginals() -> dict[str, Any]:
            with torch.no_grad():
                lp = potentials(em_det)
            edge = torch_struct.LinearChainCRF(lp, lengths=lengths).marginals
            return {"marginals": struct_node_marginals(edge.detach())}

        ops["torch-struct", "loss"] = struct_loss
        ops["torch-struct", "decode"] = struct_decode
        ops["torch-struct", "marginals"] = struct_marginals
    return ops


# --------------------------------------------------------------------------- timing and memory
def synchronizer(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def time_op(
    fn: Callable[[], dict[str, Any]],
    sync: Callable[[], None],
    warmup: int,
    repeats: int,
    cap_s: float,
    profiled: Callable[[], dict[str, Any]] | None = None,
) -> tuple[Measurement, dict[str, Any]]:
    """Warm up, then time ``repeats`` calls (3 if a warm-up call exceeds ``cap_s``); median in ms.

    ``profiled``, if given, is called (untimed) right after the first warm-up call, and counts as
    the second warm-up call. It never decides the cap: the profiler's own overhead can be seconds
    for thousands of small ops.
    """
    out: dict[str, Any] = {}
    capped = False
    for i in range(warmup):
        if i == 1 and profiled is not None:
            out = profiled()
            continue
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()
        if time.perf_counter() - t0 > cap_s:
            capped = True
            break
    if profiled is not None and (capped or warmup < 2):
        out = profiled()
    n = min(repeats, CAPPED_REPEATS) if capped else repeats
    times = []
    for _ in range(n):
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - t0)
    return Measurement(ms=1e3 * statistics.median(times), repeats=n, capped=capped), out


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """Silence the C++ profiler's start/stop lines on file descriptor 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_mib(
    fn: Callable[[], dict[str, Any]], device: torch.device
) -> tuple[float, dict[str, Any]]:
    """One call of ``fn``: its peak extra memory in MiB (see the module docstring) and its outputs."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        out = fn()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - base) / 2**20, out
    from torch._C._autograd import DeviceType

    activities = [torch.profiler.ProfilerActivity.CPU]
    with quiet_stderr(), torch.profiler.profile(activities=activities, profile_memory=True) as prof:
        out = fn()
    cpu_types = {DeviceType.CPU, DeviceType.MKLDNN, DeviceType.IDEEP}
    events = [
        e
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() in cpu_types
    ]
    current = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        current += e.nbytes()
        peak = max(peak, current)
    return peak / 2**20, out


# --------------------------------------------------------------------------- agreement
def max_rel(a: Tensor, b: Tensor) -> float:
    return float(((a - b).abs() / b.abs().clamp(min=1e-6)).max())


def max_abs(a: Tensor, b: Tensor) -> float:
    return float((a - b).abs().max())


def as_lists(paths: Tensor | list[list[int]]) -> list[list[int]]:
    """Paths as lists of tags with masked positions (-1) dropped."""
    if isinstance(paths, list):
        return paths
    return [[int(x) for x in row if x >= 0] for row in paths.cpu().tolist()]


def float64_reference(inp: Inputs) -> dict[str, Any]:
    """The arbiter of a disagreement: pytorch-crf's own code in float64, on the same data (CPU)."""
    K = inp.emissions.shape[2]
    ref = torchcrf.CRF(K, batch_first=True).double()
    ref.load_state_dict({k: v.cpu() for k, v in inp.theirs.state_dict().items()})
    tags, mask = inp.tags.cpu(), inp.mask.cpu()
    em = inp.emissions.cpu().double().requires_grad_(True)
    llh = ref(em, tags, mask, reduction="none")
    (grad,) = torch.autograd.grad(-llh.sum(), em)
    em = inp.emissions.cpu().double().requires_grad_(True)
    logz = ref._compute_normalizer(em.transpose(0, 1), mask.transpose(0, 1))
    (marginals,) = torch.autograd.grad(logz.sum(), em)  # d log Z / d emissions
    with torch.no_grad():
        paths = ref.decode(em.detach(), mask)
    return {
        "nll": -llh.detach(),
        "grad": grad,
        "logz": logz.detach(),
        "marginals": marginals,
        "paths": paths,
    }


def check_agreement(inp: Inputs, outs: dict[tuple[str, str], dict[str, Any]]) -> Agreement:
    """Compare the outputs of the timed calls; explain each disagreement with a float64 reference."""
    agr = Agreement()
    mask = inp.mask.cpu()
    cache: dict[str, dict[str, Any]] = {}

    def get(lib: str, op: str, key: str) -> Any:
        x = outs.get((lib, op), {}).get(key)
        return x.cpu() if isinstance(x, Tensor) else x

    def ref(key: str) -> Any:
        if not cache:
            cache["ref"] = float64_reference(inp)
        return cache["ref"][key]

    def verdict(key: str, mine: Tensor, anchor: Tensor, anchor_name: str, rel: bool) -> str:
        err = max_rel if rel else max_abs
        truth = ref(key).float()
        return (
            f"; error vs float64 reference: crfhead {err(mine, truth):.1e}, "
            f"{anchor_name} {err(anchor, truth):.1e}"
        )

    def path_verdict(mine: list[list[int]], anchor: list[list[int]], anchor_name: str) -> str:
        truth = ref("paths")
        rows = [i for i, (a, b) in enumerate(zip(mine, anchor, strict=True)) if a != b]
        ours_ok = sum(mine[i] == truth[i] for i in rows)
        theirs_ok = sum(anchor[i] == truth[i] for i in rows)
        return (
            f"; the float64 path is crfhead's in {ours_ok}/{len(rows)}, "
            f"{anchor_name}'s in {theirs_ok}/{len(rows)}"
        )

    nll = get("crfhead", "loss", "nll")
    grad = get("crfhead", "loss", "grad")
    paths = get("crfhead", "decode", "paths")
    marg = get("crfhead", "marginals", "marginals")

    their_nll = get("pytorch-crf", "loss", "nll")
    if nll is not None and their_nll is not None:
        agr.llh_rel = max_rel(nll, their_nll)
        if agr.llh_rel > RTOL:
            agr.problems.append(
                f"log-likelihood vs pytorch-crf: max rel err {agr.llh_rel:.2e}"
                + verdict("nll", nll, their_nll, "pytorch-crf", rel=True)
            )
        their_grad = get("pytorch-crf", "loss", "grad")
        agr.grad_abs = max_abs(grad, their_grad)
        if agr.grad_abs > ATOL:
            agr.problems.append(
                f"emission grad vs pytorch-crf: max abs err {agr.grad_abs:.2e}"
                + verdict("grad", grad, their_grad, "pytorch-crf", rel=False)
            )
    their_paths = get("pytorch-crf", "decode", "paths")
    if paths is not None and their_paths is not None:
        mine, theirs = as_lists(paths), as_lists(their_paths)
        bad = sum(a != b for a, b in zip(mine, theirs, strict=True))
        agr.paths_torchcrf = f"{len(mine) - bad}/{len(mine)}"
        if bad:
            agr.problems.append(
                f"Viterbi paths vs pytorch-crf: {bad} sequence(s) differ"
                + path_verdict(mine, theirs, "pytorch-crf")
            )

    logz = get("torch-struct", "loss", "logz")
    if logz is not None and nll is not None:
        with torch.no_grad():
            our_logz = inp.ours.log_partition(inp.emissions, inp.mask).cpu()
        agr.logz_rel = max_rel(our_logz, logz)
        if agr.logz_rel > RTOL:
            agr.problems.append(
                f"log Z vs torch-struct: max rel err {agr.logz_rel:.2e}"
                + verdict("logz", our_logz, logz, "torch-struct", rel=True)
            )
        struct_nll = get("torch-struct", "loss", "nll")
        agr.struct_nll_rel = max_rel(nll, struct_nll)
        if agr.struct_nll_rel > RTOL:
            agr.problems.append(
                f"NLL vs torch-struct: max rel err {agr.struct_nll_rel:.2e}"
                + verdict("nll", nll, struct_nll, "torch-struct", rel=True)
            )
        struct_grad = get("torch-struct", "loss", "grad")
        agr.struct_grad_abs = max_abs(grad, struct_grad)
        if agr.struct_grad_abs > ATOL:
            agr.problems.append(
                f"emission grad vs torch-struct: max abs err {agr.struct_grad_abs:.2e}"
                + verdict("grad", grad, struct_grad, "torch-struct", rel=False)
            )
    struct_marg = get("torch-struct", "marginals", "marginals")
    if marg is not None and struct_marg is not None:
        agr.marg_abs = max_abs(marg, struct_marg)
        if agr.marg_abs > ATOL:
            agr.problems.append(
                f"marginals vs torch-struct: max abs err {agr.marg_abs:.2e}"
                + verdict("marginals", marg, struct_marg, "torch-struct", rel=False)
            )
    struct_p = get("torch-struct", "decode", "paths")
    if paths is not None and struct_p is not None:
        differ = ((paths != struct_p) & mask).any(dim=1)
        bad = int(differ.sum())
        agr.paths_struct = f"{len(differ) - bad}/{len(differ)}"
        if bad:
            agr.problems.append(
                f"Viterbi paths vs torch-struct: {bad} sequence(s) differ"
                + path_verdict(as_lists(paths), as_lists(struct_p), "torch-struct")
            )
    return agr


# --------------------------------------------------------------------------- running
def measure(
    fn: Callable[[], dict[str, Any]],
    device: torch.device,
    sync: Callable[[], None],
    args: argparse.Namespace,
) -> tuple[Measurement, dict[str, Any]]:
    """Time and memory of one (case, library, op); also returns the outputs of the last call."""
    mem: list[float] = []

    def profiled() -> dict[str, Any]:
        mib, out = peak_mib(fn, device)
        mem.append(mib)
        return out

    # CPU: the second warm-up call is the memory-profiled one (no extra call, which matters at 15 s a
    # call). CUDA: a separate call after the timed ones, so that one-off workspaces (cuBLAS...)
    # allocated by the very first call are not counted.
    on_cpu = device.type == "cpu" and not args.no_memory
    busy0, own0, wall0 = busy_cpu_seconds(), time.process_time(), time.perf_counter()
    m, out = time_op(fn, sync, args.warmup, args.repeats, args.cap_s, profiled if on_cpu else None)
    if device.type == "cuda" and not args.no_memory:
        profiled()
    busy1, own1, wall1 = busy_cpu_seconds(), time.process_time(), time.perf_counter()
    if busy0 is not None and busy1 is not None:
        m.others_cores = max(0.0, (busy1 - busy0) - (own1 - own0)) / max(wall1 - wall0, 1e-9)
    m.mib = mem[0] if mem else None
    return m, out


def run_case(
    case: Case,
    device: torch.device,
    libs: tuple[str, ...],
    args: argparse.Namespace,
) -> tuple[dict[tuple[str, str], Measurement], Agreement]:
    inp = make_inputs(case, device)
    ops = build_ops(inp, libs)
    sync = synchronizer(device)
    results: dict[tuple[str, str], Measurement] = {}
    outs: dict[tuple[str, str], dict[str, Any]] = {}
    for op in OPS:
        for lib in LIBS:
            if lib not in libs:
                results[lib, op] = Measurement(skipped=True)
                continue
            fn = ops.get((lib, op))
            if fn is None:
                results[lib, op] = Measurement(unsupported=True)
                continue
            t0 = time.perf_counter()
            try:
                m, out = measure(fn, device, sync, args)
                outs[lib, op] = out
                del out
            except Exception as exc:  # report and carry on (e.g. out of memory)
                m = Measurement(error=f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
                print(f"!!! ERROR {case.label} {lib} {op}: {m.error}", file=sys.stderr)
            results[lib, op] = m
            note = " (capped)" if m.capped else ""
            ms = "error" if m.ms is None else f"{m.ms:.2f} ms x{m.repeats}{note}"
            print(
                f"  {case.label:28s} {op:9s} {lib:12s} {ms}  [{time.perf_counter() - t0:.1f} s]",
                file=sys.stderr,
                flush=True,
            )
    agr = check_agreement(inp, outs)
    for problem in agr.problems:
        print(f"!!! DISAGREEMENT {case.label}: {problem}", file=sys.stderr, flush=True)
    return results, agr


# --------------------------------------------------------------------------- reporting
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_revision() -> str:
    """The crfhead checkout's commit, with ``+dirty`` if ``crfhead/`` has uncommitted changes."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        rev = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", "crfhead"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "git n/a"
    return f"git {rev}{'+dirty' if dirty else ''}"


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def busy_cpu_seconds() -> float | None:
    """CPU seconds all processes have spent busy since boot (Linux ``/proc/stat``), or ``None``."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def contention(args: argparse.Namespace, elapsed_s: float) -> str:
    """CPU time other processes used during the run: the busy time of the machine minus ours."""
    busy = busy_cpu_seconds()
    if busy is None or args.busy_at_start is None:
        return "n/a"
    others = max(0.0, busy - args.busy_at_start - (time.process_time() - args.cpu_at_start))
    return f"{others:.0f} CPU-s (on average {others / max(elapsed_s, 1e-9):.2f} cores)"


def header_lines(device: torch.device, args: argparse.Namespace, elapsed_s: float) -> list[str]:
    dev = f"cpu ({cpu_model()})"
    if device.type == "cuda":
        dev = f"cuda ({torch.cuda.get_device_name(device)})"
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    load = "n/a" if args.load_at_start is None else f"{args.load_at_start:.2f}"
    return [
        f"date: {now}",
        f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs, "
        f"torch threads {torch.get_num_threads()}",
        f"other processes: 1-min load average {load} before the run; during the run they used "
        f"{contention(args, elapsed_s)} (timings are only trustworthy near 0)",
        f"device: {dev}; crfhead backend: {args.backend_used} ('crfhead' columns), portable "
        "('crfhead-portable')",
        f"python {platform.python_version()}, torch {torch.__version__}, "
        f"crfhead {version('crfhead')} ({git_revision()}), pytorch-crf {version('pytorch-crf')}, "
        f"torch-struct {version('torch-struct')}",
        f"float32; median of {args.repeats} timed calls after {args.warmup} warm-up calls "
        f"(3 calls, marked *, when a warm-up call exceeds {args.cap_s:g} s); "
        "ratio = anchor ms / crfhead ms (> 1: crfhead faster); "
        "MiB = peak extra memory of one call",
        f"† = other processes used more than {CONTENDED_CORES:g} cores on average while the cell "
        "ran: its time is not trustworthy",
    ]


def fmt_ms(m: Measurement) -> str:
    if m.skipped:
        return "skipped"
    if m.unsupported:
        return "—"
    if m.ms is None:
        return "error"
    return f"{m.ms:.2f}{'*' if m.capped else ''}{'†' if contended(m) else ''}"


def contended(m: Measurement) -> bool:
    return m.others_cores is not None and m.others_cores > CONTENDED_CORES


def fmt_ratio(anchor: Measurement, ours: Measurement) -> str:
    if anchor.ms is None or ours.ms is None or ours.ms <= 0:
        return fmt_ms(anchor) if anchor.ms is None else "—"
    return f"{anchor.ms / ours.ms:.2f}{'†' if contended(anchor) or contended(ours) else ''}"


def fmt_mib(m: Measurement) -> str:
    if m.ms is None:
        return fmt_ms(m)
    return "n/a" if m.mib is None else f"{m.mib:.1f}"


def op_table(
    op: str,
    cases: list[Case],
    results: list[dict[tuple[str, str], Measurement]],
) -> tuple[list[str], list[list[str]]]:
    head = ["B", "T", "K", "lengths"]
    head += [f"{lib} ms" for lib in LIBS]
    head += [f"{a} / crfhead" for a in (*ANCHORS, "crfhead-portable")]
    head += [f"{lib} MiB" for lib in LIBS]
    rows = []
    for case, res in zip(cases, results, strict=True):
        row = [str(case.B), str(case.T), str(case.K), "var" if case.variable else "full"]
        row += [fmt_ms(res[lib, op]) for lib in LIBS]
        row += [fmt_ratio(res[a, op], res["crfhead", op]) for a in (*ANCHORS, "crfhead-portable")]
        row += [fmt_mib(res[lib, op]) for lib in LIBS]
        rows.append(row)
    return head, rows


def agreement_table(
    cases: list[Case], agreements: list[Agreement]
) -> tuple[list[str], list[list[str]]]:
    head = [
        "B",
        "T",
        "K",
        "lengths",
        "llh rel (pytorch-crf)",
        "grad abs (pytorch-crf)",
        "paths = (pytorch-crf)",
        "log Z rel (torch-struct)",
        "NLL rel (torch-struct)",
        "grad abs (torch-struct)",
        "marginals abs (torch-struct)",
        "paths = (torch-struct)",
        "status",
    ]

    def num(x: float | None) -> str:
        return "—" if x is None else f"{x:.1e}"

    rows = []
    for case, a in zip(cases, agreements, strict=True):
        rows.append(
            [
                str(case.B),
                str(case.T),
                str(case.K),
                "var" if case.variable else "full",
                num(a.llh_rel),
                num(a.grad_abs),
                a.paths_torchcrf or "—",
                num(a.logz_rel),
                num(a.struct_nll_rel),
                num(a.struct_grad_abs),
                num(a.marg_abs),
                a.paths_struct or "—",
                "**DISAGREE**" if a.problems else "ok",
            ]
        )
    return head, rows


def render(head: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" for _ in head) + "|"]
        return lines + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    return lines + ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]


def report(
    device: torch.device,
    args: argparse.Namespace,
    cases: list[Case],
    results: list[dict[tuple[str, str], Measurement]],
    agreements: list[Agreement],
    elapsed_s: float,
) -> str:
    md = args.markdown
    lines = ["# crfhead CRF vs pytorch-crf vs torch-struct", ""] if md else []
    lines += [f"- {h}" if md else h for h in header_lines(device, args, elapsed_s)]
    titles = {
        "loss": "loss: NLL forward + backward (grads of emissions and CRF parameters)",
        "decode": "decode: Viterbi paths",
        "marginals": "marginals: node marginals (pytorch-crf has none)",
    }
    for op in OPS:
        lines += ["", f"## {titles[op]}" if md else f"== {titles[op]}", ""]
        lines += render(*op_table(op, cases, results), md)
    lines += [
        "",
        "## agreement (max errors; paths: identical / total)" if md else "== agreement",
        "",
    ]
    lines += render(*agreement_table(cases, agreements), md)
    problems = [(c, p) for c, a in zip(cases, agreements, strict=True) for p in a.problems]
    errors = [
        (c, lib, op, m.error)
        for c, res in zip(cases, results, strict=True)
        for (lib, op), m in res.items()
        if m.error
    ]
    if problems or errors:
        lines += [""]
        lines += [f"- **DISAGREEMENT** {c.label}: {p}" for c, p in problems]
        lines += [f"- **ERROR** {c.label} {lib} {op}: {e}" for c, lib, op, e in errors]
    else:
        lines += ["", "All libraries agree on every case."]
    lines += ["", f"Total run time: {elapsed_s:.0f} s."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark crfhead's CRF against pytorch-crf and torch-struct."
    )
    parser.add_argument(
        "--sizes", nargs="+", type=parse_size, default=DEFAULT_SIZES, metavar="B,T,K"
    )
    parser.add_argument("--lengths", choices=["full", "var", "both"], default="both")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per cell (median)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed warm-up calls per cell")
    parser.add_argument("--cap-s", type=float, default=3.0, help="slow warm-up: only 3 timed calls")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--skip-struct", action="store_true", help="leave torch-struct out")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory calls")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    parser.add_argument(
        "--backend",
        default="auto",
        help="crfhead's backend for the 'crfhead' column (auto, cpu, ...)",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.warmup < 1:
        parser.error("--repeats and --warmup must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available")
    device = torch.device(args.device)
    os.environ["CRFHEAD_BACKEND"] = args.backend
    args.backend_used = resolve(device, args.backend)
    libs: tuple[str, ...] = LIBS
    if args.skip_struct:
        libs = ("crfhead", "crfhead-portable", "pytorch-crf")
    elif torch_struct is None:
        parser.error(
            "torch-struct is missing: pip install --no-deps torch-struct==0.5 or --skip-struct"
        )
    regimes = {"full": [False], "var": [True], "both": [False, True]}[args.lengths]
    cases = [Case(B, T, K, v) for B, T, K in args.sizes for v in regimes]

    args.load_at_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    args.busy_at_start = busy_cpu_seconds()
    args.cpu_at_start = time.process_time()
    started = time.perf_counter()
    results, agreements = [], []
    for i, case in enumerate(cases):
        print(f"[{i + 1}/{len(cases)}] {case.label}", file=sys.stderr, flush=True)
        res, agr = run_case(case, device, libs, args)
        results.append(res)
        agreements.append(agr)
        gc.collect()
    elapsed = time.perf_counter() - started
    print(report(device, args, cases, results, agreements, elapsed))
    print(f"done in {elapsed:.0f} s", file=sys.stderr)
    return 1 if any(a.problems for a in agreements) else 0


if __name__ == "__main__":
    sys.exit(main())
