# mypy: disable-error-code="untyped-decorator"
"""Triton kernels of the chain dynamic programs (imported by :mod:`crfhead.engine.backends.triton` on first use).

One program per sequence; the program loops over time with the ``K``-vector state in registers and the
``K x K`` transition tile in registers (shared transitions) or loaded per edge (per-position ones),
so an operation is one launch instead of one per time step. Recursions run in log space (``K^2`` exps
per step: cheap on a GPU's special-function units) in the dtype of the inputs (float32 or float64).
Masks with holes: a masked position leaves the state unchanged, the next unmasked one links to the
previous unmasked one.

Forbidden scores are ``-inf`` and no score is clamped; padding lanes (``k >= K``) hold ``-inf`` too.
Every log-sum-exp and renormalisation shifts by a max that is replaced by 0 where it is ``-inf`` (so an
all-``-inf`` vector gives exactly ``-inf``, never ``-inf - (-inf)``), logs are taken of guarded sums
and every normalising division guards a zero sum: a row with no valid path gets ``log Z = -inf`` and
marginals exactly 0, its Viterbi score ``-inf`` and path ``-1``.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = [
    "forward_backward_kernel",
    "max_marginals_kernel",
    "sample_kernel",
    "topk_kernel",
    "viterbi_kernel",
]

NEG: tl.constexpr = tl.constexpr(float("-inf"))
"""Padding lanes and forbidden scores: ``exp(NEG) = 0`` and ``NEG`` never wins a max."""
EXP_FLOOR: tl.constexpr = tl.constexpr(-87.0)
"""``crfhead.numerics.EXP_FLOOR``: exponents below it give exactly 0."""


@triton.jit
def _vec(flag, BLOCK_K: tl.constexpr):  # type: ignore[no-untyped-def]
    """A scalar flag broadcast to a ``(BLOCK_K,)`` bool vector (masks must not mix ranks)."""
    return (tl.zeros([BLOCK_K], dtype=tl.int32) + flag) > 0


@triton.jit
def _tile(flag, BLOCK_K: tl.constexpr):  # type: ignore[no-untyped-def]
    """A scalar flag broadcast to a ``(BLOCK_K, BLOCK_K)`` bool tile."""
    return (tl.zeros([BLOCK_K, BLOCK_K], dtype=tl.int32) + flag) > 0


@triton.jit
def _block(flag, M: tl.constexpr, N: tl.constexpr):  # type: ignore[no-untyped-def]
    """A scalar flag broadcast to an ``(M, N)`` bool tile."""
    return (tl.zeros([M, N], dtype=tl.int32) + flag) > 0


@triton.jit
def _safe(m):  # type: ignore[no-untyped-def]
    """A max to shift by: ``m``, or 0 where ``m`` is ``-inf`` (so ``x - m`` is never ``-inf - (-inf)``)."""
    return tl.where(m == NEG, 0.0, m)


@triton.jit
def _log(s):  # type: ignore[no-untyped-def]
    """``log s`` of a sum of exps ``s >= 0``: exactly ``-inf`` where ``s == 0`` (no ``log 0`` taken)."""
    return tl.where(s > 0.0, tl.log(tl.where(s > 0.0, s, 1.0)), NEG)


@triton.jit
def _divide(p, z):  # type: ignore[no-untyped-def]
    """``p / z`` for a sum ``z >= 0`` of ``p >= 0``: all 0 where ``z == 0`` (no ``0 / 0``)."""
    pos = z > 0.0
    return tl.where(pos, p / tl.where(pos, z, 1.0), 0.0)


@triton.jit
def _lse_over_rows(x):  # type: ignore[no-untyped-def]
    """``log sum_j exp(x[j, k])``: ``(BJ, BK) -> (BK,)``; ``-inf`` for an all-``-inf`` column."""
    m = _safe(tl.max(x, axis=0))
    return m + _log(tl.sum(tl.exp(x - m[None, :]), axis=0))


@triton.jit
def _lse_over_cols(x):  # type: ignore[no-untyped-def]
    """``log sum_k exp(x[j, k])``: ``(BJ, BK) -> (BJ,)``; ``-inf`` for an all-``-inf`` row."""
    m = _safe(tl.max(x, axis=1))
    return m + _log(tl.sum(tl.exp(x - m[:, None]), axis=1))


@triton.jit
def _lse(x):  # type: ignore[no-untyped-def]
    """``log sum_k exp(x[k])``: ``(BK,) -> ()``; ``-inf`` for an all-``-inf`` vector."""
    m = _safe(tl.max(x, axis=0))
    return m + _log(tl.sum(tl.exp(x - m), axis=0))


@triton.jit
def _load_ends(st_ptr, en_ptr, tr_ptr, K, PER_POSITION: tl.constexpr, BLOCK_K: tl.constexpr):  # type: ignore[no-untyped-def]
    """``start``, ``end`` ``(BLOCK_K,)`` and the shared transition tile (all ``NEG`` when per edge)."""
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
    edge_ptr,  # (B, K, K) summed or (B, T-1, K, K) per edge, zero-initialised
    first_ptr,  # (B, K)
    last_ptr,  # (B, K)
    T,
    K,
    PER_POSITION: tl.constexpr,
    WANT_NODE: tl.constexpr,
    WANT_EDGE: tl.constexpr,
    EDGE_PER_STEP: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """One sequence's forward-backward: ``log Z``, node/edge/first/last marginals as asked.

    ``EDGE_PER_STEP``: the edge marginals are stored per edge ``(B, T-1, K, K)`` (entry ``t-1`` the
    edge entering ``t``), whether the transitions are shared or not; otherwise they are summed over
    the edges ``(B, K, K)`` (the gradient of shared transitions).
    """
    b = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_K)
    kin = offs < K
    rows = offs[:, None]
    cols = offs[None, :]
    tile_in = (rows < K) & (cols < K)
    start, end, shared = _load_ends(st_ptr, en_ptr, tr_ptr, K, PER_POSITION, BLOCK_K)
    zero = tl.zeros([BLOCK_K], dtype=start.dtype)  # (not start * 0.0: -inf * 0 is NaN)
    alpha = zero + NEG
    shift = tl.sum(zero, axis=0)  # the log-normalisers taken out of alpha
    started = 0
    # ---------------------------------------------------------------- forward
    for t in range(0, T):
        on = tl.load(mask_ptr + b * T + t) != 0
        e = tl.load(em_ptr + (b * T + t) * K + offs, mask=kin & _vec(on, BLOCK_K), other=NEG)
        tr = _edge_tile(tr_ptr, shared, b, t, T, K, t > 0, PER_POSITION, BLOCK_K)
        step = _lse_over_rows(alpha[:, None] + tr) + e
        new = tl.where(started > 0, step, start + e)
        top = _safe(tl.max(tl.where(kin, new, NEG), axis=0))  # renormalise: states stay O(1)
        alpha = tl.where(on & kin, new - top, alpha)
        shift += tl.where(on, top, 0.0)
        started = started | on.to(tl.int32)
        tl.store(alpha_ptr + (b * T + t) * K + offs, alpha, mask=kin)
    logz = shift + _lse(tl.where(kin, alpha + end, NEG))  # -inf: no valid path
    logz = tl.where(started > 0, logz, 0.0)
    tl.store(logz_ptr + b, logz)
    if WANT_NODE:
        # ------------------------------------------------------------ backward
        nb = zero  # em[t'] + beta[t'] of the next unmasked position t'
        nxt = 0
        have_next = 0
        acc = tl.zeros([BLOCK_K, BLOCK_K], dtype=start.dtype)
        g_first = zero
        g_last = zero
        for i in range(0, T):
            t = T - 1 - i
            on = tl.load(mask_ptr + b * T + t) != 0
            a = tl.load(alpha_ptr + (b * T + t) * K + offs, mask=kin, other=NEG)
            tr = _edge_tile(tr_ptr, shared, b, nxt, T, K, have_next > 0, PER_POSITION, BLOCK_K)
            link = tr + nb[None, :]  # (j, k): edge into t' plus what follows it
            beta = tl.where(have_next > 0, _lse_over_cols(link), end)
            beta = tl.where(kin, beta, NEG)
            beta = beta - _safe(tl.max(beta, axis=0))  # shift-free marginals below
            s = tl.where(kin, a + beta, NEG)  # -inf everywhere: no valid path, g = 0
            p = tl.exp(s - _safe(tl.max(s, axis=0)))
            g = _divide(p, tl.sum(p, axis=0))
            tl.store(node_ptr + (b * T + t) * K + offs, g, mask=kin & _vec(on, BLOCK_K))
            g_first = tl.where(on, g, g_first)
            g_last = tl.where(on & (have_next == 0), g, g_last)
            if WANT_EDGE:
                x = tl.where(tile_in, a[:, None] + link, NEG)
                xm = _safe(tl.max(tl.max(x, axis=1), axis=0))
                px = tl.exp(x - xm)
                xi = _divide(px, tl.sum(tl.sum(px, axis=1), axis=0))
                use = on & (have_next > 0)
                if EDGE_PER_STEP:
                    tl.store(
                        edge_ptr + ((b * (T - 1) + nxt - 1) * K) * K + rows * K + cols,
                        xi,
                        mask=tile_in & _tile(use, BLOCK_K),
                    )
                else:
                    acc += tl.where(use, xi, 0.0)
            e = tl.load(em_ptr + (b * T + t) * K + offs, mask=kin & _vec(on, BLOCK_K), other=NEG)
            nb = tl.where(on, e + beta, nb)
            nxt = tl.where(on, t, nxt)
            have_next = have_next | on.to(tl.int32)
        tl.store(first_ptr + b * K + offs, g_first, mask=kin)
        tl.store(last_ptr + b * K + offs, g_last, mask=kin)
        if WANT_EDGE and not EDGE_PER_STEP:
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
    """One sequence's Viterbi: the best score and path (ties to the lowest tag).

    No valid path (best final score ``-inf``): score ``-inf``, path ``-1`` at every position (the
    path buffer's initial value is left alone).
    """
    b = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_K)
    kin = offs < K
    start, end, shared = _load_ends(st_ptr, en_ptr, tr_ptr, K, PER_POSITION, BLOCK_K)
    delta = tl.zeros([BLOCK_K], dtype=start.dtype) + NEG
    started = 0
    for t in range(0, T):
        on = tl.load(mask_ptr + b * T + t) != 0
        e = tl.load(em_ptr + (b * T + t) * K + offs, mask=kin & _vec(on, BLOCK_K), other=NEG)
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
    found = score > NEG  # some valid path (False for an empty row too: its path stays -1)
    nxt = 0
    have_next = 0
    for i in range(0, T):
        t = T - 1 - i
        on = tl.load(mask_ptr + b * T + t) != 0
        follow = on & (have_next > 0)
        cand = tl.load(bp_ptr + (b * T + nxt) * K + cur, mask=follow, other=0)
        cur = tl.where(follow, cand, cur)
        tl.store(path_ptr + b * T + t, cur.to(tl.int64), mask=on & found)
        nxt = tl.where(on, t, nxt)
        have_next = have_next | on.to(tl.int32)


@triton.jit
def max_marginals_kernel(  # type: ignore[no-untyped-def]
    em_ptr,  # (B, T, K)
    tr_ptr,  # (K, K) or (B, T-1, K, K)
    st_ptr,  # (K,)
    en_ptr,  # (K,)
    mask_ptr,  # (B, T) uint8
    delta_ptr,  # (B, T, K) scratch: the normalised max-sum forward states
    out_ptr,  # (B, T, K), zero-initialised
    T,
    K,
    PER_POSITION: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """One sequence's max-marginals ``max_{z: z_t = k} p(z | x)`` (``scan.max_marginals``).

    One forward pass carries both the log-sum (for ``log Z``) and the max-sum states, a backward pass
    the max-sum ``beta``; each position is shifted so that its best entry is ``log p(best path)``,
    with ``best - log Z`` clamped at 0. Exponents below ``EXP_FLOOR`` give exactly 0; a row with no
    valid path gives 0 everywhere, masked positions stay 0.
    """
    b = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_K)
    kin = offs < K
    start, end, shared = _load_ends(st_ptr, en_ptr, tr_ptr, K, PER_POSITION, BLOCK_K)
    zero = tl.zeros([BLOCK_K], dtype=start.dtype)
    alpha = zero + NEG
    delta = zero + NEG
    shift = tl.sum(zero, axis=0)
    shift_max = tl.sum(zero, axis=0)
    started = 0
    for t in range(0, T):
        on = tl.load(mask_ptr + b * T + t) != 0
        e = tl.load(em_ptr + (b * T + t) * K + offs, mask=kin & _vec(on, BLOCK_K), other=NEG)
        tr = _edge_tile(tr_ptr, shared, b, t, T, K, t > 0, PER_POSITION, BLOCK_K)
        new = tl.where(started > 0, _lse_over_rows(alpha[:, None] + tr) + e, start + e)
        top = _safe(tl.max(tl.where(kin, new, NEG), axis=0))
        alpha = tl.where(on & kin, new - top, alpha)
        shift += tl.where(on, top, 0.0)
        newm = tl.where(started > 0, tl.max(delta[:, None] + tr, axis=0) + e, start + e)
        topm = _safe(tl.max(tl.where(kin, newm, NEG), axis=0))
        delta = tl.where(on & kin, newm - topm, delta)
        shift_max += tl.where(on, topm, 0.0)
        started = started | on.to(tl.int32)
        tl.store(delta_ptr + (b * T + t) * K + offs, delta, mask=kin)
    logz = shift + _lse(tl.where(kin, alpha + end, NEG))
    best = shift_max + tl.max(tl.where(kin, delta + end, NEG), axis=0)
    found = best > NEG
    log_best = tl.where(found, tl.minimum(best - tl.where(found, logz, 0.0), 0.0), NEG)
    nb = zero  # em[t'] + beta[t'] of the next unmasked position t'
    nxt = 0
    have_next = 0
    for i in range(0, T):
        t = T - 1 - i
        on = tl.load(mask_ptr + b * T + t) != 0
        d = tl.load(delta_ptr + (b * T + t) * K + offs, mask=kin, other=NEG)
        tr = _edge_tile(tr_ptr, shared, b, nxt, T, K, have_next > 0, PER_POSITION, BLOCK_K)
        beta = tl.where(have_next > 0, tl.max(tr + nb[None, :], axis=1), end)
        beta = tl.where(kin, beta, NEG)
        beta = beta - _safe(tl.max(beta, axis=0))
        both = tl.where(kin, d + beta, NEG)
        log_mu = both - _safe(tl.max(both, axis=0)) + log_best
        mu = tl.where(log_mu < EXP_FLOOR, 0.0, tl.exp(tl.maximum(log_mu, EXP_FLOOR)))
        tl.store(out_ptr + (b * T + t) * K + offs, mu, mask=kin & _vec(on, BLOCK_K))
        e = tl.load(em_ptr + (b * T + t) * K + offs, mask=kin & _vec(on, BLOCK_K), other=NEG)
        nb = tl.where(on, e + beta, nb)
        nxt = tl.where(on, t, nxt)
        have_next = have_next | on.to(tl.int32)


@triton.jit
def topk_kernel(  # type: ignore[no-untyped-def]
    em_ptr,  # (B, T, K)
    tr_ptr,  # (K, K) or (B, T-1, K, K)
    st_ptr,  # (K,)
    en_ptr,  # (K,)
    mask_ptr,  # (B, T) uint8
    val_ptr,  # (B, T, R, K) scratch: the R best prefix scores of each tag
    bp_ptr,  # (B, T, R, K) int32 scratch: previous tag * BLOCK_R + previous rank
    score_ptr,  # (B, R)
    path_ptr,  # (B, R, T) int64, -1-initialised
    T,
    K,
    R,
    PER_POSITION: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_J: tl.constexpr,
):
    """One sequence's ``R`` best paths, best first: the R-max recursion with back-pointers.

    The state is the ``(R, K)`` tile of each tag's ``R`` best prefix scores, in decreasing order. A step
    takes the next tags ``BLOCK_J`` at a time: the ``(R, K, BLOCK_J)`` candidates ``val[r, p] +
    tr[p, j]`` give up their best ``R`` one by one, ties to the lowest previous tag ``p``, then the
    lower rank (the order of the CPU kernel's merge), and the emission is added after. Ranks no path
    fills score ``-inf`` and keep their all ``-1`` path; an empty row scores 0 at rank 0.
    """
    b = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_K)
    kin = offs < K
    ranks = tl.arange(0, BLOCK_R)
    rin = ranks < R
    jj = tl.arange(0, BLOCK_J)
    rows = offs[:, None]
    end = tl.load(en_ptr + offs, mask=kin, other=NEG)
    val = tl.zeros([BLOCK_R, BLOCK_K], dtype=end.dtype) + NEG
    flat = offs[None, :] * BLOCK_R + ranks[:, None]  # (R, K): the tie order
    flat3 = flat[:, :, None]
    BIG: tl.constexpr = BLOCK_K * BLOCK_R
    first_rank = ranks[:, None] == 0
    started = 0
    for t in range(0, T):
        on = tl.load(mask_ptr + b * T + t) != 0
        if on:
            row = (b * T + t) * R + ranks[:, None]
            for j0 in range(0, K, BLOCK_J):
                cj = j0 + jj
                jin = cj < K
                if PER_POSITION:
                    trc = tl.load(
                        tr_ptr + ((b * (T - 1) + t - 1) * K) * K + rows * K + cj[None, :],
                        mask=(rows < K) & jin[None, :] & _block(t > 0, BLOCK_K, BLOCK_J),
                        other=NEG,
                    )
                else:
                    trc = tl.load(
                        tr_ptr + rows * K + cj[None, :], mask=(rows < K) & jin[None, :], other=NEG
                    )
                e = tl.load(em_ptr + (b * T + t) * K + cj, mask=jin, other=NEG)
                x = val[:, :, None] + trc[None, :, :]  # (R, K, J)
                new = tl.zeros([BLOCK_R, BLOCK_J], dtype=end.dtype) + NEG
                ptr = tl.zeros([BLOCK_R, BLOCK_J], dtype=tl.int32)
                for q in range(0, R):
                    m = tl.max(tl.max(x, axis=0), axis=0)  # (J,)
                    idx = tl.min(
                        tl.min(tl.where(x == m[None, None, :], flat3, BIG), axis=0), axis=0
                    )
                    new = tl.where(ranks[:, None] == q, m[None, :], new)
                    ptr = tl.where(ranks[:, None] == q, idx[None, :], ptr)
                    x = tl.where(flat3 == idx[None, None, :], NEG, x)
                s = tl.load(st_ptr + cj, mask=jin, other=NEG)
                init = tl.where(first_rank, (s + e)[None, :], NEG)
                new = tl.where(started > 0, new + e[None, :], init)
                put = rin[:, None] & jin[None, :]
                tl.store(val_ptr + row * K + cj[None, :], new, mask=put)
                tl.store(bp_ptr + row * K + cj[None, :], ptr.to(tl.int32), mask=put)
            tl.debug_barrier()  # the chunks' stores are seen by every thread of the program
            val = tl.load(
                val_ptr + row * K + offs[None, :], mask=rin[:, None] & kin[None, :], other=NEG
            )
            started = 1
    fin = tl.where(rin[:, None] & kin[None, :], val + end[None, :], NEG)
    tag = tl.zeros([BLOCK_R], dtype=tl.int32)
    rank = tl.zeros([BLOCK_R], dtype=tl.int32)
    found = ranks < 0
    for q in range(0, R):
        m = tl.max(tl.max(fin, axis=1), axis=0)
        idx = tl.min(tl.min(tl.where(fin == m, flat, BIG), axis=1), axis=0)
        score = tl.where(started > 0, m, tl.where(q == 0, 0.0, NEG))
        tl.store(score_ptr + b * R + q, score)
        here = ranks == q
        tag = tl.where(here, idx // BLOCK_R, tag)
        rank = tl.where(here, idx % BLOCK_R, rank)
        found = found | (here & _vec(score > NEG, BLOCK_R))
        fin = tl.where(flat == idx, NEG, fin)
    live = found & rin
    nxt = 0
    have_next = 0
    for i in range(0, T):
        t = T - 1 - i
        on = tl.load(mask_ptr + b * T + t) != 0
        follow = live & _vec(on & (have_next > 0), BLOCK_R)
        f = tl.load(bp_ptr + ((b * T + nxt) * R + rank) * K + tag, mask=follow, other=0)
        tag = tl.where(follow, f // BLOCK_R, tag)
        rank = tl.where(follow, f % BLOCK_R, rank)
        tl.store(
            path_ptr + (b * R + ranks) * T + t, tag.to(tl.int64), mask=live & _vec(on, BLOCK_R)
        )
        nxt = tl.where(on, t, nxt)
        have_next = have_next | on.to(tl.int32)


@triton.jit
def sample_kernel(  # type: ignore[no-untyped-def]
    tr_ptr,  # (K, K) or (B, T-1, K, K)
    en_ptr,  # (K,)
    mask_ptr,  # (B, T) uint8
    alpha_ptr,  # (B, T, K): the forward states (carried over masked positions), each shifted
    logz_ptr,  # (B,)
    u_ptr,  # (S, B, T) uniforms in [0, 1)
    path_ptr,  # (S, B, T) int64, -1-initialised
    S,
    B,
    T,
    K,
    PER_POSITION: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    """``BLOCK_S`` exact samples of one sequence by backward sampling (program ``(b, block of s)``).

    The last unmasked tag is drawn from ``alpha_T + end``, each earlier one from ``alpha_t(i) +
    tr[i, z_next]``, by inverting the cumulative sum at the uniform: the first tag whose cumulative
    probability exceeds ``u * total``, never a tag of probability 0. A row with no valid path keeps
    its all ``-1`` paths.
    """
    b = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1).to(tl.int64) * BLOCK_S + tl.arange(0, BLOCK_S)
    sin = s < S
    offs = tl.arange(0, BLOCK_K)
    kin = offs < K
    found = tl.load(logz_ptr + b) > NEG
    end = tl.load(en_ptr + offs, mask=kin, other=NEG)
    z = tl.zeros([BLOCK_S], dtype=tl.int64)
    nxt = 0
    have_next = 0
    for i in range(0, T):
        t = T - 1 - i
        on = tl.load(mask_ptr + b * T + t) != 0
        if on & found:
            a = tl.load(alpha_ptr + (b * T + t) * K + offs, mask=kin, other=NEG)
            if have_next > 0:
                into = z[:, None] + offs[None, :] * K  # tr[i, z]: (S, K)
                if PER_POSITION:
                    into += (b * (T - 1) + nxt - 1) * K * K
                tr = tl.load(tr_ptr + into, mask=sin[:, None] & kin[None, :], other=NEG)
                logits = a[None, :] + tr
            else:
                logits = tl.zeros([BLOCK_S, BLOCK_K], dtype=a.dtype) + (a + end)[None, :]
            logits = tl.where(kin[None, :], logits, NEG)
            top = _safe(tl.max(logits, axis=1))
            p = tl.exp(logits - top[:, None])
            cdf = tl.cumsum(p, axis=1)
            u = tl.load(u_ptr + (s * B + b) * T + t, mask=sin, other=0.0)
            below = tl.sum((cdf <= (u * tl.max(cdf, axis=1))[:, None]).to(tl.int64), axis=1)
            last = tl.max(tl.where(p > 0.0, offs[None, :], 0), axis=1).to(tl.int64)
            z = tl.minimum(below, last)
            tl.store(path_ptr + (s * B + b) * T + t, z, mask=sin)
            nxt = t
            have_next = 1
