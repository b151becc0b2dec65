# mypy: disable-error-code="untyped-decorator"
"""Triton kernels of the chain dynamic programs (imported by :mod:`crfhead.backends.gpu` on first use).

One program per sequence; the program loops over time with the ``K``-vector state in registers and the
``K x K`` transition tile in registers (shared transitions) or loaded per edge (per-position ones),
so an operation is one launch instead of one per time step. Recursions run in log space (``K^2`` exps
per step: cheap on a GPU's special-function units) in the dtype of the inputs (float32 or float64).
Masks with holes: a masked position leaves the state unchanged, the next unmasked one links to the
previous unmasked one. Padding lanes (``k >= K``) hold ``NEG``, whose exp is 0.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["forward_backward_kernel", "viterbi_kernel"]

NEG = -1.0e30


@triton.jit
def _vec(flag, BLOCK_K: tl.constexpr):  # type: ignore[no-untyped-def]
    """A scalar flag broadcast to a ``(BLOCK_K,)`` bool vector (masks must not mix ranks)."""
    return (tl.zeros([BLOCK_K], dtype=tl.int32) + flag) > 0


@triton.jit
def _tile(flag, BLOCK_K: tl.constexpr):  # type: ignore[no-untyped-def]
    """A scalar flag broadcast to a ``(BLOCK_K, BLOCK_K)`` bool tile."""
    return (tl.zeros([BLOCK_K, BLOCK_K], dtype=tl.int32) + flag) > 0


@triton.jit
def _lse_over_rows(x):  # type: ignore[no-untyped-def]
    """``log sum_j exp(x[j, k])``: ``(BJ, BK) -> (BK,)``."""
    m = tl.max(x, axis=0)
    return m + tl.log(tl.sum(tl.exp(x - m[None, :]), axis=0))


@triton.jit
def _lse_over_cols(x):  # type: ignore[no-untyped-def]
    """``log sum_k exp(x[j, k])``: ``(BJ, BK) -> (BJ,)``."""
    m = tl.max(x, axis=1)
    return m + tl.log(tl.sum(tl.exp(x - m[:, None]), axis=1))


@triton.jit
def _load_ends(st_ptr, en_ptr, tr_ptr, K, PER_POSITION: tl.constexpr, BLOCK_K: tl.constexpr):  # type: ignore[no-untyped-def]
    """``start``, ``end`` ``(BLOCK_K,)`` and the shared transition tile (``NEG`` when per edge)."""
    offs = tl.arange(0, BLOCK_K)
    kin = offs < K
    rows = offs[:, None]
    cols = offs[None, :]
    start = tl.load(st_ptr + offs, mask=kin, other=NEG)
    end = tl.load(en_ptr + offs, mask=kin, other=NEG)
    if PER_POSITION:
        shared = tl.zeros([BLOCK_K, BLOCK_K], dtype=start.dtype) + NEG
    else:
        shared = tl.load(tr_ptr + rows * K + cols, mask=(rows < K) & (cols < K), other=NEG)
    return start, end, shared


@triton.jit
def _edge_tile(  # type: ignore[no-untyped-def]
    tr_ptr, shared, b, t, T, K, valid, PER_POSITION: tl.constexpr, BLOCK_K: tl.constexpr
):
    """The ``(BLOCK_K, BLOCK_K)`` transitions entering position ``t`` (``valid``: it has an edge)."""
    if PER_POSITION:
        offs = tl.arange(0, BLOCK_K)
        rows = offs[:, None]
        cols = offs[None, :]
        tr = tl.load(
            tr_ptr + ((b * (T - 1) + t - 1) * K) * K + rows * K + cols,
            mask=(rows < K) & (cols < K) & _tile(valid, BLOCK_K),
            other=NEG,
        )
    else:
        tr = shared
    return tr


@triton.jit
def forward_backward_kernel(  # type: ignore[no-untyped-def]
    em_ptr,  # (B, T, K)
    tr_ptr,  # (K, K) or (B, T-1, K, K)
    st_ptr,  # (K,)
    en_ptr,  # (K,)
    mask_ptr,  # (B, T) uint8
    alpha_ptr,  # (B, T, K) scratch
    logz_ptr,  # (B,)
    node_ptr,  # (B, T, K), zero-initialised
    edge_ptr,  # (B, K, K) or (B, T-1, K, K), zero-initialised
    first_ptr,  # (B, K)
    last_ptr,  # (B, K)
    T,
    K,
    PER_POSITION: tl.constexpr,
    WANT_NODE: tl.constexpr,
    WANT_EDGE: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """One sequence's forward-backward: ``log Z``, node/edge/first/last marginals as asked."""
    b = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_K)
    kin = offs < K
    rows = offs[:, None]
    cols = offs[None, :]
    tile_in = (rows < K) & (cols < K)
    start, end, shared = _load_ends(st_ptr, en_ptr, tr_ptr, K, PER_POSITION, BLOCK_K)
    alpha = start * 0.0 + NEG
    shift = tl.sum(start * 0.0, axis=0)  # the log-normalisers taken out of alpha
    started = 0
    # ---------------------------------------------------------------- forward
    for t in range(0, T):
        on = tl.load(mask_ptr + b * T + t) != 0
        e = tl.load(em_ptr + (b * T + t) * K + offs, mask=kin, other=NEG)
        tr = _edge_tile(tr_ptr, shared, b, t, T, K, t > 0, PER_POSITION, BLOCK_K)
        step = _lse_over_rows(alpha[:, None] + tr) + e
        new = tl.where(started > 0, step, start + e)
        top = tl.max(tl.where(kin, new, NEG), axis=0)  # renormalise: states stay O(1)
        alpha = tl.where(on & kin, new - top, alpha)
        shift += tl.where(on, top, 0.0)
        started = started | on.to(tl.int32)
        tl.store(alpha_ptr + (b * T + t) * K + offs, alpha, mask=kin)
    fin = alpha + end
    m = tl.max(fin, axis=0)
    logz = shift + m + tl.log(tl.sum(tl.exp(fin - m), axis=0))
    logz = tl.where(started > 0, logz, 0.0)
    tl.store(logz_ptr + b, logz)
    if WANT_NODE:
        # ------------------------------------------------------------ backward
        nb = start * 0.0  # em[t'] + beta[t'] of the next unmasked position t'
        nxt = 0
        have_next = 0
        acc = shared * 0.0
        g_first = start * 0.0
        g_last = start * 0.0
        for i in range(0, T):
            t = T - 1 - i
            on = tl.load(mask_ptr + b * T + t) != 0
            a = tl.load(alpha_ptr + (b * T + t) * K + offs, mask=kin, other=NEG)
            tr = _edge_tile(tr_ptr, shared, b, nxt, T, K, have_next > 0, PER_POSITION, BLOCK_K)
            link = tr + nb[None, :]  # (j, k): edge into t' plus what follows it
            beta = tl.where(have_next > 0, _lse_over_cols(link), end)
            beta = beta - tl.max(tl.where(kin, beta, NEG), axis=0)  # shift-free marginals below
            s = tl.where(kin, a + beta, NEG)
            smax = tl.max(s, axis=0)
            p = tl.exp(s - smax)
            g = p / tl.sum(p, axis=0)
            tl.store(node_ptr + (b * T + t) * K + offs, g, mask=kin & _vec(on, BLOCK_K))
            g_first = tl.where(on, g, g_first)
            g_last = tl.where(on & (have_next == 0), g, g_last)
            if WANT_EDGE:
                x = a[:, None] + link
                x = tl.where(tile_in, x, NEG)
                xm = tl.max(tl.max(x, axis=1), axis=0)
                px = tl.exp(x - xm)
                xi = px / tl.sum(tl.sum(px, axis=1), axis=0)
                use = on & (have_next > 0)
                if PER_POSITION:
                    tl.store(
                        edge_ptr + ((b * (T - 1) + nxt - 1) * K) * K + rows * K + cols,
                        xi,
                        mask=tile_in & _tile(use, BLOCK_K),
                    )
                else:
                    acc += tl.where(use, xi, 0.0)
            e = tl.load(em_ptr + (b * T + t) * K + offs, mask=kin, other=NEG)
            nb = tl.where(on, e + beta, nb)
            nxt = tl.where(on, t, nxt)
            have_next = have_next | on.to(tl.int32)
        tl.store(first_ptr + b * K + offs, g_first, mask=kin)
        tl.store(last_ptr + b * K + offs, g_last, mask=kin)
        if WANT_EDGE and not PER_POSITION:
            tl.store(edge_ptr + b * K * K + rows * K + cols, acc, mask=tile_in)


