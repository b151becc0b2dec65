"""The theory harness of *Sequence Labeling: From HMMs to Linear-Chain CRFs* (HMMs, CRFs, MEMMs, the perceptron).

Every statement the seed proves is checked here against an independent oracle: enumeration of every
path (``tests/brute.py`` or ``itertools.product`` over tiny chains), hand counting, or closed forms.
All in float64. ``pytest tests/theory/test_theory.py -k "theorem or proposition or corollary"`` runs it.

* Theorem 1 (chain distributive law): ``test_theorem_1_*``. Sum-product: log Z, node and edge
  marginals; max-product: best score, best path, max-marginals; ``alpha_t + beta_t`` aggregates the
  paths through ``(t, k)`` in both semirings. Random chains with holes, forbidden tags, transitions,
  starts and ends (``IMPOSSIBLE``).
* Proposition 1 (the HMM tagger is counting): ``test_proposition_1_*``. ``HMM.fit`` is hand-counted
  add-alpha frequencies (stop column included); the MLE beats every perturbed valid parameter in joint
  likelihood (Gibbs); ``nu (I - A)^-1 e = 1``, the partial sums ``sum_T nu A^(T-1) e`` converge to it
  and equal the total ``p(x)`` of every enumerated sentence of each length.
* Theorem 2 (the CRF likelihood is concave): ``test_theorem_2_*``. Gradient = observed - expected
  features, Hessian (double backward) = -Cov = central differences of the gradient, one maximiser of
  the L2-penalised objective from two L-BFGS starts.
* Theorem 3 (HMMs and indicator CRFs): ``test_theorem_3a_*`` (HMM -> CRF), ``test_theorem_3b_*``
  (CRF -> a valid HMM, the ``c`` argument, the telescoping constant ``N c^T``); conditionals compared
  on every path.
* Theorem 4 (decoding risk): ``test_theorem_4_*``. Viterbi minimises the expected 0/1 sequence loss,
  posterior decoding the expected Hamming loss, over every candidate path.
* Proposition 2 (an MEMM's past ignores its future): ``test_proposition_2_*``. Changing the words after
  ``t + w`` leaves the MEMM's marginals of ``z_{1:t}`` unchanged (to 1e-15: the backward pass sums
  later factors that are 1 only up to rounding, so not bit for bit), and changes a CRF's.
* Corollary 2 (a ceiling for posterior decoding): ``test_corollary_2_*``. In an enumerated HMM world,
  posterior-decoded MEMMs (random and fitted) never beat the lagged Bayes rule; the ceiling is computed
  by enumeration and, independently, on prefix chains. The Remark: a deterministic instance where the
  same kind of MEMM, decoded by Viterbi, does beat the ceiling.
* Theorem 5 (the perceptron's mistake bound): ``test_theorem_5_*``. Teacher-labelled separable data at
  four margins: total mistakes <= R^2 / gamma^2 with exact margins and radii; the SGD step on the
  ``sum`` loss is the perceptron update ``F(gold) - F(viterbi)`` and the score is ``theta . F``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from brute import enumerate_rows
from helpers import random_chain
from torch import Tensor

from crfhead import engine
from crfhead.encoders.window import WordWindowEncoder
from crfhead.engine import (
    edge_marginals,
    log_partition,
    marginals,
    max_marginals,
    posterior_decode,
    viterbi,
)
from crfhead.engine.potentials import make_potentials
from crfhead.engine.scan import backward_scan, forward_scan
from crfhead.engine.semiring import LogSemiring, MaxSemiring
from crfhead.heads.crf import CRF
from crfhead.heads.hmm import HMM, HMMParameters
from crfhead.heads.hmm_crf import (
    IndicatorCRFWeights,
    crf_to_hmm,
    hmm_potentials,
    hmm_to_crf,
    indicator_crf_potentials,
)
from crfhead.heads.memm import MEMM
from crfhead.heads.perceptron import StructuredPerceptron
from crfhead.numerics import IMPOSSIBLE

F64 = torch.float64


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: one intra-op thread is fastest and does not fight over shared cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ---------------------------------------------------------------------------------------- helpers
def all_paths(T: int, K: int) -> Tensor:
    """``(K**T, T)`` int64: every tag sequence, in ``itertools.product`` (lexicographic) order."""
    if T == 0:
        return torch.zeros(1, 0, dtype=torch.long)
    return torch.tensor(list(itertools.product(range(K), repeat=T)), dtype=torch.long)


def path_log_potential(
    start: Tensor, trans: Tensor, emis: Tensor, end: Tensor, words: Tensor, paths: Tensor
) -> Tensor:
    """Hand-computed ``start + sum emis[z_t, x_t] + sum trans[z_{t-1}, z_t] + end`` of every path.

    ``emis`` is ``(K, V)``, ``words`` ``(T,)``, ``paths`` ``(N, T)``; plain indexing, no chain engine.
    """
    s = start[paths[:, 0]] + end[paths[:, -1]] + emis[paths, words[None, :]].sum(1)
    if paths.shape[1] > 1:
        s = s + trans[paths[:, :-1], paths[:, 1:]].sum(1)
    return s


def random_simplex(g: torch.Generator, *shape: int, conc: float = 1.0) -> Tensor:
    """Rows drawn from a Dirichlet(conc), float64 (numpy's sampler, seeded from ``g``)."""
    rng = np.random.default_rng(int(torch.randint(0, 2**31 - 1, (1,), generator=g)))
    x = torch.from_numpy(rng.dirichlet([conc] * shape[-1], size=shape[:-1])).clamp(min=1e-6)
    return x / x.sum(-1, keepdim=True)


def indicator_features(words: list[int], tags: list[int], K: int, V: int) -> Tensor:
    """``F(x, z)`` of an indicator model, laid out as :func:`flat_params` lays out ``theta``.

    Blocks: (word, tag) counts ``(V + 2, K)`` (the WordWindowEncoder ``offsets=(0,)`` table, whose two
    boundary rows never fire), transition counts ``(K, K)``, start one-hot ``(K,)``, end one-hot ``(K,)``.
    """
    emit = torch.zeros(V + 2, K, dtype=F64)
    trans = torch.zeros(K, K, dtype=F64)
    start = torch.zeros(K, dtype=F64)
    end = torch.zeros(K, dtype=F64)
    for t, (w, z) in enumerate(zip(words, tags, strict=True)):
        emit[w, z] += 1
        if t:
            trans[tags[t - 1], z] += 1
    start[tags[0]] += 1
    end[tags[-1]] += 1
    return torch.cat([emit.flatten(), trans.flatten(), start, end])


def flat_params(enc: WordWindowEncoder, head: CRF) -> Tensor:
    """``theta``: the encoder table, then transitions, start and end (see :func:`indicator_features`)."""
    return torch.cat(
        [
            enc.weight.reshape(-1),
            head.transitions.reshape(-1),
            head.start_transitions.reshape(-1),
            head.end_transitions.reshape(-1),
        ]
    )


def param_list(enc: WordWindowEncoder, head: CRF) -> list[Tensor]:
    return [enc.weight, head.transitions, head.start_transitions, head.end_transitions]


@torch.no_grad()
def set_flat(params: list[Tensor], theta: Tensor) -> None:
    i = 0
    for p in params:
        p.copy_(theta[i : i + p.numel()].view_as(p))
        i += p.numel()


def feature_matrix(words: list[int], K: int, V: int) -> tuple[Tensor, Tensor]:
    """Every path of a sentence and its feature vector: ``(N, T)`` paths, ``(N, d)`` features."""
    paths = all_paths(len(words), K)
    return paths, torch.stack([indicator_features(words, z.tolist(), K, V) for z in paths])


# ---------------------------------------------------------------------------------------- Theorem 1
def forbidden_chain(seed: int, B: int, T: int, K: int, per_position: bool):
    """A random chain with holes where some tags, transitions, starts and ends are ``IMPOSSIBLE``.

    Tag 0 is never forbidden (emission, 0 -> 0, start, end), so every non-empty row has a valid path.
    """
    c = random_chain(seed, B, T, K, per_position=per_position)
    g = torch.Generator().manual_seed(10_000 + seed)
    E, Tr, s, e = c.emissions.clone(), c.transitions.clone(), c.start.clone(), c.end.clone()
    drop = torch.rand(E.shape, generator=g) < 0.25
    drop[..., 0] = False
    E[drop] = IMPOSSIBLE
    drop = torch.rand(Tr.shape, generator=g) < 0.3
    drop[..., 0, 0] = False
    Tr[drop] = IMPOSSIBLE
    for v in (s, e):
        drop = torch.rand(K, generator=g) < 0.3
        drop[0] = False
        v[drop] = IMPOSSIBLE
    return E, Tr, s, e, c.mask


THEOREM_1_CASES = [
    (seed, T, K, per_position)
    for seed, (T, K) in enumerate([(1, 3), (2, 2), (3, 4), (4, 3), (5, 3), (5, 4), (6, 2), (4, 1)])
    for per_position in (False, True)
]


@pytest.mark.parametrize(("seed", "T", "K", "per_position"), THEOREM_1_CASES)
def test_theorem_1_sum_product_log_z_node_and_edge_marginals_match_enumeration(
    seed: int, T: int, K: int, per_position: bool
) -> None:
    args = forbidden_chain(seed, 3, T, K, per_position)
    pot = make_potentials(*args)
    rows = enumerate_rows(*args)
    want_logz = torch.tensor([r.log_partition for r in rows], dtype=F64)
    # (a): the forward pass in (+, x) and the public log Z.
    torch.testing.assert_close(
        forward_scan(LogSemiring(), pot).total[:, 0], want_logz, rtol=0, atol=1e-12
    )
    torch.testing.assert_close(log_partition(pot), want_logz, rtol=0, atol=1e-12)
    # (b), (c): node and edge marginals.
    want_node = torch.stack([r.node_marginals() for r in rows])
    want_edge = torch.stack([r.edge_marginals() for r in rows])
    torch.testing.assert_close(marginals(pot), want_node, rtol=0, atol=1e-12)
    torch.testing.assert_close(edge_marginals(pot), want_edge, rtol=0, atol=1e-12)
    # Forbidden events get exactly zero mass.
    assert bool((marginals(pot)[args[0] == IMPOSSIBLE] == 0).all())


@pytest.mark.parametrize(("seed", "T", "K", "per_position"), THEOREM_1_CASES)
def test_theorem_1_max_product_best_score_path_and_max_marginals_match_enumeration(
    seed: int, T: int, K: int, per_position: bool
) -> None:
    args = forbidden_chain(seed, 3, T, K, per_position)
    pot = make_potentials(*args)
    rows = enumerate_rows(*args)
    want_best = torch.tensor([r.best()[0] for r in rows], dtype=F64)
    # (a) in (max, x): the forward pass's total and Viterbi's score and path.
    torch.testing.assert_close(
        forward_scan(MaxSemiring(), pot).total[:, 0], want_best, rtol=0, atol=1e-12
    )
    scores, paths = viterbi(pot)
    torch.testing.assert_close(scores, want_best, rtol=0, atol=1e-12)
    for b, row in enumerate(rows):
        assert paths[b].tolist() == row.best()[1]
    # (b) in (max, x) divided by Z: the max-marginals.
    want_mu = torch.stack([r.max_marginals() for r in rows])
    torch.testing.assert_close(max_marginals(pot), want_mu, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("seed", "T", "K", "per_position"), THEOREM_1_CASES)
def test_theorem_1_forward_plus_backward_aggregates_paths_through_each_node(
    seed: int, T: int, K: int, per_position: bool
) -> None:
    """(b) itself: ``alpha_t(k) + beta_t(k) = ⊕_{z: z_t = k} score(z)`` up to the scan's per-(b, t)
    normalising shift, i.e. the difference is the same for every tag ``k`` (both semirings)."""
    args = forbidden_chain(seed, 3, T, K, per_position)
    pot = make_potentials(*args)
    rows = enumerate_rows(*args)
    for semiring, agg in ((LogSemiring(), torch.logsumexp), (MaxSemiring(), torch.amax)):
        both = forward_scan(semiring, pot).alphas[..., 0] + backward_scan(semiring, pot)
        for b, row in enumerate(rows):
            scores = torch.tensor(row.scores, dtype=F64)
            paths = torch.tensor(row.paths, dtype=torch.long).reshape(len(row.paths), T)
            for t in row.positions:
                through = [scores[paths[:, t] == k] for k in range(K)]
                want = torch.stack(
                    [agg(x, 0) if len(x) else torch.tensor(-math.inf, dtype=F64) for x in through]
                )
                ok = want > -math.inf  # nodes some valid path goes through
                # ... and exactly those: alpha + beta is -inf at every other node.
                assert bool((both[b, t][~ok] == -math.inf).all())
                diff = (both[b, t] - want)[ok]
                assert ok.any()
                assert float(diff.max() - diff.min()) < 1e-11, (type(semiring).__name__, b, t)


# ---------------------------------------------------------------------------------- Proposition 1
def _corpus(seed: int, n: int, T: int, K: int, V: int, holes: bool = False):
    """Random tagged sentences of lengths 1..T; with ``holes`` the masks have gaps (the sentence is
    the unmasked positions, in order) and the masked entries hold junk."""
    g = torch.Generator().manual_seed(seed)
    if holes:
        mask = torch.rand(n, T, generator=g) < 0.6
        mask[:, int(torch.randint(0, T, (1,), generator=g))] = True  # no empty sentence
        words = torch.randint(0, V, (n, T), generator=g)
        tags = torch.where(mask, torch.randint(0, K, (n, T), generator=g), -100)
        return words, tags, mask
    lengths = torch.randint(1, T + 1, (n,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    words = torch.randint(0, V, (n, T), generator=g) * mask
    tags = torch.randint(0, K, (n, T), generator=g) * mask
    return words, tags, mask


def _hand_counts(words: Tensor, tags: Tensor, mask: Tensor, K: int, V: int):
    start, end, trans, emit = (
        [0] * K,
        [0] * K,
        [[0] * K for _ in range(K)],
        [[0] * V for _ in range(K)],
    )
    for w_row, z_row, m_row in zip(words.tolist(), tags.tolist(), mask.tolist(), strict=True):
        z = [zz for zz, m in zip(z_row, m_row, strict=True) if m]
        w = [ww for ww, m in zip(w_row, m_row, strict=True) if m]
        start[z[0]] += 1
        end[z[-1]] += 1
        for a, b in itertools.pairwise(z):
            trans[a][b] += 1
        for zz, ww in zip(z, w, strict=True):
            emit[zz][ww] += 1
    return start, trans, end, emit


def _fit_hmm(K: int, V: int, words: Tensor, tags: Tensor, mask: Tensor, alpha: float) -> HMM:
    return HMM(K, V, unknown_singletons=False, padding_index=None).fit(
        words, tags, mask, alpha=alpha
    )


@pytest.mark.parametrize(
    ("alpha", "holes"), [(1e-300, False), (0.1, False), (1.0, False), (0.5, True)]
)
def test_proposition_1_fit_is_dirichlet_posterior_mean_of_hand_counts(
    alpha: float, holes: bool
) -> None:
    K, V = 3, 5
    words, tags, mask = _corpus(1, 25, 6, K, V, holes=holes)
    hmm = _fit_hmm(K, V, words, tags, mask, alpha)
    start, trans, end, emit = _hand_counts(words, tags, mask, K, V)
    assert hmm.start_counts.tolist() == start
    assert hmm.end_counts.tolist() == end
    assert hmm.transition_counts.tolist() == trans
    assert hmm.emission_counts.tolist() == emit
    p = hmm.log_parameters()
    a = alpha
    want_nu = [(c + a) / (sum(start) + K * a) for c in start]
    want_a, want_stop, want_b = [], [], []
    for j in range(K):
        total = sum(trans[j]) + end[j] + (K + 1) * a  # the stop column is one more outcome of row j
        want_a.append([(c + a) / total for c in trans[j]])
        want_stop.append((end[j] + a) / total)
        want_b.append([(c + a) / (sum(emit[j]) + V * a) for c in emit[j]])
    tol = dict(rtol=1e-13, atol=0)
    torch.testing.assert_close(p.log_start.exp(), torch.tensor(want_nu, dtype=F64), **tol)
    torch.testing.assert_close(p.log_transitions.exp(), torch.tensor(want_a, dtype=F64), **tol)
    torch.testing.assert_close(p.log_end.exp(), torch.tensor(want_stop, dtype=F64), **tol)
    torch.testing.assert_close(p.log_emissions.exp(), torch.tensor(want_b, dtype=F64), **tol)
    # Every row of [A | stop] and of B sums to one.
    rows = p.log_transitions.exp().sum(1) + p.log_end.exp()
    torch.testing.assert_close(rows, torch.ones(K, dtype=F64), rtol=0, atol=1e-14)
    torch.testing.assert_close(
        p.log_emissions.exp().sum(1), torch.ones(K, dtype=F64), rtol=0, atol=1e-14
    )


def test_proposition_1_mle_maximises_joint_likelihood_gibbs() -> None:
    K, V = 3, 5
    words, tags, mask = _corpus(2, 25, 6, K, V)
    hmm = _fit_hmm(K, V, words, tags, mask, 1e-300)  # c + 1e-300 == c: exactly the frequencies
    mle = hmm.log_parameters()

    def joint_loglik(p: HMMParameters) -> float:
        return float(engine.score(hmm_potentials(p, words, mask), tags).sum())

    # At the MLE: the engine's joint log-likelihood is the closed form sum_i c_i log(c_i / sum_l c_l).
    start, trans, end, emit = _hand_counts(words, tags, mask, K, V)

    def row_ll(counts: list[int]) -> float:
        n = sum(counts)
        return sum(c * math.log(c / n) for c in counts if c > 0)

    closed = row_ll(start) + sum(row_ll(trans[j] + [end[j]]) + row_ll(emit[j]) for j in range(K))
    best = joint_loglik(mle)
    assert best == pytest.approx(closed, rel=1e-13)
    assert best == pytest.approx(-float(hmm.loss(hmm.emit(words), tags, mask, "sum")), rel=1e-13)

    # Gibbs: every other valid parameter does worse, near or far from the MLE.
    g = torch.Generator().manual_seed(3)
    mle_start = mle.log_start.exp()
    mle_rows = torch.cat([mle.log_transitions.exp(), mle.log_end.exp()[:, None]], 1)
    mle_emit = mle.log_emissions.exp()
    for i in range(60):
        eps = [1e-4, 1e-2, 0.3, 1.0][i % 4]
        q_start = (1 - eps) * mle_start + eps * random_simplex(g, K)
        q_rows = (1 - eps) * mle_rows + eps * random_simplex(g, K, K + 1)
        q_emit = (1 - eps) * mle_emit + eps * random_simplex(g, K, V)
        q = HMMParameters(q_start.log(), q_rows[:, :K].log(), q_rows[:, K].log(), q_emit.log())
        assert joint_loglik(q) < best


@pytest.mark.parametrize("alpha", [0.01, 1.0])
def test_proposition_1_length_law_nu_times_inverse_of_i_minus_a_times_e_is_one(
    alpha: float,
) -> None:
    K, V = 3, 5
    words, tags, mask = _corpus(4, 25, 6, K, V)
    hmm = _fit_hmm(K, V, words, tags, mask, alpha)
    assert float(hmm.length_law()) == pytest.approx(1.0, abs=1e-13)
    p = hmm.log_parameters()
    nu, A, e = p.log_start.exp(), p.log_transitions.exp(), p.log_end.exp()
    assert float(torch.linalg.eigvals(A).abs().max()) < 1.0
    # The partial sums of sum_T nu A^(T-1) e increase to 1.
    partial, v, total = [], nu.clone(), 0.0
    for _ in range(5000):
        total += float(v @ e)
        partial.append(total)
        v = v @ A
    assert all(b >= a for a, b in itertools.pairwise(partial))
    assert all(b > a for a, b in itertools.pairwise(partial[:20]))
    assert partial[-1] == pytest.approx(1.0, abs=1e-12)
    assert partial[0] < 1.0 - 1e-3


def test_proposition_1_hmm_is_a_distribution_over_sentences_of_every_length() -> None:
    """Sum of ``p(x)`` (the engine's ``log Z``) over every sentence of length ``T`` is ``nu A^(T-1) e``."""
    K, V = 2, 2
    words, tags, mask = _corpus(5, 12, 5, K, V)
    hmm = _fit_hmm(K, V, words, tags, mask, 0.5)
    p = hmm.log_parameters()
    nu, A, e = p.log_start.exp(), p.log_transitions.exp(), p.log_end.exp()
    cumulative = 0.0
    for T in range(1, 7):
        sentences = all_paths(T, V)  # every sentence of length T
        log_px = log_partition(hmm.potentials(hmm.emit(sentences)))
        # Independent: p(x) = sum over every tag path of the hand-computed joint.
        Z = all_paths(T, K)
        hand = torch.stack(
            [
                torch.logsumexp(
                    path_log_potential(
                        p.log_start, p.log_transitions, p.log_emissions, p.log_end, x, Z
                    ),
                    0,
                )
                for x in sentences
            ]
        )
        torch.testing.assert_close(log_px, hand, rtol=0, atol=1e-12)
        mass = float(log_px.exp().sum())
        assert mass == pytest.approx(float(nu @ torch.linalg.matrix_power(A, T - 1) @ e), rel=1e-12)
        cumulative += mass
    series = sum(float(nu @ torch.linalg.matrix_power(A, T - 1) @ e) for T in range(1, 7))
    assert cumulative == pytest.approx(series, rel=1e-12)
    assert 0 < cumulative < 1
    assert float(hmm.length_law()) == pytest.approx(1.0, abs=1e-13)


# ---------------------------------------------------------------------------------------- Theorem 2
K2, V2 = 3, 4


def _theorem_2_problem(seed: int = 7):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([4, 3, 4, 2, 1])
    T = int(lengths.max())
    mask = torch.arange(T)[None, :] < lengths[:, None]
    words = torch.randint(0, V2, (len(lengths), T), generator=g)
    tags = torch.randint(0, K2, (len(lengths), T), generator=g)
    enc = WordWindowEncoder(K2, V2, offsets=(0,)).double()
    crf = CRF(K2).double()
    params = param_list(enc, crf)
    set_flat(params, 0.7 * torch.randn(sum(p.numel() for p in params), generator=g, dtype=F64))
    sentences = [
        (words[i, :n].tolist(), tags[i, :n].tolist()) for i, n in enumerate(lengths.tolist())
    ]
    return enc, crf, params, words, tags, mask, sentences


def _mean_loglik(
    enc: WordWindowEncoder, crf: CRF, words: Tensor, tags: Tensor, mask: Tensor
) -> Tensor:
    return -crf.nll(enc.emissions(words, mask), tags, mask, reduction="mean")


def _flat_grad(out: Tensor, params: list[Tensor], create_graph: bool = False) -> Tensor:
    grads = torch.autograd.grad(
        out, params, retain_graph=True, create_graph=create_graph, allow_unused=True
    )
    return torch.cat(
        [
            (torch.zeros_like(p) if gr is None else gr).reshape(-1)
            for gr, p in zip(grads, params, strict=True)
        ]
    )


def _enumerated_moments(theta: Tensor, sentences) -> tuple[Tensor, Tensor, Tensor]:
    """Mean over sentences of ``F(gold)``, ``E[F]`` and ``Cov[F]`` under ``p_theta(z | x)``, by enumeration."""
    obs, mean, cov = 0.0, 0.0, 0.0
    for words, gold in sentences:
        _, feats = feature_matrix(words, K2, V2)
        p = torch.softmax(feats @ theta, 0)
        mu = p @ feats
        centred = feats - mu
        obs = obs + indicator_features(words, gold, K2, V2)
        mean = mean + mu
        cov = cov + centred.T @ (p[:, None] * centred)
    n = len(sentences)
    return obs / n, mean / n, cov / n


def test_theorem_2_score_is_theta_dot_f_and_gradient_is_observed_minus_expected() -> None:
    enc, crf, params, words, tags, mask, sentences = _theorem_2_problem()
    theta = flat_params(enc, crf).detach()
    # The indicator CRF's chain score of every path is theta . F(x, z).
    for i, (w, _) in enumerate(sentences):
        paths, feats = feature_matrix(w, K2, V2)
        ws = torch.tensor(w)[None].expand(len(paths), -1)
        got = engine.score(crf.potentials(enc.emissions(ws)), paths)
        torch.testing.assert_close(got, feats @ theta, rtol=0, atol=1e-12, msg=f"sentence {i}")
    grad = _flat_grad(_mean_loglik(enc, crf, words, tags, mask), params)
    obs, expected, _ = _enumerated_moments(theta, sentences)
    torch.testing.assert_close(grad, obs - expected, rtol=0, atol=1e-12)
    assert float((obs - expected).abs().max()) > 0.1  # not a vacuous comparison


def test_theorem_2_hessian_by_double_backward_is_minus_covariance_and_negative_semidefinite() -> (
    None
):
    enc, crf, params, words, tags, mask, sentences = _theorem_2_problem()
    theta = flat_params(enc, crf).detach()
    d = theta.numel()
    grad = _flat_grad(_mean_loglik(enc, crf, words, tags, mask), params, create_graph=True)
    rows = []
    for j in range(d):
        basis = torch.zeros(d, dtype=F64)
        basis[j] = 1.0
        rows.append(_flat_grad(grad @ basis, params))
    hessian = torch.stack(rows)
    _, _, cov = _enumerated_moments(theta, sentences)
    torch.testing.assert_close(hessian, -cov, rtol=0, atol=1e-11)
    torch.testing.assert_close(hessian, hessian.T, rtol=0, atol=1e-12)
    eig = torch.linalg.eigvalsh(hessian)
    assert float(eig.max()) < 1e-12  # concave
    assert float(eig.min()) < -1e-2  # and not trivially flat


def test_theorem_2_hessian_vector_product_matches_central_difference_of_gradient() -> None:
    enc, crf, params, words, tags, mask, sentences = _theorem_2_problem()
    theta = flat_params(enc, crf).detach().clone()
    v = torch.randn(theta.numel(), generator=torch.Generator().manual_seed(11), dtype=F64)
    grad = _flat_grad(_mean_loglik(enc, crf, words, tags, mask), params, create_graph=True)
    hvp = _flat_grad(grad @ v, params)
    _, _, cov = _enumerated_moments(theta, sentences)
    torch.testing.assert_close(hvp, -cov @ v, rtol=0, atol=1e-11)
    h = 1e-5
    set_flat(params, theta + h * v)
    g_plus = _flat_grad(_mean_loglik(enc, crf, words, tags, mask), params)
    set_flat(params, theta - h * v)
    g_minus = _flat_grad(_mean_loglik(enc, crf, words, tags, mask), params)
    torch.testing.assert_close((g_plus - g_minus) / (2 * h), hvp, rtol=0, atol=1e-8)


def _maximise_penalised(theta0: Tensor, lam: float):
    """L-BFGS (float64, strong Wolfe, tight tolerances) on ``ell(theta) - lam/2 ||theta||^2``."""
    enc, crf, params, words, tags, mask, sentences = _theorem_2_problem()
    set_flat(params, theta0)
    opt = torch.optim.LBFGS(
        params,
        max_iter=500,
        tolerance_grad=1e-13,
        tolerance_change=1e-16,
        history_size=50,
        line_search_fn="strong_wolfe",
    )

    def closure() -> Tensor:
        opt.zero_grad()
        theta = torch.cat([p.reshape(-1) for p in params])
        loss = -_mean_loglik(enc, crf, words, tags, mask) + 0.5 * lam * theta @ theta
        loss.backward()
        return loss

    for _ in range(10):
        opt.step(closure)
    closure()
    grad = torch.cat([p.grad.reshape(-1) for p in params])
    return flat_params(enc, crf).detach().clone(), grad, sentences


def test_theorem_2_l2_penalised_objective_has_one_maximiser_from_two_starts() -> None:
    lam = 0.1
    d = (V2 + 2) * K2 + K2 * K2 + 2 * K2
    starts = [
        torch.zeros(d, dtype=F64),
        3.0 * torch.randn(d, generator=torch.Generator().manual_seed(5), dtype=F64),
    ]
    solutions = []
    for theta0 in starts:
        theta, grad, sentences = _maximise_penalised(theta0, lam)
        assert float(grad.abs().max()) < 1e-8
        # First-order condition by enumeration: observed - expected features = lambda theta.
        obs, expected, _ = _enumerated_moments(theta, sentences)
        torch.testing.assert_close(obs - expected, lam * theta, rtol=0, atol=1e-8)
        solutions.append(theta)
    assert float((starts[0] - starts[1]).abs().max()) > 1.0
    # Strong concavity (lambda = 0.1) turns a gradient below 1e-8 into a distance below 1e-7.
    assert float((solutions[0] - solutions[1]).abs().max()) < 1e-6


# ---------------------------------------------------------------------------------------- Theorem 3
def _conditional_library(pot_fn, params, words: Tensor, paths: Tensor) -> Tensor:
    """``p(z | x)`` of every path from the chain engine: ``exp(score - log Z)``."""
    ws = words[None].expand(len(paths), -1)
    pot = pot_fn(params, ws)
    return (engine.score(pot, paths) - log_partition(pot)).exp()


def _random_hmm(g: torch.Generator, K: int, V: int) -> HMMParameters:
    rows = random_simplex(g, K, K + 1)
    return HMMParameters(
        log_start=random_simplex(g, K).log(),
        log_transitions=rows[:, :K].log(),
        log_end=rows[:, K].log(),
        log_emissions=random_simplex(g, K, V).log(),
    )


def _hmm_conditional_by_hand(p: HMMParameters, words: Tensor, paths: Tensor) -> Tensor:
    joint = path_log_potential(
        p.log_start, p.log_transitions, p.log_emissions, p.log_end, words, paths
    )
    return torch.softmax(joint, 0)


def _crf_conditional_by_hand(w: IndicatorCRFWeights, words: Tensor, paths: Tensor) -> Tensor:
    return torch.softmax(
        path_log_potential(w.start, w.transitions, w.emissions, w.end, words, paths), 0
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_theorem_3a_hmm_conditional_is_indicator_crf_with_log_parameters(seed: int) -> None:
    K, V = 3, 4
    g = torch.Generator().manual_seed(100 + seed)
    hmm = _random_hmm(g, K, V)
    weights = hmm_to_crf(hmm)
    for T in range(1, 5):
        paths = all_paths(T, K)
        for _ in range(3):
            x = torch.randint(0, V, (T,), generator=g)
            want = _hmm_conditional_by_hand(hmm, x, paths)
            torch.testing.assert_close(
                _crf_conditional_by_hand(weights, x, paths), want, rtol=0, atol=1e-12
            )
            got = _conditional_library(indicator_crf_potentials, weights, x, paths)
            torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
            # And the HMM's own chain: log Z is log p(x).
            ws = x[None]
            log_px = torch.logsumexp(
                path_log_potential(
                    hmm.log_start, hmm.log_transitions, hmm.log_emissions, hmm.log_end, x, paths
                ),
                0,
            )
            assert float(log_partition(hmm_potentials(hmm, ws))) == pytest.approx(
                float(log_px), abs=1e-12
            )


def _random_weights(g: torch.Generator, K: int, V: int, scale: float = 1.0) -> IndicatorCRFWeights:
    return IndicatorCRFWeights(
        transitions=scale * torch.randn(K, K, generator=g, dtype=F64),
        emissions=scale * torch.randn(K, V, generator=g, dtype=F64),
        start=scale * torch.randn(K, generator=g, dtype=F64),
        end=scale * torch.randn(K, generator=g, dtype=F64),
    )


def _assert_valid_hmm(p: HMMParameters) -> None:
    K = p.log_start.shape[0]
    for x in (p.log_start, p.log_transitions, p.log_end, p.log_emissions):
        assert bool(torch.isfinite(x).all())
        assert bool((x.exp() > 0).all())
    one = torch.ones(K, dtype=F64)
    torch.testing.assert_close(
        p.log_transitions.exp().sum(1) + p.log_end.exp(), one, rtol=0, atol=1e-12
    )
    torch.testing.assert_close(p.log_emissions.exp().sum(1), one, rtol=0, atol=1e-12)
    assert float(p.log_start.exp().sum()) == pytest.approx(1.0, abs=1e-12)


def _rho(w: IndicatorCRFWeights) -> float:
    M = w.transitions.exp() * w.emissions.exp().sum(1)[None, :]
    return float(torch.linalg.eigvals(M).abs().max())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_theorem_3b_any_indicator_crf_is_a_valid_hmm_with_the_same_conditional(seed: int) -> None:
    K, V = 3, 4
    g = torch.Generator().manual_seed(200 + seed)
    weights = _random_weights(g, K, V)
    hmm = crf_to_hmm(weights)
    _assert_valid_hmm(hmm)
    for T in range(1, 6):
        paths = all_paths(T, K)
        for _ in range(3):
            x = torch.randint(0, V, (T,), generator=g)
            want = _crf_conditional_by_hand(weights, x, paths)
            torch.testing.assert_close(
                _hmm_conditional_by_hand(hmm, x, paths), want, rtol=0, atol=1e-12
            )
            got = _conditional_library(hmm_potentials, hmm, x, paths)
            torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
            torch.testing.assert_close(
                _conditional_library(indicator_crf_potentials, weights, x, paths),
                want,
                rtol=0,
                atol=1e-12,
            )


def test_theorem_3b_joint_is_crf_score_over_n_c_to_the_t() -> None:
    """The proof's telescoping: ``log p_HMM(x, z) = score(z) - log N - T log c`` on every path."""
    K, V = 3, 4
    g = torch.Generator().manual_seed(300)
    w = _random_weights(g, K, V)
    c = 3.0 * _rho(w)
    hmm = crf_to_hmm(w, c=c)
    S = w.emissions.exp().sum(1)
    M = w.transitions.exp() * S[None, :]
    h = torch.linalg.solve(c * torch.eye(K, dtype=F64) - M, w.end.exp())
    assert bool((h > 0).all())
    log_N = math.log(float((w.start.exp() * S * h).sum()))
    for T in range(1, 6):
        paths = all_paths(T, K)
        x = torch.randint(0, V, (T,), generator=g)
        joint = path_log_potential(
            hmm.log_start, hmm.log_transitions, hmm.log_emissions, hmm.log_end, x, paths
        )
        crf_score = path_log_potential(w.start, w.transitions, w.emissions, w.end, x, paths)
        torch.testing.assert_close(
            joint - crf_score, torch.full_like(joint, -log_N - T * math.log(c)), rtol=0, atol=1e-12
        )


def test_theorem_3b_any_c_above_spectral_radius_works_and_c_at_or_below_raises() -> None:
    K, V = 3, 4
    g = torch.Generator().manual_seed(400)
    w = _random_weights(g, K, V)
    rho = _rho(w)
    x = torch.randint(0, V, (4,), generator=g)
    paths = all_paths(4, K)
    want = _crf_conditional_by_hand(w, x, paths)
    hmms = [crf_to_hmm(w, c=factor * rho) for factor in (1.05, 1.5, 10.0)]
    for hmm in hmms:
        _assert_valid_hmm(hmm)
        torch.testing.assert_close(
            _conditional_library(hmm_potentials, hmm, x, paths), want, rtol=0, atol=1e-12
        )
    # Different c give different HMMs (the family of solutions is real), all with the same conditional.
    assert float((hmms[0].log_end - hmms[2].log_end).abs().max()) > 1e-3
    for bad in (rho * (1 - 1e-9), 0.5 * rho, 0.0, -1.0):
        with pytest.raises(ValueError, match="spectral radius"):
            crf_to_hmm(w, c=bad)


# ---------------------------------------------------------------------------------------- Theorem 4
THEOREM_4_CASES = [
    (seed, T, K) for seed, (T, K) in enumerate([(3, 3), (4, 3), (5, 3), (5, 2), (4, 4), (6, 2)] * 3)
]


def _risks(row) -> tuple[Tensor, Tensor, Tensor]:
    """Every path as a candidate ``ẑ``: expected 0/1 loss and expected Hamming loss, by enumeration."""
    p = torch.tensor(row.probs(), dtype=F64)
    paths = torch.tensor(row.paths, dtype=torch.long)[:, row.positions]  # (N, n)
    wrong = paths[:, None, :] != paths[None, :, :]  # (candidate, truth, position)
    zero_one = wrong.any(-1).to(F64) @ p
    hamming = wrong.sum(-1).to(F64) @ p
    return paths, zero_one, hamming


@pytest.mark.parametrize(("seed", "T", "K"), THEOREM_4_CASES)
def test_theorem_4_viterbi_minimises_sequence_loss_and_posterior_minimises_hamming(
    seed: int, T: int, K: int
) -> None:
    args = forbidden_chain(seed, 3, T, K, per_position=bool(seed % 2))
    E = args[0] * 0.5  # flatter distributions: the two decoders disagree more often
    args = (E, *args[1:])
    pot = make_potentials(*args)
    vit = viterbi(pot)[1]
    post = posterior_decode(pot)
    for b, row in enumerate(enumerate_rows(*args)):
        if not row.positions:
            continue
        paths, zero_one, hamming = _risks(row)
        v = vit[b, row.positions]
        q = post[b, row.positions]
        iv = int(((paths == v).all(1)).nonzero()[0, 0])
        # (a) Viterbi's expected sequence loss is the minimum over every candidate path (and 1 - p(z*)).
        assert float(zero_one[iv]) <= float(zero_one.min()) + 1e-12
        assert float(zero_one[iv]) == pytest.approx(
            row.expected_sequence_loss(row.paths[iv]), abs=1e-12
        )
        # (b) Posterior decoding's expected Hamming loss is the minimum over every tag sequence (it
        # may string together a forbidden bigram, so it is compared with every valid path).
        guess = [-1] * T
        for t, z in zip(row.positions, q.tolist(), strict=True):
            guess[t] = z
        assert row.expected_hamming(guess) <= float(hamming.min()) + 1e-12


def test_theorem_4_the_two_decoders_answer_different_losses() -> None:
    """On some chain Viterbi is strictly worse in Hamming risk and posterior decoding in 0/1 risk."""

    def disagreement() -> tuple[float, float, float, float] | None:
        for seed in range(40):
            args = forbidden_chain(500 + seed, 3, 5, 3, per_position=False)
            args = (args[0] * 0.3, *args[1:])
            pot = make_potentials(*args)
            vit, post = viterbi(pot)[1], posterior_decode(pot)
            for b, row in enumerate(enumerate_rows(*args)):
                if not row.positions or vit[b].tolist() == post[b].tolist():
                    continue
                paths, zero_one, hamming = _risks(row)
                iv = int(((paths == vit[b, row.positions]).all(1)).nonzero()[0, 0])
                found = (paths == post[b, row.positions]).all(1)
                if not found.any():  # posterior decoding strung a forbidden bigram together
                    continue
                iq = int(found.nonzero()[0, 0])
                if hamming[iv] > hamming[iq] + 1e-6 and zero_one[iq] > zero_one[iv] + 1e-6:
                    return (
                        float(hamming[iv]),
                        float(hamming[iq]),
                        float(zero_one[iv]),
                        float(zero_one[iq]),
                    )
        return None

    assert disagreement() is not None


# ---------------------------------------------------------------------------------- Proposition 2
def _randomise(module: torch.nn.Module, g: torch.Generator, scale: float) -> None:
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))


@pytest.mark.parametrize("w", [0, 1])
def test_proposition_2_memm_prefix_marginal_ignores_words_after_t_plus_w(w: int) -> None:
    K, V, T = 3, 5, 6
    g = torch.Generator().manual_seed(600 + w)
    offsets = (-1, 0) if w == 0 else (-1, 0, 1)
    enc = WordWindowEncoder(K, V, offsets=offsets).double()
    memm, crf = MEMM(K).double(), CRF(K).double()
    for m in (enc, memm, crf):
        _randomise(m, g, 1.5)
        m.requires_grad_(False)
    Z = all_paths(T, K)
    checked = 0
    for _ in range(4):
        x = torch.randint(0, V, (1, T), generator=g)
        for t in range(T - w - 1):  # positions 0..t are the prefix; words t+w+1.. change
            x2 = x.clone()
            x2[0, t + w + 1 :] = torch.randint(0, V, (T - t - w - 1,), generator=g)
            x2[0, t + w + 1] = (x[0, t + w + 1] + 1) % V  # at least one word really changes
            em1, em2 = enc.emissions(x), enc.emissions(x2)
            m1, m2 = memm.marginals(em1), memm.marginals(em2)
            assert float((m1[0, : t + 1] - m2[0, : t + 1]).abs().max()) <= 1e-15
            # The joint of z_{1:t}, by enumerating every path of the MEMM's chain (log Z = 0).
            prefixes = []
            for em in (em1, em2):
                pot = memm.potentials(em.expand(len(Z), -1, -1))
                assert float(log_partition(pot).abs().max()) < 1e-13
                p = engine.score(pot, Z).exp()
                prefixes.append(p.reshape(K ** (t + 1), K ** (T - t - 1)).sum(1))
            assert float((prefixes[0] - prefixes[1]).abs().max()) <= 1e-15
            # ... which is the product of the first t+1 local factors (computed from local_log_probs).
            first, edges = memm.local_log_probs(em1)
            P = all_paths(t + 1, K)
            local = first[0, 0, P[:, 0]] + sum(
                edges[0, s - 1, P[:, s - 1], P[:, s]] for s in range(1, t + 1)
            )
            torch.testing.assert_close(prefixes[0], local.exp(), rtol=0, atol=1e-15)
            # The CRF on the same emissions does see the change (so this test can fail).
            c1, c2 = crf.marginals(em1), crf.marginals(em2)
            assert float((c1[0, : t + 1] - c2[0, : t + 1]).abs().max()) > 1e-6
            # And the MEMM's marginals after t + w do move (the words matter there).
            assert float((m1[0, t + w + 1 :] - m2[0, t + w + 1 :]).abs().max()) > 1e-6
            checked += 1
    assert checked == 4 * (T - w - 1)


# ------------------------------------------------------------------------------------ Corollary 2
def _world(seed: int, K: int, V: int, T: int):
    """A generative HMM world of fixed length ``T`` (no end state), its every (x, z) and joint."""
    g = torch.Generator().manual_seed(seed)
    nu = random_simplex(g, K)
    A = random_simplex(g, K, K, conc=0.7)
    B = random_simplex(g, K, V, conc=0.7)
    X, Z = all_paths(T, V), all_paths(T, K)
    joint = torch.stack(
        [path_log_potential(nu.log(), A.log(), B.log(), torch.zeros(K, dtype=F64), x, Z) for x in X]
    ).exp()  # (|X|, |Z|)
    assert float(joint.sum()) == pytest.approx(1.0, abs=1e-12)
    # p(x, z_t = k): (|X|, T, K)
    node = torch.stack(
        [torch.stack([joint[:, Z[:, t] == k].sum(1) for k in range(K)], 1) for t in range(T)], 1
    )
    return (nu, A, B), X, Z, joint, node


def _lagged_bayes_accuracy(X: Tensor, node: Tensor, w: int) -> float:
    """Expected token accuracy of ``argmax_k p(z_t = k | x_{1:t+w})``, by grouping sentences by prefix."""
    _, T, K = node.shape
    total = 0.0
    for t in range(T):
        keys = [tuple(x[: t + w + 1].tolist()) for x in X]
        groups: dict[tuple[int, ...], Tensor] = {}
        for key, row in zip(keys, node[:, t], strict=True):
            groups[key] = groups.get(key, torch.zeros(K, dtype=F64)) + row
        total += sum(float(v.max()) for v in groups.values())
    return total / T


def _expected_accuracy(node: Tensor, decisions: Tensor) -> float:
    """``E[#correct] / T`` of per-sentence decisions ``(|X|, T)`` under the world."""
    return float(node.gather(2, decisions[..., None]).sum()) / node.shape[1]


def _prefix_chain_ceiling(world, X: Tensor, node: Tensor, w: int) -> float:
    """The ceiling the seed's way: ``p(z_t | x_{1:t+w})`` as the marginal of the prefix chain."""
    nu, A, B = world
    N, T, K = node.shape
    decisions = torch.empty(N, T, dtype=torch.long)
    for t in range(T):
        L = min(t + w + 1, T)
        em = B.log().T[X[:, :L]]  # (N, L, K)
        pot = make_potentials(em, A.log(), nu.log(), torch.zeros(K, dtype=F64))
        decisions[:, t] = marginals(pot)[:, t].argmax(-1)
    return _expected_accuracy(node, decisions)


def _fit_memm(memm: MEMM, enc: WordWindowEncoder, X: Tensor, Z: Tensor, joint: Tensor) -> None:
    """Minimise the expected local log-loss under the world (exact, over every (x, z))."""
    nx, nz = joint.shape
    ws = X.repeat_interleave(nz, 0)
    zs = Z.repeat(nx, 1)
    weights = joint.reshape(-1)
    params = [*enc.parameters(), *memm.parameters()]
    opt = torch.optim.LBFGS(params, max_iter=200, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        opt.zero_grad()
        loss = (memm.loss(enc.emissions(ws), zs, reduction="none") * weights).sum()
        loss = loss + 1e-3 * sum((p**2).sum() for p in params)
        loss.backward()
        return loss

    opt.step(closure)


@pytest.mark.parametrize(("K", "w"), [(2, 0), (2, 1), (3, 0), (3, 1)])
def test_corollary_2_posterior_decoded_memm_never_beats_lagged_bayes_rule(K: int, w: int) -> None:
    V, T = 3, 4
    world, X, Z, joint, node = _world(700 + 10 * K + w, K, V, T)
    ceiling = _lagged_bayes_accuracy(X, node, w)
    assert ceiling == pytest.approx(_prefix_chain_ceiling(world, X, node, w), abs=1e-12)
    # The full Bayes rule (posterior decoding of the true chain, Theorem 4(b)) sees every word.
    nu, A, B = world
    true_pot = make_potentials(B.log().T[X], A.log(), nu.log(), torch.zeros(K, dtype=F64))
    full_bayes = float(node.amax(-1).sum()) / T
    assert _expected_accuracy(node, posterior_decode(true_pot)) == pytest.approx(
        full_bayes, abs=1e-12
    )
    assert ceiling <= full_bayes + 1e-12
    offsets = (-1, 0) if w == 0 else (-1, 0, 1)
    g = torch.Generator().manual_seed(800 + K + w)
    accuracies = []
    for i in range(6):
        enc = WordWindowEncoder(K, V, offsets=offsets).double()
        memm = MEMM(K).double()
        for m in (enc, memm):
            _randomise(m, g, 1.5)
        if i == 0:
            _fit_memm(memm, enc, X, Z, joint)
        with torch.no_grad():
            decisions = memm.posterior_decode(enc.emissions(X))
        # Proposition 2's mechanism: the decision at t is a function of x_{1:t+w}.
        for t in range(T):
            seen: dict[tuple[int, ...], int] = {}
            for x, d in zip(X.tolist(), decisions[:, t].tolist(), strict=True):
                assert seen.setdefault(tuple(x[: t + w + 1]), d) == d
        acc = _expected_accuracy(node, decisions)
        assert acc <= ceiling + 1e-12, (i, acc, ceiling)
        accuracies.append(acc)
    # The fitted MEMM gets close to the ceiling: the bound is tested where it binds.
    assert accuracies[0] >= ceiling - 0.05
    assert accuracies[0] > max(accuracies[1:]) - 1e-12


def test_corollary_2_remark_viterbi_decoded_memm_is_not_bound_by_the_ceiling() -> None:
    """The Remark: a causal MEMM (w = 0) decoded by Viterbi beats the lagged Bayes rule here.

    A deterministic instance found by search (world seed 5236, the MEMM fitted by exact expected
    local log-loss): its posterior decoding sits at the ceiling, its Viterbi decoding above it.
    """
    K, V, T, w = 2, 3, 4, 0
    _, X, Z, joint, node = _world(5236, K, V, T)
    ceiling = _lagged_bayes_accuracy(X, node, w)
    enc, memm = WordWindowEncoder(K, V, offsets=(-1, 0)).double(), MEMM(K).double()
    g = torch.Generator().manual_seed(1)
    for m in (enc, memm):
        _randomise(m, g, 1.0)
    _fit_memm(memm, enc, X, Z, joint)
    with torch.no_grad():
        em = enc.emissions(X)
        posterior = _expected_accuracy(node, memm.posterior_decode(em))
        best_path = _expected_accuracy(node, memm.decode(em))
    assert posterior <= ceiling + 1e-12
    assert posterior >= ceiling - 1e-6  # the fitted MEMM reaches the ceiling
    assert best_path > ceiling + 5e-3


# ---------------------------------------------------------------------------------------- Theorem 5
K5, V5 = 3, 5


def _perceptron_model() -> tuple[WordWindowEncoder, StructuredPerceptron]:
    return WordWindowEncoder(K5, V5, offsets=(0,)).double(), StructuredPerceptron(K5).double()


def test_theorem_5_perceptron_score_is_theta_dot_f() -> None:
    enc, perc = _perceptron_model()
    g = torch.Generator().manual_seed(900)
    params = param_list(enc, perc)
    theta = torch.randn(sum(p.numel() for p in params), generator=g, dtype=F64)
    set_flat(params, theta)
    for T in (1, 3, 4):
        x = torch.randint(0, V5, (T,), generator=g).tolist()
        paths, feats = feature_matrix(x, K5, V5)
        ws = torch.tensor(x)[None].expand(len(paths), -1)
        got = engine.score(perc.potentials(enc.emissions(ws)), paths)
        torch.testing.assert_close(got, feats @ theta, rtol=0, atol=1e-12)


def _teacher_data(seed: int, n: int):
    g = torch.Generator().manual_seed(seed)
    d = (V5 + 2) * K5 + K5 * K5 + 2 * K5
    u = torch.randn(d, generator=g, dtype=F64)
    u[V5 * K5 : (V5 + 2) * K5] = 0.0  # the encoder's boundary rows never fire
    u = u / u.norm()
    data = []
    for _ in range(n):
        T = int(torch.randint(3, 5, (1,), generator=g))
        x = torch.randint(0, V5, (T,), generator=g).tolist()
        paths, feats = feature_matrix(x, K5, V5)
        s = feats @ u
        order = torch.argsort(s, descending=True)
        gold = int(order[0])
        margin = float(s[gold] - s[order[1]])  # min over z != gold of u . (F(gold) - F(z))
        radius = float((feats[gold] - feats).norm(dim=1).max())  # max over z of ||F(gold) - F(z)||
        data.append((x, paths[gold].tolist(), margin, radius))
    return u, data


def test_theorem_5_teacher_labels_are_the_teachers_viterbi_paths() -> None:
    u, data = _teacher_data(901, 20)
    enc, perc = _perceptron_model()
    set_flat(param_list(enc, perc), u)
    for x, gold, _, _ in data:
        path = perc.viterbi(enc.emissions(torch.tensor([x])))[1]
        assert path[0].tolist() == gold


def _train_perceptron(kept: list, max_epochs: int = 50) -> tuple[int, bool]:
    """Algorithm 1 (plain perceptron, theta = 0, batch 1, SGD rate 1 on the "sum" loss).

    Returns the total number of mistakes and whether an epoch passed without one.
    """
    enc, perc = _perceptron_model()
    params = param_list(enc, perc)
    assert float(flat_params(enc, perc).detach().abs().max()) == 0.0  # Algorithm 1: theta = 0
    opt = torch.optim.SGD(params, lr=1.0)
    mistakes = 0
    for _ in range(max_epochs):
        epoch_mistakes = 0
        for x, gold, _, _ in kept:
            words, tags = torch.tensor([x]), torch.tensor([gold])
            em = enc.emissions(words)
            if not bool(perc.mistakes(em, tags)[0]):
                continue  # the gold path won: no update
            epoch_mistakes += 1
            with torch.no_grad():
                predicted = viterbi(perc.potentials(em))[1][0].tolist()
            assert predicted != gold
            before = flat_params(enc, perc).detach().clone()
            opt.zero_grad()
            perc.loss(em, tags, reduction="sum").backward()
            opt.step()
            # One SGD step of rate 1 on the "sum" loss is the perceptron update F(gold) - F(ẑ).
            update = flat_params(enc, perc).detach() - before
            want = indicator_features(x, gold, K5, V5) - indicator_features(x, predicted, K5, V5)
            torch.testing.assert_close(update, want, rtol=0, atol=0)
        mistakes += epoch_mistakes
        if epoch_mistakes == 0:
            # Separated: every gold path wins, and the loss (score(viterbi) - score(gold)) is 0.
            for x, gold, _, _ in kept:
                em = enc.emissions(torch.tensor([x]))
                assert float(perc.loss(em, torch.tensor([gold]), reduction="sum").detach()) == 0.0
            return mistakes, True
    return mistakes, False


def test_theorem_5_mistakes_at_most_r2_over_gamma2_at_every_margin() -> None:
    _, data = _teacher_data(903, 30)
    data = [row for row in data if row[2] > 1e-9]  # a tie (identical F of two paths) has no margin
    by_margin = sorted(data, key=lambda r: r[2], reverse=True)
    results = []
    for frac in (0.85, 0.6, 0.4, 0.2):  # four margins (the smallest ones cost the most epochs)
        kept = by_margin[: max(1, int(len(by_margin) * frac))]
        gamma = min(r[2] for r in kept)  # every kept sentence is separated by at least gamma
        R = max(r[3] for r in kept)
        mistakes, converged = _train_perceptron(kept)
        assert converged, f"no mistake-free epoch in 50 at gamma={gamma}"
        bound = R**2 / gamma**2
        assert mistakes <= bound, (gamma, R, mistakes, bound)
        results.append((gamma, mistakes, bound))
    assert len({g for g, _, _ in results}) == 4
    assert all(m >= 1 for _, m, _ in results)  # the perceptron did have to learn
