"""The cpu backend's ops on the raw :data:`~crfhead.engine.potentials.Chain`: outputs, threads, one native call.

Each function allocates its outputs, chooses its thread count (:mod:`~crfhead.engine.backends.cpu.threads`)
and calls one generated entry point (:mod:`~crfhead.engine.backends.cpu.abi`). The ``*_parts``
functions return tensors only (a part not asked for is an empty ``(0,)`` tensor, as the dispatcher
ops of :mod:`~crfhead.engine.backends.cpu.dispatcher` return it). The others are the backend's kernels
as the op table (:mod:`crfhead.engine.table`) calls them; none carries autograd history.

Semantics are the portable engine's: masks with holes, empty rows, shared or per-edge transitions,
start/end, float32/float64, ``-inf`` forbidden and excluded exactly at any score scale (a sequence
whose scaled arithmetic may have lost mass is recomputed in log space).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import Tensor

from crfhead.engine import scan
from crfhead.engine.backends.cpu import native
from crfhead.engine.backends.cpu.threads import for_call, serial_torch
from crfhead.engine.potentials import Chain, ChainPotentials
from crfhead.engine.scan import Moments

__all__ = [
    "edge_marginals",
    "edge_parts",
    "entropy",
    "fb_parts",
    "glue",
    "log_partition",
    "marginals",
    "max_marginals",
    "max_sums",
    "nll",
    "nll_parts",
    "part_shapes",
    "sample",
    "scale_grads",
    "topk",
    "viterbi",
]

Parts5 = tuple[Tensor, Tensor, Tensor, Tensor, Tensor]
Parts6 = tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]
Grads = tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]


def _c(x: Tensor, dtype: torch.dtype) -> Tensor:
    """``x`` as a contiguous tensor of ``dtype`` (no copy when it already is one)."""
    if x.dtype != dtype:
        x = x.to(dtype)
    return x if x.is_contiguous() else x.contiguous()


def _contiguous(chain: Chain) -> Chain:
    """The chain as the kernel reads it: contiguous, in the emissions' dtype, the mask bool.

    The chain itself when it already is (no torch operation runs then); conversions run in a serial
    section below 4M values (see :func:`glue`).
    """
    em, trans, start, end, mask = chain
    dtype = em.dtype
    if (
        trans.dtype == dtype
        and start.dtype == dtype
        and end.dtype == dtype
        and mask.dtype == torch.bool
        and em.is_contiguous()
        and trans.is_contiguous()
        and start.is_contiguous()
        and end.is_contiguous()
        and mask.is_contiguous()
    ):
        return chain
    with serial_torch(em.numel() < 1 << 22):
        em, trans, start, end = (_c(x, dtype) for x in chain[:4])
        return em, trans, start, end, _c(mask, torch.bool)


def _threads(chain: Chain, per_sequence_work: int | None = None) -> int:
    """Threads for one call on ``chain``; ``per_sequence_work``: tasks are single sequences of that work."""
    em = chain[0]
    B, T, K = em.shape
    if per_sequence_work is None:
        return for_call(B, T, K, False, em.dtype)
    return for_call(B, per_sequence_work, 1, True, em.dtype)


def part_shapes(
    B: Any, T: Any, K: Any, per_position: bool, grads: bool, edges: bool
) -> tuple[tuple[Any, ...], ...]:
    """Shapes of ``(node, edge, first, last)``; ``(0,)`` for a part not asked for.

    Symbolic sizes welcome (the custom ops' fake implementations use it too).
    """
    none: tuple[Any, ...] = (0,)
    if not grads:
        return none, none, none, none
    edge = none
    if edges:
        edges_per_row = (
            max(T - 1, 0) if isinstance(T, int) else torch.sym_max(T - 1, 0)  # type: ignore[no-untyped-call]
        )
        edge = (B, edges_per_row, K, K) if per_position else (B, K, K)
    return (B, T, K), edge, (B, K), (B, K)


def _parts(chain: Chain, grads: bool, edges: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Uninitialised ``(node, edge, first, last)`` (empty ``(0,)`` when not asked for)."""
    B, T, K = chain[0].shape
    shapes = part_shapes(B, T, K, chain[1].dim() == 4, grads, edges)
    node, edge, first, last = (torch.empty(s, dtype=chain[0].dtype) for s in shapes)
    return node, edge, first, last


def _opt(x: Tensor) -> Tensor | None:
    """A part as :class:`Moments` holds it: ``None`` for the empty placeholder of one not asked for."""
    return None if x.dim() == 1 and x.shape[0] == 0 else x


def _moments(value: Tensor, parts: tuple[Tensor, ...]) -> Moments:
    node, edge, first, last = parts
    return Moments(value, _opt(node), _opt(edge), _opt(first), _opt(last))


def fb_parts(chain: Chain, marginals: bool, edges: bool) -> Parts5:
    """The native forward-backward: ``(log Z, node, edge, first, last)``."""
    threads = _threads(chain)
    keep = _contiguous(chain)
    value = torch.empty(keep[0].shape[0], dtype=keep[0].dtype)
    parts = _parts(keep, marginals or edges, edges)
    native.entries()["forward_backward"](keep, value, *parts, threads)
    return value, *parts


def _raise_bad_tag(tags: Tensor, index: int, K: int) -> None:
    b, t = divmod(index, tags.shape[1])
    raise ValueError(
        f"tag {int(tags[b, t])} at unmasked position (batch {b}, time {t}) is out of range [0, {K})"
    )


def nll_parts(chain: Chain, tags: Tensor, grads: bool, edges: bool) -> Parts6:
    """The native loss: ``(loss, gold, node, edge, first, last)``.

    Raises:
        ValueError: an unmasked tag outside ``[0, K)`` (checked by the kernel, before any work).
    """
    threads = _threads(chain)
    keep = _contiguous(chain)
    B, _, K = keep[0].shape
    value = torch.empty(B, dtype=keep[0].dtype)
    gold = torch.empty(B, dtype=keep[0].dtype)
    parts = _parts(keep, grads, edges)
    tags = _c(tags, torch.long)
    bad = native.entries()["nll_grad"](keep, tags, value, gold, *parts, threads)
    if bad >= 0:
        _raise_bad_tag(tags, bad, K)
    return value, gold, *parts


def log_partition(chain: Chain, *, grads: bool, edges: bool) -> tuple[Moments, Tensor]:
    """``log Z`` with its gradient's parts if ``grads`` (the transitions' if ``edges``); no second output."""
    value, *parts = fb_parts(chain, grads, grads and edges)
    return _moments(value, tuple(parts)), value.new_zeros(0)


def nll(chain: Chain, tags: Tensor, *, grads: bool, edges: bool) -> tuple[Moments, Tensor]:
    """The loss ``log Z - score(tags)`` with its gradient's parts if asked, and the gold score ``(B,)``."""
    value, gold, *parts = nll_parts(chain, tags, grads, edges)
    return _moments(value, tuple(parts)), gold


def scale_grads(grad: Tensor, m: Moments, per_position: bool, need: tuple[bool, ...]) -> Grads:
    """Gradients of ``sum_b grad[b] * m.value[b]`` to (emissions, transitions, start, end), natively."""
    node, edge, first, last = m.node, m.edge, m.first, m.last
    assert node is not None and first is not None and last is not None
    B, T, K = node.shape
    dtype = node.dtype
    tr_shape = (B, max(T - 1, 0), K, K) if per_position else (K, K)
    d_em = torch.empty(B, T, K, dtype=dtype) if need[0] else None
    d_tr = torch.empty(tr_shape, dtype=dtype) if need[1] and edge is not None else None
    d_start = torch.empty(K, dtype=dtype) if need[2] else None
    d_end = torch.empty(K, dtype=dtype) if need[3] else None
    native.entries()["scale_grads"](
        _c(grad, dtype), node, edge, first, last, B, T, K, int(per_position),
        d_em, d_tr, d_start, d_end,
    )  # fmt: skip
    return d_em, d_tr, d_start, d_end


def marginals(chain: Chain) -> Tensor:
    """Node marginals ``(B, T, K)``."""
    return fb_parts(chain, True, False)[1]


def viterbi(chain: Chain) -> tuple[Tensor, Tensor]:
    """Best scores ``(B,)`` and paths ``(B, T)`` int64 (``-1`` where masked); ties to the lowest tag."""
    threads = _threads(chain)
    keep = _contiguous(chain)
    B, T, _ = keep[0].shape
    scores = torch.empty(B, dtype=keep[0].dtype)  # the kernel writes every entry
    paths = torch.empty((B, T), dtype=torch.long)
    native.entries()["viterbi"](keep, scores, paths, threads)
    return scores, paths


def glue(chain: Chain) -> contextlib.AbstractContextManager[None]:
    """The context for torch's operations that combine this kernel's results on ``chain``.

    They run on one thread below 4M values a tensor (``B * T * K``), as the input checks do (see
    :func:`~crfhead.engine.backends.cpu.threads.serial_torch`: torch splits element-wise work over
    32K values across threads, and on a busy machine that join waits for a descheduled one).
    """
    return serial_torch(chain[0].numel() < 1 << 22)


def edge_parts(chain: Chain) -> tuple[Tensor, Tensor, Tensor]:
    """``log Z`` ``(B,)``, node ``(B, T, K)`` and per-edge marginals ``(B, T-1, K, K)``, any transitions."""
    threads = _threads(chain)
    keep = _contiguous(chain)
    B, T, K = keep[0].shape
    dtype = keep[0].dtype
    logz = torch.empty(B, dtype=dtype)
    node = torch.empty(B, T, K, dtype=dtype)
    edge = torch.empty(B, max(T - 1, 0), K, K, dtype=dtype)
    native.entries()["edge_marginals"](keep, logz, node, edge, threads)
    return logz, node, edge


def edge_marginals(chain: Chain) -> Tensor:
    """Edge marginals ``(B, T-1, K, K)`` (entry ``t-1``: the edge entering ``t``)."""
    return edge_parts(chain)[2]


def max_sums(chain: Chain) -> tuple[Tensor, Tensor]:
    """``(sums, best)``: the best score through each ``(t, k)`` ``(B, T, K)`` and the best score ``(B,)``.

    ``sums`` is ``-inf`` where no valid path passes or ``t`` is masked; ``best`` is 0 for an empty row.
    """
    threads = _threads(chain)
    keep = _contiguous(chain)
    B, T, K = keep[0].shape
    sums = torch.empty(B, T, K, dtype=keep[0].dtype)
    best = torch.empty(B, dtype=keep[0].dtype)
    native.entries()["max_sums"](keep, sums, best, threads)
    return sums, best


def _in_float64(chain: Chain) -> Chain:
    """The chain with its scores in float64 (the mask as it is).

    The max-marginals (``best - log Z``) and the entropy (``log Z - E[score]``) are differences of
    two numbers of the size of ``log Z``; in float32 they keep no digit once the scores pass about
    1e5 (a max-marginal of 54 or 1e-28 where the true one is 1, an entropy of -8). Their kernels run
    in float64 for float32 scores, the results rounded to float32 once at the end: these ops serve
    evaluation and confidence, where twice the time of a forward-backward buys exact values.
    """
    if chain[0].dtype == torch.float64:
        return chain
    em, tr, st, en, mask = chain
    return em.double(), tr.double(), st.double(), en.double(), mask


def max_marginals(chain: Chain) -> Tensor:
    """Max-marginals ``(B, T, K)``: the max-sums and ``log Z``, two native calls (in float64)."""
    wide = _in_float64(chain)
    both, best = max_sums(wide)
    log_z = fb_parts(wide, False, False)[0]
    with glue(chain):
        mu = scan.max_marginals_from(ChainPotentials(*wide), both, best, log_z)
        return mu.to(chain[0].dtype)


def entropy(chain: Chain) -> Tensor:
    """The entropy ``(B,)`` from one native forward-backward's marginals (in float64)."""
    wide = _in_float64(chain)
    m, _ = log_partition(wide, grads=True, edges=True)
    with glue(chain):
        return scan.entropy_from(ChainPotentials(*wide), m).to(chain[0].dtype)


def topk(chain: Chain, k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` best paths: scores ``(B, k)`` and paths ``(B, k, T)`` (missing: ``-inf``, ``-1``)."""
    B, T, K = chain[0].shape
    threads = _threads(chain, T * K * K * k)
    with serial_torch(threads == 1):
        keep = _contiguous(chain)
        scores = torch.empty(B, k, dtype=keep[0].dtype)
        paths = torch.empty(B, k, T, dtype=torch.long)
        native.entries()["topk"](keep, k, scores, paths, threads)
    return scores, paths


def sample(chain: Chain, num_samples: int, generator: torch.Generator | None) -> Tensor:
    """``(S, B, T)`` exact samples: the fused edge marginals, then one native pass of draws."""
    _, node, edge = edge_parts(chain)
    B, T, K = node.shape
    with glue(chain):
        u = torch.rand((num_samples, B, T), generator=generator, dtype=torch.float64)
    paths = torch.empty(num_samples, B, T, dtype=torch.long)
    mask = _c(chain[4], torch.bool).view(torch.uint8)
    threads = _threads(chain, num_samples * T * K)
    native.entries()["sample"](node, edge, mask, u, num_samples, B, T, K, paths, threads)
    return paths