@triton.jit
def viterbi_kernel(  # type: ignore[no-untyped-def]
    em_ptr,  # (B, T, K)
    tr_ptr,  # (K, K) or (B, T-1, K, K)
    st_ptr,
    en_ptr,
    mask_ptr,  # (B, T) uint8
    bp_ptr,  # (B, T, K) int32 scratch
    score_ptr,  # (B,)
    path_ptr,  # (B, T) int64, -1-initialised
    T,
    K,
    PER_POSITION: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """One sequence's Viterbi: the best score and path (ties to the lowest tag)."""
    b = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_K)
    kin = offs < K
    start, end, shared = _load_ends(st_ptr, en_ptr, tr_ptr, K, PER_POSITION, BLOCK_K)
    delta = start * 0.0 + NEG
    started = 0
    for t in range(0, T):
        on = tl.load(mask_ptr + b * T + t) != 0
        e = tl.load(em_ptr + (b * T + t) * K + offs, mask=kin, other=NEG)
        tr = _edge_tile(tr_ptr, shared, b, t, T, K, t > 0, PER_POSITION, BLOCK_K)
        x = delta[:, None] + tr
        best = tl.max(x, axis=0)
        arg = tl.argmax(x, axis=0, tie_break_left=True)
        tl.store(bp_ptr + (b * T + t) * K + offs, arg.to(tl.int32), mask=kin & _vec(on, BLOCK_K))
        new = tl.where(started > 0, best + e, start + e)
        delta = tl.where(on & kin, new, delta)
        started = started | on.to(tl.int32)
    fin = tl.where(kin, delta + end, NEG)
    score = tl.max(fin, axis=0)
    cur = tl.argmax(fin, axis=0, tie_break_left=True).to(tl.int32)
    tl.store(score_ptr + b, tl.where(started > 0, score, 0.0))
    nxt = 0
    have_next = 0
    for i in range(0, T):
        t = T - 1 - i
        on = tl.load(mask_ptr + b * T + t) != 0
        follow = on & (have_next > 0)
        cand = tl.load(bp_ptr + (b * T + nxt) * K + cur, mask=follow, other=0)
        cur = tl.where(follow, cand, cur)
        tl.store(path_ptr + b * T + t, cur.to(tl.int64), mask=on)
        nxt = tl.where(on, t, nxt)
        have_next = have_next | on.to(tl.int32)
