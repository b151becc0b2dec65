"""2-slave dual decomposition (Qian & Liu, TACL 2014, §3), built once per group and decoded at any weight.

The group's score splits into the chains and the non-local patterns. With multipliers ``θ`` on every
``(token, label)`` of the tokens the patterns touch (all labels of those tokens, not only the labels in
patterns):

* slave 1, ``V(θ) = max_y chains(y) + Σ θ_ik 1[y_i = k]``: Viterbi on each sentence;
* slave 2, ``P(θ) = max_{z, w} g̃(z, w) - Σ θ_ik z_ik``: the patterns reparameterised into a supermodular
  quadratic pseudo-Boolean function (:mod:`~crfhead.higher_order.reparam`), maximised by one minimum
  cut (:mod:`~crfhead.higher_order.pseudo_boolean`);

and ``L(θ) = V(θ) + P(θ) - K >= OPT`` for every ``θ`` (weak duality; ``P`` is taken as the cut's
proven upper bound). The subgradient is ``1[y*_i = k] - z*_ik``; steps are Polyak's,
``γ (L - best primal) / |g|²`` with ``γ`` halved after 20 iterations without a new best dual, or
``α0 / (1 + #dual increases)``; the bookkeeping, primal recovery and stopping rules are
:mod:`~crfhead.higher_order.subgradient`'s.

As the seed places them, the pair terms between two tokens consecutive in one chain (size-2 patterns
there, and the pairwise parts of negative patterns there) are in the *tree* slave: added to that
chain's transition at that position, maximised exactly by Viterbi rather than relaxed in the cut
(:func:`~crfhead.higher_order.reparam.reparameterise`'s ``chain_edges``). A token left without a term
in the cut carries no multiplier.

:class:`TwoSlave` is the decomposition of one group, built once (reparameterisation, cut graph,
index tables) and decoded at any ``scale`` of its patterns by :meth:`TwoSlave.decode`: every
pattern term is linear in the scale, so only capacities are rescaled. Across calls it keeps

* the native max-flow's flow and search trees (:mod:`~crfhead.higher_order.native_maxflow`),
  rescaled with the capacities (a scaled flow is a flow of the scaled graph);
* the multipliers at the best dual of the last call, scaled by the ratio of the scales, as the next
  call's start (any ``θ`` gives a valid bound, so a warm start changes the path, never the proof);

and each call decodes only the sentences the cut couples: the others are decoded once by Viterbi
(their labelling is the same in both slaves whatever ``θ``) and add a constant to dual and primal.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from crfhead import engine
from crfhead.engine.potentials import ChainPotentials
from crfhead.higher_order.group import Group, viterbi_checked
from crfhead.higher_order.native_maxflow import Maxflow
from crfhead.higher_order.native_maxflow import bound as native_bound
from crfhead.higher_order.pseudo_boolean import maximize, resolve_backend
from crfhead.higher_order.reparam import reparameterise_arrays
from crfhead.higher_order.result import DecodeResult
from crfhead.higher_order.subgradient import Subgradient

__all__ = ["TwoSlave", "chain_edges", "dd2slave"]


def chain_edges(mask: Tensor) -> np.ndarray:
    """``(E, 2)`` int64: the flattened tokens ``(b * T + t, b * T + t')`` of consecutive unmasked positions.

    Args:
        mask: ``(B, T)`` bool; ``t'`` is the next unmasked position after ``t`` in row ``b``.
    """
    m = mask.detach().cpu().numpy().astype(np.bool_)
    T = m.shape[1]
    flat = np.flatnonzero(m.reshape(-1))  # row-major: consecutive entries of a row are neighbours
    same_row = (flat[1:] // T) == (flat[:-1] // T)
    return np.stack([flat[:-1][same_row], flat[1:][same_row]], axis=1).astype(np.int64)


class TwoSlave:
    """The 2-slave decomposition of one group, built once, decoded at any scale of its patterns.

    Args:
        group: the prepared group (:func:`~crfhead.higher_order.group.prepare`), its patterns at
            scale 1.
        backend: the cut's max-flow, one of :data:`~crfhead.higher_order.pseudo_boolean.BACKENDS`
            (``"auto"``: the native kernel where it builds).
        tree_edges: put the pair terms of consecutive tokens in the chain slave (the seed's
            placement; ``False`` puts them in the cut, for comparison).

    Attributes:
        rows: ``(Bc,)`` int64, the sentences the cut couples (decoded every iteration).
        coupled: ``(V, 2)``, the ``(token, label)`` of each multiplier (the reparameterisation's).

    Memory is ``O(V + arcs)`` for the cut plus ``(B, T-1, K, K)`` transitions when chain edges carry
    pattern tables; one iteration is one Viterbi over the ``Bc`` coupled sentences (``O(Bc·T·K²)``)
    and one max-flow that starts from the previous one's flow and trees.
    """

    def __init__(self, group: Group, backend: str = "auto", tree_edges: bool = True) -> None:
        self.group = group
        self.backend = resolve_backend(backend)
        B, T, K = group.shape
        edges = chain_edges(group.chain.mask) if tree_edges else None
        pat_tokens, pat_labels, pat_valid, pat_scores = (x.cpu() for x in group.cells)
        valid_np = pat_valid.numpy()
        flat = np.stack([pat_tokens.numpy()[valid_np], pat_labels.numpy()[valid_np]], axis=1)
        sizes = valid_np.sum(1).astype(np.int64)
        rep = reparameterise_arrays(sizes, pat_scores.numpy(), flat, K, edges)
        self.rep = rep
        V = rep.coupled.shape[0]
        self.coupled = rep.coupled
        tokens = rep.coupled[:, 0]
        rows = np.unique(tokens // T)
        self.rows = rows
        local = np.full(B, -1, dtype=np.int64)
        local[rows] = np.arange(rows.shape[0])
        self._sel = local[tokens // T] * T + tokens % T  # (V,): the token in the coupled rows
        self._labels = rep.coupled[:, 1]
        self._cells = torch.as_tensor(self._sel * K + self._labels)  # (V,) into (Bc * T * K)
        # The chain edges' tables, by position: transitions[b, t' - 1] enters t' from t.
        pairs = rep.chain_pairs
        self._edge_rows = pairs[:, 1] // T
        self._edge_steps = pairs[:, 1] % T - 1
        self._edge_tables = torch.as_tensor(rep.chain_tables)
        on_coupled = local[self._edge_rows] >= 0
        self._edge_i = local[pairs[on_coupled, 0] // T] * T + pairs[on_coupled, 0] % T
        self._edge_j = local[pairs[on_coupled, 1] // T] * T + pairs[on_coupled, 1] % T
        self._edge_coupled = rep.chain_tables[on_coupled]  # (Ec, K, K)
        # The patterns of the coupled rows (every pattern lies in the coupled rows or outside them:
        # a pattern with a term left in the cut has all its tokens coupled, one moved to the chain is
        # within one sentence), for the primal, in coupled-row tokens.
        if group.patterns:
            first = pat_tokens.numpy()[:, 0] // T
            inside = local[first] >= 0  # (P,)
            tok = pat_tokens.numpy()[inside]
            self._pat_tokens = local[tok // T] * T + tok % T  # (P', S) in the coupled rows
            self._pat_labels = pat_labels.numpy()[inside]
            self._pat_valid = valid_np[inside]
            self._pat_scores = pat_scores.numpy()[inside]
        else:
            self._pat_tokens = self._pat_labels = np.zeros((0, 1), dtype=np.int64)
            self._pat_valid = np.zeros((0, 1), dtype=np.bool_)
            self._pat_scores = np.zeros(0)
        # The cut: w = θ - scale·(base + half degree) on the z's, -scale·(base + half degree) after.
        pb = rep.pb
        graph = pb._graph_structure() if pb.n else None
        self._hd = np.zeros(pb.n) if graph is None else graph.half_degree
        self._base_w = -(pb.linear + self._hd)  # (n,) at scale 1
        self._unit_magnitude = float(np.abs(pb.linear).sum()) + float(pb.quadratic.sum())
        self._terms = pb.n + pb.left.shape[0]
        self._solver: Maxflow | None = None
        if self.backend == "native" and graph is not None:
            u, v, a = graph.pairs
            self._solver = Maxflow(pb.n, u, v, a / 2, a / 2)
        self._solver_scale = 1.0
        self._theta: np.ndarray | None = None
        self._theta_scale = 1.0
        self.V = V
        magnitudes = [abs(p.score) for p in group.patterns]
        self._unit_mean = float(np.mean(magnitudes or [1.0]))
        self._unit_mass = float(sum(magnitudes))

    def _potentials(self, scale: float) -> ChainPotentials:
        """The chain slave's potentials of the whole group at ``scale`` (unary patterns, chain tables)."""
        g = self.group
        o = g.original
        emissions = o.emissions if g.unary is None else o.emissions + scale * g.unary
        transitions = o.transitions
        if self._edge_tables.shape[0]:
            B, T, K = g.shape
            transitions = o.transitions.expand(B, T - 1, K, K).clone()
            index = (torch.as_tensor(self._edge_rows), torch.as_tensor(self._edge_steps))
            transitions.index_put_(index, scale * self._edge_tables, accumulate=True)
        return ChainPotentials(emissions, transitions, o.start, o.end, o.mask)

    def decode(
        self,
        scale: float = 1.0,
        max_iterations: int = 300,
        step: str = "polyak",
        step_size: float | None = None,
        warm: bool = True,
    ) -> DecodeResult:
        """The group's labelling with every pattern score times ``scale > 0``.

        Args:
            scale: the patterns' weight.
            max_iterations: the iteration cap.
            step: ``"polyak"`` or ``"diminishing"`` (:mod:`~crfhead.higher_order.subgradient`).
            step_size: ``γ``'s start for Polyak (default 1), ``α0`` for the diminishing rule (default:
                the mean absolute pattern score).
            warm: start from the last call's multipliers at its best dual, scaled (module docstring).

        Raises:
            ValueError: a bad argument, or a sentence with no allowed labelling (named).
        """
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
        if not scale > 0.0:
            raise ValueError(f"scale must be > 0, got {scale}")
        B, T, _ = self.group.shape
        pot = self._potentials(scale)
        # Every sentence once (and every infeasible one named, the first first): the uncoupled ones
        # keep this labelling, their scores are the offset.
        values0, tags0 = viterbi_checked(pot)
        rows_t = torch.as_tensor(self.rows)
        rest = torch.ones(B, dtype=torch.bool)
        rest[rows_t] = False
        offset = float(values0[rest].sum())
        tags = tags0.clone()
        emissions = pot.emissions[rows_t].contiguous()
        transitions = pot.transitions[rows_t] if pot.transitions.dim() == 4 else pot.transitions
        sub = ChainPotentials(emissions, transitions, pot.start, pot.end, pot.mask[rows_t])
        flat_emissions = emissions.reshape(-1)
        V = self.V
        theta = np.zeros(V)
        if warm and self._theta is not None:
            theta = self._theta * (scale / self._theta_scale)
        best_theta = theta.copy()
        loop = Subgradient(
            (int(self.rows.shape[0]), T),
            step,
            step_size,
            scale * self._unit_mean,
            mass=scale * self._unit_mass,
        )
        edge_tables = scale * self._edge_coupled
        pat_scores = scale * self._pat_scores
        # The chains' own Viterbi on the coupled sentences: a primal (with chain tables the first
        # iteration decodes the chains *plus* pair terms, for a negative pattern its score on every
        # pair, so the result is never below the chains' labelling), and the bound of the chains'
        # optimum plus every positive pattern (tighter than the cut's on negative patterns).
        o = self.group.chain
        plain = ChainPotentials(emissions, o.transitions, o.start, o.end, pot.mask[rows_t])
        values1, tags1 = viterbi_checked(plain, self.rows.tolist())
        flat1 = tags1.reshape(-1).numpy()
        holds1 = ((flat1[self._pat_tokens] == self._pat_labels) | ~self._pat_valid).all(1)
        chains1 = float(values1.sum())
        loop.offer(
            chains1 + float(pat_scores[holds1].sum()),
            tags1,
            chains1 + float(np.maximum(pat_scores, 0.0).sum()),
        )
        base_w = scale * self._base_w
        constant = scale * self.rep.constant
        magnitude = scale * self._unit_magnitude
        if self._solver is not None and scale != self._solver_scale:
            self._solver.scale(scale / self._solver_scale)
            self._solver_scale = scale
        pb = self.rep.pb
        scaled_pb = None
        if self._solver is None and pb.n:
            scaled_pb = type(pb)(
                linear=scale * pb.linear,
                left=pb.left,
                right=pb.right,
                quadratic=scale * pb.quadratic,
            )
        last_tags: np.ndarray | None = None
        last_score = 0.0
        for _ in range(max_iterations):
            shifted = flat_emissions.clone()
            shifted.index_add_(0, self._cells, torch.from_numpy(theta))
            # Feasible rows stay feasible under finite multipliers: no check in the loop.
            with torch.no_grad():
                values, sub_tags = engine.viterbi(
                    ChainPotentials(
                        shifted.reshape(emissions.shape),
                        sub.transitions,
                        sub.start,
                        sub.end,
                        sub.mask,
                    )
                )
            chain_value = float(values.sum())
            flat = sub_tags.reshape(-1).numpy()
            chosen = flat[self._sel] == self._labels  # (V,)
            if pb.n == 0:
                x = np.zeros(0, dtype=np.bool_)
                bound = 0.0
            elif self._solver is not None:
                w = base_w.copy()
                w[:V] += theta
                x, parts = self._solver.solve(w)
                bound = native_bound(
                    0.0, parts, magnitude + float(np.abs(theta).sum()), self._terms
                )
            else:
                assert scaled_pb is not None
                linear = scaled_pb.linear.copy()
                linear[:V] -= theta
                x, _, bound = maximize(scaled_pb.with_linear(linear), backend=self.backend)
            g = chosen.astype(np.float64) - x[:V]
            if last_tags is None or not np.array_equal(flat, last_tags):
                # The coupled part's score: the chains (Viterbi's value less θ and the chain tables)
                # plus the patterns of these sentences.
                last_tags = flat
                chain = chain_value - float(theta[chosen].sum())
                if edge_tables.shape[0]:
                    chain -= float(
                        edge_tables[
                            np.arange(edge_tables.shape[0]), flat[self._edge_i], flat[self._edge_j]
                        ].sum()
                    )
                holds = ((flat[self._pat_tokens] == self._pat_labels) | ~self._pat_valid).all(1)
                last_score = chain + float(pat_scores[holds].sum())
            # g is in {-1, 0, 1}: |g|² is the count of its non-zeros, exact.
            norm2 = float(np.count_nonzero(g))
            dual = chain_value + bound - constant
            improved = dual < loop.best_dual
            alpha = loop.record(dual, last_score, sub_tags, norm2)
            if improved:
                best_theta = theta.copy()
            if alpha is None:
                break
            theta = theta - alpha * g
        self._theta, self._theta_scale = best_theta, scale
        result = loop.result("dd2slave", offset=offset)
        tags[rows_t] = loop.best_tags
        result.tags = tags
        return result


def dd2slave(
    group: Group,
    max_iterations: int = 300,
    step: str = "polyak",
    step_size: float | None = None,
    backend: str = "auto",
    tree_edges: bool = True,
) -> DecodeResult:
    """Decode ``group`` by 2-slave dual decomposition (one :meth:`TwoSlave.decode` at scale 1).

    Args:
        group: the prepared group (:func:`~crfhead.higher_order.group.prepare`).
        max_iterations: the iteration cap.
        step: ``"polyak"`` or ``"diminishing"`` (see the module docstring).
        step_size: ``γ``'s start for Polyak (default 1), ``α0`` for the diminishing rule (default: the
            mean absolute pattern score).
        backend: the pattern slave's max-flow (:func:`~crfhead.higher_order.pseudo_boolean.maximize`):
            ``"auto"`` (the default: the native kernel where it builds, else OR-Tools where
            installed, else scipy), ``"native"``, ``"scipy"`` or ``"ortools"``.
        tree_edges: the pair terms of consecutive tokens in the chain slave (module docstring).
    """
    if max_iterations < 1:
        raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
    return TwoSlave(group, backend, tree_edges).decode(1.0, max_iterations, step, step_size)
