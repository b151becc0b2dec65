"""The reparameterisation ψ of non-local patterns into a supermodular quadratic pseudo-Boolean form.

Qian & Liu (TACL 2014) put every non-chain factor of a higher-order CRF into one
slave solved by a minimum cut. With ``z_ik = 1[y_i = k]`` the patterns score
``g(z) = Σ_c s_c ∏_{(i,k)∈c} z_ik``, a multilinear polynomial of any sign; ψ (steps 1–5)
turns it into ``g̃(z, w)``, quadratic with non-negative
coefficients over ``z`` and auxiliary ``w``, such that ``max_w g̃(z(y), w) = g(y) + K`` for every
labelling ``y`` (one-hot ``z``):

1. Pairs. ``P_ij[k, l]`` sums the scores of the size-2 patterns ``{(i,k), (j,l)}`` and, for every
   *negative* pattern of size >= 3, its score on every pair of its cells.
   ``C_ij = max(0, -min P_ij)`` over all ``L × L`` entries, and ``P_ij + C_ij >= 0`` is the
   coefficient of ``z_ik z_jl`` (zeros dropped): on one-hot ``z`` exactly one ``(k, l)`` of the pair
   is on, so the shift adds exactly ``C_ij``, and ``K = Σ C_ij``. (Optional linear terms ``B_i`` are
   left out: they amount to a different starting ``θ``.)
2. A positive pattern of size ``n >= 3``: ``s ∏ z = max_w s·w·(Σz - n + 1)``: one ``w``,
   coefficient ``s`` on each ``(z_m, w)``, linear ``s(1 - n)`` on ``w``.
3. A negative pattern of size ``n >= 3``: with ``S = Σz``,
   ``s·[S = n] = s·S(S-1)/2 + (-s)·h(S)`` for ``h(S) = S(S-1)/2 - [S = n]``; the first part is its
   pairs in step 1, and ``h`` is a maximum of supermodular quadratics (Živný & Jeavons, *Classes of
   submodular constraints expressible by graph cuts*, Constraints 2010): for ``n = 3``
   ``h(S) = max(0, S - 1)``; for ``n >= 4``
   ``h(S) = max(0, 2S - 3) + Σ_{a=1}^{n-4} max(0, S - a - 2)``, each ``max(0, αS - β)`` one ``w``
   with coefficient ``α`` on each ``(z_m, w)`` and linear ``-β``.

Steps 2 and 3 are exact for every 0/1 ``z``; step 1 only for one-hot ``z`` on the pair's two tokens,
which is why *every* label of a coupled token is coupled, not only the labels patterns name.

**Chain edges.** A pair table ``P_ij`` between two tokens that are consecutive in one chain (the
size-2 patterns there, and the pairwise parts of negative patterns there) is a term of that chain's
transition at that position: the seed puts it in the tree slave, which maximises it exactly, instead
of relaxing it in the cut. With ``chain_edges`` given, such tables are returned unshifted in
``chain_tables`` and left out of ``pb`` (no ``C_ij``, no arcs); the identity then reads
``max_w pb(z(y), w) + Σ_e chain_tables[e][y_i, y_j] == g(y) + K``, and a token that keeps no term
in ``pb`` is not coupled at all.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from crfhead.higher_order.pseudo_boolean import QuadraticPB

__all__ = ["Reparameterised", "reparameterise", "reparameterise_arrays"]

TokenPattern = tuple[tuple[tuple[int, int], ...], float]


@dataclass(frozen=True, eq=False)
class Reparameterised:
    """The patterns of a group as a supermodular quadratic pseudo-Boolean function.

    The dual decomposition's pattern slave is ``P(θ) = max_x pb(x) - Σ_{v<V} θ_v x_v``: call
    ``maximize(pb.with_linear(linear))`` with ``linear = pb.linear.copy(); linear[:V] -= θ``
    (``pb.linear`` is the base: 0 on the ``z``'s, the auxiliaries' terms after them), and use
    ``P - constant`` in the dual.

    Attributes:
        coupled: ``(V, 2)`` int64, the ``(token, label)`` of each ``z``: every label ``0..L-1`` of
            every token a (non-zero) pattern touches, tokens ascending, labels ascending within a
            token; ``x[:V]`` are these ``z``'s in this order.
        pb: the function over ``x = (z_0..z_{V-1}, w_0, ...)``; its own constant is 0.
        constant: ``K``: for every one-hot assignment ``y`` of the coupled tokens,
            ``max_w pb(z(y), w) + Σ_e chain_tables[e][y_i, y_j] == g(y) + K``.
        chain_pairs: ``(E, 2)`` int64, the chain edges ``(i, j)`` (``i < j``) with a table moved
            to the chain (empty without ``chain_edges``).
        chain_tables: ``(E, L, L)`` float64, their tables ``P_ij[k, l]`` (label of ``i``, of ``j``).
    """

    coupled: np.ndarray
    pb: QuadraticPB
    constant: float
    chain_pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    chain_tables: np.ndarray = field(default_factory=lambda: np.zeros((0, 1, 1)))

    @functools.cached_property
    def index(self) -> dict[tuple[int, int], int]:
        """``(token, label) -> position`` in ``x``, for the ``V`` coupled pairs (built on first use)."""
        return {(int(t), int(k)): v for v, (t, k) in enumerate(self.coupled.tolist())}


def _checked(
    patterns: Sequence[TokenPattern], num_labels: int
) -> list[tuple[tuple[tuple[int, int], ...], float]]:
    """The non-zero patterns, with ints and floats; ``ValueError`` naming the first bad one."""
    out = []
    for index, pattern in enumerate(patterns):
        cells_in, score_in = pattern
        cells = tuple((int(token), int(label)) for token, label in cells_in)
        score = float(score_in)
        if not math.isfinite(score):
            raise ValueError(f"pattern {index} has a non-finite score {score}")
        if len(cells) < 2:
            raise ValueError(
                f"pattern {index} has {len(cells)} cell(s); size-1 patterns belong in the chain"
            )
        if len({token for token, _ in cells}) != len(cells):
            raise ValueError(f"pattern {index} has two cells on one token: {cells}")
        for token, label in cells:
            if token < 0 or not 0 <= label < num_labels:
                raise ValueError(
                    f"pattern {index} has cell {(token, label)}: tokens must be >= 0 and labels in "
                    f"[0, {num_labels})"
                )
        if score != 0.0:
            out.append((cells, score))
    return out


def reparameterise(
    patterns: Sequence[TokenPattern], num_labels: int, chain_edges: np.ndarray | None = None
) -> Reparameterised:
    """ψ of ``patterns`` (see the module docstring): ``max_w pb(z(y), w) == g(y) + constant``.

    Args:
        patterns: ``(((token, label), ...), score)`` each: at least two cells, on distinct tokens
            (integers >= 0), any finite score; repeated patterns add; zero scores are ignored.
        num_labels: ``L >= 1``, the labels of every token.
        chain_edges: ``(E, 2)`` int token pairs ``(i, j)``, ``i < j``, consecutive in a chain: their
            pair tables go to ``chain_tables`` instead of ``pb`` (module docstring).

    Raises:
        ValueError: on ``num_labels < 1`` or a malformed pattern (named by its index).
    """
    if num_labels < 1:
        raise ValueError(f"num_labels must be >= 1, got {num_labels}")
    kept = _checked(patterns, num_labels)
    P = len(kept)
    sizes = np.fromiter((len(cells) for cells, _ in kept), dtype=np.int64, count=P)  # (P,)
    scores = np.fromiter((score for _, score in kept), dtype=np.float64, count=P)  # (P,)
    flat = np.array([cell for cells, _ in kept for cell in cells], dtype=np.int64).reshape(-1, 2)
    return reparameterise_arrays(sizes, scores, flat, num_labels, chain_edges)


def reparameterise_arrays(
    sizes: np.ndarray,
    scores: np.ndarray,
    flat: np.ndarray,
    num_labels: int,
    chain_edges: np.ndarray | None = None,
) -> Reparameterised:
    """:func:`reparameterise` of patterns already valid, given as arrays (no checks, no copies).

    Args:
        sizes: ``(P,)`` int64, each pattern's cells (at least 2).
        scores: ``(P,)`` float64, non-zero and finite.
        flat: ``(C, 2)`` int64, ``(token, label)`` of every cell, pattern after pattern (tokens of one
            pattern distinct).
        num_labels: ``L >= 1``.
        chain_edges: as :func:`reparameterise`'s.
    """
    L = num_labels
    P = sizes.shape[0]
    starts = np.cumsum(sizes) - sizes  # (P,): each pattern's first cell in ``flat`` (C, 2)
    tokens = np.unique(flat[:, 0])  # sorted
    nt = tokens.shape[0]
    V = nt * L
    coupled = np.stack(
        [np.repeat(tokens, L), np.tile(np.arange(L, dtype=np.int64), nt)], axis=1
    ).reshape(V, 2)
    slot = np.searchsorted(tokens, flat[:, 0])  # (C,): the token's rank
    z = slot * L + flat[:, 1]  # (C,): the cell's position in x

    # Step 1: the pairs of size-2 patterns and of negative patterns of size >= 3, pattern by pattern
    # and (a, b) with a < b within one, the order in which they are summed into the tables.
    paired = np.flatnonzero((sizes == 2) | (scores < 0))
    blocks_p, blocks_a, blocks_b = [], [], []
    for n in np.unique(sizes[paired]).tolist():
        which = paired[sizes[paired] == n]  # (q,)
        ia, ib = np.triu_indices(n, 1)
        blocks_p.append(np.repeat(which, ia.shape[0]))
        blocks_a.append((starts[which][:, None] + ia[None, :]).reshape(-1))
        blocks_b.append((starts[which][:, None] + ib[None, :]).reshape(-1))
    lefts: list[np.ndarray] = []
    rights: list[np.ndarray] = []
    coefs: list[np.ndarray] = []
    constant = 0.0
    moved_pairs = np.zeros((0, 2), dtype=np.int64)
    moved_tables = np.zeros((0, L, L))
    kept_keys = np.zeros(0, dtype=np.int64)
    if blocks_p:
        order = np.argsort(np.concatenate(blocks_p), kind="stable")
        ca, cb = np.concatenate(blocks_a)[order], np.concatenate(blocks_b)[order]
        swap = slot[ca] > slot[cb]
        ca, cb = np.where(swap, cb, ca), np.where(swap, ca, cb)  # ca on the lower-ranked token
        pi, pj = slot[ca], slot[cb]
        keys, pair = np.unique(pi * nt + pj, return_inverse=True)
        pair = pair.reshape(-1)
        tables = np.zeros((keys.shape[0], L, L))  # (pairs, L, L): P_ij
        np.add.at(tables, (pair, flat[ca, 1], flat[cb, 1]), scores[np.concatenate(blocks_p)[order]])
        if chain_edges is not None and len(chain_edges):
            edges = np.asarray(chain_edges, dtype=np.int64).reshape(-1, 2)
            span = int(max(int(edges.max()), int(tokens[-1]))) + 1
            ends = np.stack([tokens[keys // nt], tokens[keys % nt]], axis=1)  # (pairs, 2)
            moved = np.isin(ends[:, 0] * span + ends[:, 1], edges[:, 0] * span + edges[:, 1])
            moved_pairs, moved_tables = ends[moved], tables[moved]
            keys, tables = keys[~moved], tables[~moved]
        kept_keys = keys
        shift = np.maximum(0.0, -tables.min(axis=(1, 2), initial=0.0))  # (pairs,): C_ij
        shifted = tables + shift[:, None, None]  # >= 0: the exact sum is, and rounding keeps it
        p, first, second = np.nonzero(shifted > 0)
        lefts.append((keys[p] // nt) * L + first)
        rights.append((keys[p] % nt) * L + second)
        coefs.append(shifted[p, first, second])
        constant = float(shift.sum())

    # Steps 2-3: the auxiliaries, pattern by pattern: one for a positive pattern or a negative one of
    # size 3, n - 3 for a negative one of size n >= 4 (w0, then w_a for a = 1..n-4).
    big = sizes >= 3
    count = np.where(big, np.where((scores < 0) & (sizes >= 4), sizes - 3, 1), 0)  # (P,)
    owner = np.repeat(np.arange(P), count)  # (W,): each auxiliary's pattern
    rank = np.arange(owner.shape[0]) - np.repeat(np.cumsum(count) - count, count)  # (W,)
    s_w, n_w = scores[owner], sizes[owner]
    positive, three = s_w > 0, n_w == 3
    aux_coef = np.where(positive, s_w, np.where(three | (rank > 0), -s_w, -2 * s_w))
    aux_linear = np.where(
        positive,
        s_w * (1 - n_w),
        np.where(three, s_w, np.where(rank > 0, (rank + 2) * s_w, 3 * s_w)),
    )
    W = owner.shape[0]
    linear = np.zeros(V + W)
    linear[V:] = aux_linear
    if W:
        width = n_w  # (W,): each auxiliary's pairs, one per cell of its pattern
        offset = np.arange(int(width.sum())) - np.repeat(np.cumsum(width) - width, width)
        lefts.append(z[np.repeat(starts[owner], width) + offset])
        rights.append(np.repeat(V + np.arange(W), width))
        coefs.append(np.repeat(aux_coef, width))
    left = np.concatenate(lefts) if lefts else np.zeros(0, dtype=np.int64)
    right = np.concatenate(rights) if rights else np.zeros(0, dtype=np.int64)
    if moved_pairs.shape[0]:
        # The tokens with a term left in the cut (a kept pair table or a pattern of size >= 3) stay
        # coupled, renumbered in order; the auxiliaries follow them.
        used = np.zeros(nt, dtype=np.bool_)
        used[kept_keys // nt] = True
        used[kept_keys % nt] = True
        used[slot[big[np.repeat(np.arange(P), sizes)]]] = True
        renumber = np.cumsum(used) - 1
        V_new = int(used.sum()) * L

        def moved_index(x: np.ndarray) -> np.ndarray:
            inside = renumber[np.minimum(x // L, nt - 1)] * L + x % L
            return np.asarray(np.where(x < V, inside, x - V + V_new), dtype=np.int64)

        left, right = moved_index(left), moved_index(right)
        linear = np.concatenate([np.zeros(V_new), linear[V:]])
        coupled = coupled.reshape(nt, L, 2)[used].reshape(V_new, 2)
    pb = QuadraticPB(
        linear=linear,
        left=left,
        right=right,
        quadratic=np.concatenate(coefs) if coefs else np.zeros(0),
    )
    return Reparameterised(
        coupled=coupled,
        pb=pb,
        constant=constant,
        chain_pairs=moved_pairs,
        chain_tables=moved_tables,
    )
