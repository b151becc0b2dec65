"""Tests of crfhead.theory.worlds: the simulated worlds, their exact Bayes tagger and the lagged Bayes rule."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Iterator

import pytest
import torch
from torch import Tensor

from crfhead.engine import log_partition, marginals, max_marginals, score, viterbi
from crfhead.theory.payload import trellis_example, viz_payload
from crfhead.theory.worlds import (
    World,
    conditional_log_loss,
    next_state_world,
    token_accuracy,
    well_specified_world,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    """These are many small tensor ops: one intra-op thread is faster and immune to a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


WORLDS = {"well_specified": well_specified_world, "next_state": next_state_world}


def _world(name: str, length: int | None = None) -> World:
    world = WORLDS[name]()
    return world if length is None else dataclasses.replace(world, length=length)


def _tiny_world(next_state_prob: float, length: int = 4) -> World:
    """A random 3-state, 3-word world, small enough to sum out every unobserved word."""
    g = torch.Generator().manual_seed(7)

    def rows(*shape: int) -> Tensor:
        x = torch.rand(*shape, generator=g, dtype=torch.float64) + 0.1
        return x / x.sum(-1, keepdim=True)

    return World("tiny", rows(3), rows(3, 3), rows(3, 3), next_state_prob, length)


def _all_paths(K: int, T: int) -> Tensor:
    return torch.tensor(list(itertools.product(range(K), repeat=T)), dtype=torch.int64)


def _samples(name: str, n: int, seed: int) -> tuple[World, Tensor, Tensor]:
    world = _world(name)
    words, states = world.sample(n, torch.Generator().manual_seed(seed))
    return world, words, states


# --- construction and sampling ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_world_parameters_are_float64_distributions_of_the_documented_sizes(name: str) -> None:
    world = _world(name)
    assert (world.num_states, world.vocab_size, world.length) == (8, 24, 24)
    assert world.next_state_prob == (0.5 if name == "next_state" else 0.0)
    for x in (world.start, world.transitions, world.emissions):
        assert x.dtype == torch.float64
        assert bool((x > 0).all())
        torch.testing.assert_close(x.sum(-1), torch.ones_like(x.sum(-1)), rtol=0, atol=1e-12)


def test_both_worlds_share_one_hmm_with_two_regimes() -> None:
    ws, ns = well_specified_world(), next_state_world()
    for a, b in ((ws.start, ns.start), (ws.transitions, ns.transitions)):
        assert torch.equal(a, b)
    assert torch.equal(ws.emissions, ns.emissions)
    within = torch.zeros(8, 8, dtype=torch.bool)
    within[:4, :4] = within[4:, 4:] = True
    assert bool(
        (ws.transitions[within].reshape(8, 4).sum(1) > 0.9).all()
    )  # mostly stays in its regime


def test_world_rejects_inconsistent_shapes() -> None:
    w = well_specified_world()
    with pytest.raises(ValueError, match="emissions must be"):
        World("bad", w.start, w.transitions, w.emissions[:4], 0.0)
    with pytest.raises(ValueError, match="transitions"):
        World("bad", w.start, w.transitions[:4], w.emissions, 0.0)
    with pytest.raises(ValueError, match="next_state_prob"):
        World("bad", w.start, w.transitions, w.emissions, 1.5)
    with pytest.raises(ValueError, match="n must be"):
        w.sample(0, torch.Generator())
    words, states = w.sample(2, torch.Generator())
    with pytest.raises(ValueError, match="states must have the shape"):
        w.joint_log_prob(words, states[:, :3])


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_sampling_is_reproducible_and_in_range(name: str) -> None:
    world = _world(name)
    a = world.sample(50, torch.Generator().manual_seed(3))
    b = world.sample(50, torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    words, states = a
    assert words.shape == states.shape == (50, 24)
    assert words.dtype == states.dtype == torch.int64
    assert int(words.min()) >= 0 and int(words.max()) < world.vocab_size
    assert int(states.min()) >= 0 and int(states.max()) < world.num_states


def _assert_frequencies(counts: Tensor, probs: Tensor, n: int) -> None:
    """Empirical frequencies within 5 standard errors of the probabilities."""
    freq = counts.double() / n
    se = (probs * (1 - probs) / n).sqrt()
    assert bool(((freq - probs).abs() <= 5 * se + 1e-12).all()), (freq - probs).abs() / se


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_sampling_frequencies_match_the_model(name: str) -> None:
    n = 20000
    world, words, states = _samples(name, n, seed=11)
    K, V, p = world.num_states, world.vocab_size, world.next_state_prob
    nu, a, b = world.start, world.transitions, world.emissions
    _assert_frequencies(torch.bincount(states[:, 0], minlength=K), nu, n)
    _assert_frequencies(torch.bincount(states[:, 1], minlength=K), nu @ a, n)
    # The first word straddles the first edge in the next-state world: sum over (z_0, z_1).
    pair = nu[:, None] * a  # p(z_0 = j, z_1 = k)
    first_word = (1 - p) * (nu @ b) + p * (pair.sum(0) @ b)
    _assert_frequencies(torch.bincount(words[:, 0], minlength=V), first_word, n)
    # The last word always comes from the last state.
    last_state = nu @ torch.linalg.matrix_power(a, world.length - 1)
    _assert_frequencies(torch.bincount(words[:, -1], minlength=V), last_state @ b, n)


def test_next_state_words_follow_the_next_state() -> None:
    n = 20000
    world = next_state_world(next_state_prob=0.3)  # asymmetric, unlike 0.5
    words, states = world.sample(n, torch.Generator().manual_seed(12))
    # Among tokens whose state is k and whose next state is j != k, the frequency of word v is
    # (1 - p) b_k(v) + p b_j(v): pick the commonest (k, j) pair.
    k, j = states[:, 0], states[:, 1]
    pair = torch.bincount(k * 8 + j, minlength=64)
    pair[torch.arange(8) * 9] = 0  # only k != j
    best = int(pair.argmax())
    sel = (k * 8 + j) == best
    m = int(sel.sum())
    expect = 0.7 * world.emissions[best // 8] + 0.3 * world.emissions[best % 8]
    _assert_frequencies(torch.bincount(words[sel, 0], minlength=world.vocab_size), expect, m)


# --- the joint and the exact conditional --------------------------------------------------------------


@pytest.mark.parametrize("p", [0.0, 0.3, 0.5])
def test_joint_log_prob_matches_a_hand_computed_path(p: float) -> None:
    world = dataclasses.replace(_tiny_world(p), length=3)
    nu, a, b = world.start.tolist(), world.transitions.tolist(), world.emissions.tolist()
    z, x = [2, 0, 1], [1, 2, 0]
    expect = math.log(nu[2]) + math.log(a[2][0]) + math.log(a[0][1])
    expect += math.log((1 - p) * b[2][1] + p * b[0][1])
    expect += math.log((1 - p) * b[0][2] + p * b[1][2])
    expect += math.log(b[1][0])
    got = world.joint_log_prob(torch.tensor([x]), torch.tensor([z]))
    assert abs(float(got[0]) - expect) < 1e-12


@pytest.mark.parametrize("name", [*sorted(WORLDS), "tiny_0.3"])
def test_bayes_potentials_equal_the_conditional_of_the_joint_on_every_path(name: str) -> None:
    # p = 0.5 is symmetric in (z_t, z_{t+1}); the tiny world at p = 0.3 pins which is which.
    world = _tiny_world(0.3) if name == "tiny_0.3" else _world(name, length=4)
    words, _ = world.sample(2, torch.Generator().manual_seed(5))
    paths = _all_paths(world.num_states, 4)  # 4096 paths
    for x in words:
        xs = x.expand(len(paths), -1).contiguous()
        pot = world.bayes_potentials(xs)
        assert pot.emissions.dtype == torch.float64
        joint = world.joint_log_prob(xs, paths)
        log_px = torch.logsumexp(joint, 0)
        torch.testing.assert_close(
            log_partition(pot), log_px.expand(len(paths)), rtol=0, atol=1e-10
        )
        cond = score(pot, paths) - log_partition(pot)
        torch.testing.assert_close(cond, joint - log_px, rtol=0, atol=1e-10)


def test_next_state_bayes_potentials_fold_words_into_edges() -> None:
    world = _world("next_state")
    words, _ = world.sample(3, torch.Generator().manual_seed(1))
    pot = world.bayes_potentials(words)
    assert pot.transitions.shape == (3, 23, 8, 8)
    assert bool((pot.emissions[:, :-1] == 0).all())
    torch.testing.assert_close(pot.emissions[:, -1], world.emissions.T[words[:, -1]].log())


# --- lagged Bayes rule (Corollary 2) ---------------------------------------------------------------


def _brute_lagged(world: World, x: Tensor, lookahead: int) -> Tensor:
    """``p(z_t | x_{0..t+w})`` by enumerating every path and every completion of the unseen words."""
    K, V, T = world.num_states, world.vocab_size, world.length
    paths = _all_paths(K, T)
    out = torch.zeros(T, K, dtype=torch.float64)
    for t in range(T):
        m = min(t + lookahead + 1, T)
        tails = _all_paths(V, T - m)  # every completion of the unobserved words
        full = torch.cat([x[:m].expand(len(tails), -1), tails], 1)  # (C, T)
        xs = full.repeat_interleave(len(paths), 0)
        zs = paths.repeat(len(tails), 1)
        joint = world.joint_log_prob(xs, zs).reshape(len(tails), len(paths)).logsumexp(0)
        post = (joint - joint.logsumexp(0)).exp()  # p(z | x_{0..m-1}) over paths
        out[t] = torch.zeros(K, dtype=torch.float64).index_add_(0, paths[:, t], post)
    return out


@pytest.mark.parametrize("p", [0.0, 0.3, 0.5])
@pytest.mark.parametrize("lookahead", [0, 1, 2])
def test_lagged_marginals_match_brute_force_on_a_tiny_world(p: float, lookahead: int) -> None:
    world = _tiny_world(p)
    words, _ = world.sample(3, torch.Generator().manual_seed(2))
    got = world.lagged_marginals(words, lookahead)
    for i in range(3):
        torch.testing.assert_close(
            got[i], _brute_lagged(world, words[i], lookahead), rtol=0, atol=1e-10
        )


@pytest.mark.parametrize("name", sorted(WORLDS))
@pytest.mark.parametrize("lookahead", [0, 1])
def test_lagged_marginals_match_brute_force_in_the_worlds(name: str, lookahead: int) -> None:
    world = _world(name, length=3)
    words, _ = world.sample(2, torch.Generator().manual_seed(4))
    got = world.lagged_marginals(words, lookahead)
    for i in range(2):
        torch.testing.assert_close(
            got[i], _brute_lagged(world, words[i], lookahead), rtol=0, atol=1e-10
        )


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_lagged_marginals_see_nothing_after_the_lookahead(name: str) -> None:
    world, words, _ = _samples(name, 4, seed=8)
    changed = words.clone()
    changed[:, 10:] = (changed[:, 10:] + 5) % world.vocab_size
    a, b = world.lagged_marginals(words, 2), world.lagged_marginals(changed, 2)
    torch.testing.assert_close(a[:, :8], b[:, :8], rtol=0, atol=1e-12)  # t + 2 < 10
    assert not torch.allclose(a[:, 8], b[:, 8])


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_lagged_marginals_with_full_lookahead_equal_the_bayes_marginals(name: str) -> None:
    world, words, _ = _samples(name, 20, seed=9)
    full = marginals(world.bayes_potentials(words))
    for lookahead in (world.length - 1, world.length + 5):
        torch.testing.assert_close(
            world.lagged_marginals(words, lookahead), full, rtol=0, atol=1e-12
        )
    short = world.lagged_marginals(words, 3)  # positions before T - 4 miss some words
    assert float((short[:, :-4] - full[:, :-4]).abs().max()) > 1e-3
    torch.testing.assert_close(short[:, -4:], full[:, -4:], rtol=0, atol=1e-12)
    torch.testing.assert_close(world.lagged_decode(words, 30), full.argmax(-1))


def test_lagged_marginals_reject_a_negative_lookahead() -> None:
    world, words, _ = _samples("well_specified", 2, seed=0)
    with pytest.raises(ValueError, match="lookahead"):
        world.lagged_marginals(words, -1)


# --- decoding risk (Theorem 4) and calibration -----------------------------------------------------


def _expected_correct(gamma: Tensor, tags: Tensor) -> Tensor:
    return gamma.gather(2, tags.unsqueeze(-1)).squeeze(-1).sum(1)


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_theorem_4_posterior_wins_in_tags_viterbi_wins_in_paths(name: str) -> None:
    world, words, _ = _samples(name, 500, seed=21)
    pot = world.bayes_potentials(words)
    gamma = marginals(pot)
    post, vit = world.bayes_decode(words, "posterior"), world.bayes_decode(words, "viterbi")
    torch.testing.assert_close(post, gamma.argmax(-1))
    torch.testing.assert_close(vit, viterbi(pot)[1])
    e_post, e_vit = _expected_correct(gamma, post), _expected_correct(gamma, vit)
    assert bool((e_post >= e_vit - 1e-12).all())
    assert bool((e_post > e_vit + 1e-6).any())  # they do differ somewhere
    assert bool((score(pot, vit) >= score(pot, post) - 1e-12).all())
    assert bool((score(pot, vit) > score(pot, post) + 1e-6).any())


def test_bayes_decode_rejects_an_unknown_method() -> None:
    world, words, _ = _samples("well_specified", 2, seed=0)
    with pytest.raises(ValueError, match="method"):
        world.bayes_decode(words, "greedy")
    with pytest.raises(ValueError, match="words must be"):
        world.bayes_decode(words[:, :5])


@pytest.mark.parametrize(
    ("name", "low", "high"), [("well_specified", 0.75, 0.81), ("next_state", 0.58, 0.65)]
)
def test_bayes_accuracy_is_calibrated_to_the_seed(name: str, low: float, high: float) -> None:
    world, words, states = _samples(name, 2000, seed=31)
    post = world.bayes_decode(words, "posterior")
    vit = world.bayes_decode(words, "viterbi")
    acc_post, acc_vit = token_accuracy(post, states), token_accuracy(vit, states)
    assert low <= acc_post <= high
    gamma = marginals(world.bayes_potentials(words))
    assert float(_expected_correct(gamma, post).mean()) > float(
        _expected_correct(gamma, vit).mean()
    )
    # The realised gap is ~6 standard errors at this sample size (seed: 0.782 vs 0.776).
    assert acc_post > acc_vit


@pytest.mark.parametrize("name", sorted(WORLDS))
def test_lagged_bayes_ceiling_rises_with_lookahead(name: str) -> None:
    world, words, _ = _samples(name, 500, seed=41)
    gamma = marginals(world.bayes_potentials(words))
    expected = [
        float(_expected_correct(gamma, world.lagged_decode(words, w)).mean()) / world.length
        for w in (0, 1)
    ]
    expected.append(float(gamma.amax(-1).mean()))
    assert expected[0] < expected[1] < expected[2]


def test_token_accuracy_and_conditional_log_loss() -> None:
    assert token_accuracy(torch.tensor([[0, 1], [2, 2]]), torch.tensor([[0, 1], [2, 3]])) == 0.75
    with pytest.raises(ValueError, match="shapes"):
        token_accuracy(torch.zeros(2, 3), torch.zeros(3, 2))
    world = _world("next_state", length=4)
    words, states = world.sample(3, torch.Generator().manual_seed(6))
    paths = _all_paths(8, 4)
    nll = 0.0
    for x, z in zip(words, states, strict=True):
        joint = world.joint_log_prob(x.expand(len(paths), -1).contiguous(), paths).logsumexp(0)
        nll -= float(world.joint_log_prob(x[None], z[None])[0] - joint)
    got = conditional_log_loss(world.bayes_potentials(words), states)
    assert abs(got - nll / 12) < 1e-10


# --- the trellis example -----------------------------------------------------------------------------


def test_trellis_example_is_a_deterministic_json_payload_where_decoders_disagree() -> None:
    world = well_specified_world()
    ex = trellis_example(world, seed=0)
    assert ex == trellis_example(world, seed=0)
    assert json.loads(json.dumps(ex)) == ex
    assert ex["world"] == "well_specified" and ex["seed"] == 0
    T, K = world.length, world.num_states
    assert len(ex["words"]) == len(ex["gold"]) == len(ex["viterbi"]) == len(ex["posterior"]) == T
    assert len(ex["marginals"]) == len(ex["max_marginals_relative"]) == T
    assert all(len(row) == K for row in ex["marginals"] + ex["max_marginals_relative"])
    assert ex["disagree_at"]
    assert ex["disagree_at"] == [t for t in range(T) if ex["viterbi"][t] != ex["posterior"][t]]
    assert ex["expected_correct_posterior"] >= ex["expected_correct_viterbi"]
    for t in range(T):
        row = ex["marginals"][t]
        assert ex["posterior"][t] == max(range(K), key=row.__getitem__)
        assert abs(sum(row) - 1) < 1e-5
        rel = ex["max_marginals_relative"][t]
        assert rel[ex["viterbi"][t]] == 1.0
        assert max(rel) == 1.0
    # Recompute from the words: the figures are those of the Bayes tagger on this sequence.
    words, gold = torch.tensor([ex["words"]]), torch.tensor([ex["gold"]])
    pot = world.bayes_potentials(words)
    best, path = viterbi(pot)
    p_best = math.exp(float(best[0] - log_partition(pot)[0]))
    assert abs(ex["best_path_probability"] - p_best) < 1e-6
    mu = max_marginals(pot)[0]
    assert abs(float(mu.max()) - p_best) < 1e-12
    gamma = marginals(pot)
    post = gamma.argmax(-1)
    assert ex["correct_viterbi"] == int((path == gold).sum())
    assert ex["correct_posterior"] == int((post == gold).sum())
    assert abs(ex["expected_correct_posterior"] - float(_expected_correct(gamma, post)[0])) < 1e-6
    # It is the first draw of the seeded generator that disagrees.
    g = torch.Generator().manual_seed(0)
    for _ in range(ex["draw"]):
        x, _z = world.sample(1, g)
        assert torch.equal(world.bayes_decode(x), world.bayes_decode(x, "viterbi"))
    x, _z = world.sample(1, g)
    assert torch.equal(x, words)


def test_trellis_example_works_in_the_next_state_world_and_fails_cleanly() -> None:
    ex = trellis_example(next_state_world(), seed=3)
    assert ex["world"] == "next_state" and ex["disagree_at"]
    assert ex["expected_correct_posterior"] >= ex["expected_correct_viterbi"]
    one_path = dataclasses.replace(well_specified_world(), length=1)  # T = 1: the decoders agree
    with pytest.raises(ValueError, match="no disagreement"):
        trellis_example(one_path, max_tries=5)


def test_viz_payload_is_the_well_specified_trellis() -> None:
    payload = viz_payload()
    assert list(payload) == ["well_specified"]
    assert payload["well_specified"] == trellis_example(well_specified_world(), 0)
    json.dumps(payload)
