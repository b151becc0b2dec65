"""The other heads against enumeration: MEMM (Definition 4), structured perceptron / hinge (Algorithm 1),
HMM by counting (Definition 2), and the word-window encoder; gradcheck, edge cases and error messages.

The oracles here are written from the definitions (products of local softmaxes, a max over every path,
hand counts), not from the engine.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch import Tensor

from crfhead import engine
from crfhead.encoders import WordWindowEncoder
from crfhead.heads import CRF, HMM, MEMM, ChainHead, StructuredPerceptron
from crfhead.numerics import IMPOSSIBLE
from crfhead.schemes import allowed_transitions

LABELS = ["O", "B-X", "I-X"]
F64 = torch.float64


def _random(
    seed: int, B: int = 3, T: int = 5, K: int = 3, holes: bool = True
) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    em = torch.randn(B, T, K, generator=g, dtype=F64)
    mask = torch.rand(B, T, generator=g) < 0.7 if holes else torch.ones(B, T, dtype=torch.bool)
    if B > 1:
        mask[0] = True
    return em, mask


def _randomise(head: torch.nn.Module, seed: int) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in head.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    return head


# ------------------------------------------------------------------------------------ MEMM
def _memm_path_logprob(head: MEMM, em: Tensor, positions: list[int], path: list[int]) -> float:
    """log prod_t softmax(...)[z_t], from Definition 4 directly."""
    trans = head.transitions.detach().double().clone()
    start = head.start_transitions.detach().double().clone()
    if head.constrained:
        trans[~head.allowed_transitions] = -math.inf
        start[~head.allowed_start] = -math.inf
    total = 0.0
    for i, t in enumerate(positions):
        logits = start + em[t] if i == 0 else trans[path[i - 1]] + em[t]
        total += float(torch.log_softmax(logits, dim=0)[path[i]])
    return total


@pytest.mark.parametrize("constrained", [False, True])
def test_memm_matches_the_product_of_local_softmaxes_on_every_path(constrained: bool) -> None:
    em, mask = _random(0)
    head = MEMM(3, labels=LABELS, scheme="BIO" if constrained else None).double()
    _randomise(head, 1)
    pot = head.potentials(em, mask)
    log_z = engine.log_partition(pot)
    assert torch.allclose(log_z, torch.zeros_like(log_z), atol=1e-12)  # locally normalised
    gamma = head.marginals(em, mask)
    for b in range(em.shape[0]):
        positions = [t for t in range(em.shape[1]) if mask[b, t]]
        oracle = torch.zeros(em.shape[1], 3, dtype=F64)
        total = 0.0
        for assignment in itertools.product(range(3), repeat=len(positions)):
            lp = _memm_path_logprob(head, em[b], positions, list(assignment))
            path = torch.full((1, em.shape[1]), -1)
            path[0, positions] = torch.tensor(assignment, dtype=torch.long)
            got = float(engine.score(head.potentials(em[b : b + 1], mask[b : b + 1]), path))
            if lp == -math.inf:
                assert got == IMPOSSIBLE
                continue
            assert got == pytest.approx(lp, abs=1e-12)
            total += math.exp(lp)
            for t, k in zip(positions, assignment, strict=True):
                oracle[t, k] += math.exp(lp)
        assert total == pytest.approx(1.0 if positions else 0.0, abs=1e-12)
        assert torch.allclose(gamma[b], oracle, atol=1e-12)


def test_memm_loss_is_the_local_log_loss_on_the_gold_previous_tag() -> None:
    em, mask = _random(2)
    head = _randomise(MEMM(3), 3).double()
    tags = torch.randint(0, 3, mask.shape, generator=torch.Generator().manual_seed(4))
    loss = head.loss(em, tags, mask, reduction="none")
    for b in range(em.shape[0]):
        positions = [t for t in range(em.shape[1]) if mask[b, t]]
        lp = _memm_path_logprob(head, em[b], positions, [int(tags[b, t]) for t in positions])
        assert float(loss[b]) == pytest.approx(-lp, abs=1e-12)
    assert torch.allclose(loss, head.nll(em, tags, mask, "none"), atol=1e-12)  # log Z = 0


def test_memm_viterbi_and_topk_match_enumeration_and_posterior_decoder_is_used() -> None:
    em, mask = _random(5, holes=False)
    head = _randomise(MEMM(3, labels=LABELS, decoder="posterior"), 6).double()
    scores, paths = head.viterbi(em, mask)
    for b in range(em.shape[0]):
        best = max(
            itertools.product(range(3), repeat=em.shape[1]),
            key=lambda z: _memm_path_logprob(head, em[b], list(range(em.shape[1])), list(z)),
        )
        assert paths[b].tolist() == list(best)
    post = head.posterior_decode(em, mask)
    assert torch.equal(head.predict(em, mask), post)
    assert head.decode_labels(em, mask)[0] == [LABELS[i] for i in post[0].tolist()]
    assert torch.allclose(scores, head.topk(em, 2, mask)[0][:, 0])


def test_memm_end_constraints_apply_at_decoding_and_not_in_the_local_loss() -> None:
    labels = ["O", "B-X", "I-X", "E-X", "S-X"]
    em, mask = _random(7, K=5, holes=False)
    head = _randomise(MEMM(5, labels=labels, scheme="BIOES"), 8).double()
    log_z = head.log_partition(em, mask)
    assert bool((log_z < 0).all())  # conditioned on a valid end
    paths = head.decode(em, mask)
    assert all(labels[p[-1]] in ("O", "E-X", "S-X") for p in paths.tolist())
    tags = torch.tensor([[0, 1, 3, 4, 0]] * 3)
    assert torch.allclose(
        head.loss(em, tags, mask, "none"), head.nll(em, tags, mask, "none") - log_z, atol=1e-12
    )


def test_memm_gradcheck_float64() -> None:
    em, mask = _random(9, B=2, T=4)
    head = _randomise(MEMM(3, labels=LABELS, scheme="BIO"), 10).double()
    tags = torch.tensor([[0, 1, 2, 0], [1, 2, 2, 0]])
    em.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda e: head.loss(e, tags, mask, "sum"), (em,))
    assert torch.autograd.gradcheck(lambda e: head.marginals(e, mask), (em,))


# ------------------------------------------------------------------------------------ perceptron
def _brute_best(em: Tensor, head: CRF, mask: Tensor, gold: Tensor, cost: float) -> list[float]:
    """max_z score(z) + cost * Hamming(z, gold) per row, by enumeration."""
    out = []
    for b in range(em.shape[0]):
        positions = [t for t in range(em.shape[1]) if mask[b, t]]
        best = -math.inf
        for assignment in itertools.product(range(head.num_tags), repeat=len(positions)):
            path = torch.full((1, em.shape[1]), -1)
            path[0, positions] = torch.tensor(assignment, dtype=torch.long)
            s = float(head.score(em[b : b + 1], path, mask[b : b + 1]))
            s += cost * sum(
                int(k != gold[b, t]) for t, k in zip(positions, assignment, strict=True)
            )
            best = max(best, s)
        out.append(best if positions else 0.0)
    return out


@pytest.mark.parametrize("cost", [0.0, 1.5])
def test_perceptron_loss_is_best_augmented_score_minus_gold(cost: float) -> None:
    em, mask = _random(11)
    head = _randomise(StructuredPerceptron(3, labels=LABELS, scheme="BIO", cost=cost), 12).double()
    gold = torch.tensor([[0, 1, 2, 0, 1], [1, 2, 0, 0, 0], [0, 0, 1, 2, 2]])
    loss = head.loss(em, gold, mask, reduction="none")
    expect = torch.tensor(_brute_best(em, head, mask, gold, cost), dtype=F64)
    assert torch.allclose(loss, expect - head.score(em, gold, mask), atol=1e-12)
    assert bool((loss >= -1e-12).all())


def test_perceptron_gradient_is_the_perceptron_update_and_zero_when_gold_wins() -> None:
    em, mask = _random(13, holes=False)
    head = StructuredPerceptron(3).double()  # θ = 0 in the head
    gold = torch.tensor([[0, 1, 2, 0, 1], [1, 2, 0, 0, 0], [0, 0, 1, 2, 2]])
    em.requires_grad_(True)
    head.loss(em, gold, mask, reduction="sum").backward()
    pred = head.decode(em.detach(), mask)
    onehot = torch.nn.functional.one_hot
    assert em.grad is not None
    assert torch.equal(em.grad, (onehot(pred, 3) - onehot(gold, 3)).to(F64))
    # A gold path that outscores every other by a margin: loss 0, no mistake, no update.
    strong = onehot(gold, 3).to(F64) * 10
    assert float(head.loss(strong, gold, mask, "sum")) == 0.0
    assert not bool(head.mistakes(strong, gold, mask).any())
    hinge = StructuredPerceptron(3, cost=20.0).double()
    assert float(hinge.loss(strong, gold, mask, "sum")) > 0  # inside the Hamming margin


def test_perceptron_starts_at_zero_and_rejects_negative_cost() -> None:
    head = StructuredPerceptron(3)
    assert all(float(p.abs().sum()) == 0 for p in head.parameters())
    with pytest.raises(ValueError, match="cost must be >= 0"):
        StructuredPerceptron(3, cost=-1.0)


def test_perceptron_learns_a_separable_toy_problem_with_sgd_rate_one() -> None:
    g = torch.Generator().manual_seed(14)
    words = torch.randint(0, 6, (20, 5), generator=g)
    tags = words % 3  # each word has one tag
    enc = WordWindowEncoder(3, 6).double()
    head = StructuredPerceptron(3).double()
    opt = torch.optim.SGD([*enc.parameters(), *head.parameters()], lr=1.0)
    for _ in range(5):
        for i in range(20):
            opt.zero_grad()
            head.loss(enc.emissions(words[i : i + 1]), tags[i : i + 1], None, "sum").backward()
            opt.step()
    assert torch.equal(head.decode(enc.emissions(words)), tags)


# ------------------------------------------------------------------------------------ HMM
def _corpus(seed: int, n: int = 12, T: int = 6, V: int = 7) -> tuple[Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    words = torch.randint(1, V, (n, T), generator=g)  # 0 is the HMM's padding id, never a word
    tags = torch.randint(0, 3, (n, T), generator=g)
    mask = torch.rand(n, T, generator=g) < 0.8
    return words, tags, mask


def test_hmm_counts_match_hand_counts_with_holes() -> None:
    words, tags, mask = _corpus(20)
    hmm = HMM(3, 7, unknown_singletons=False, padding_index=None).fit(words, tags, mask)
    start = torch.zeros(3, dtype=F64)
    trans = torch.zeros(3, 3, dtype=F64)
    end = torch.zeros(3, dtype=F64)
    emit = torch.zeros(3, 7, dtype=F64)
    for b in range(words.shape[0]):
        seq = [(int(words[b, t]), int(tags[b, t])) for t in range(words.shape[1]) if mask[b, t]]
        if not seq:
            continue
        start[seq[0][1]] += 1
        end[seq[-1][1]] += 1
        for (_, j), (_, k) in itertools.pairwise(seq):
            trans[j, k] += 1
        for w, k in seq:
            emit[k, w] += 1
    assert torch.equal(hmm.start_counts, start)
    assert torch.equal(hmm.transition_counts, trans)
    assert torch.equal(hmm.end_counts, end)
    assert torch.equal(hmm.emission_counts, emit)
    p = hmm.log_parameters(alpha=0.5)
    row = torch.cat([trans, end[:, None]], dim=1) + 0.5
    assert torch.allclose(p.log_transitions.exp(), row[:, :3] / row.sum(1, keepdim=True))
    assert torch.allclose(p.log_end.exp(), row[:, 3] / row.sum(1))
    assert torch.allclose(p.log_emissions.exp(), (emit + 0.5) / (emit + 0.5).sum(1, keepdim=True))


def test_hmm_chain_is_the_posterior_of_the_joint_on_every_path() -> None:
    words, tags, mask = _corpus(21, n=3, T=4)
    hmm = HMM(3, 7, unknown_singletons=False, padding_index=None).fit(words, tags, mask, 0.3)
    p = hmm.log_parameters()
    em = hmm.emit(words)
    gamma = hmm.marginals(em, mask)
    log_px = hmm.log_partition(em, mask)
    for b in range(3):
        positions = [t for t in range(4) if mask[b, t]]
        joint = {}
        for z in itertools.product(range(3), repeat=len(positions)):
            lp = 0.0
            for i, (t, k) in enumerate(zip(positions, z, strict=True)):
                lp += float(p.log_start[k] if i == 0 else p.log_transitions[z[i - 1], k])
                lp += float(p.log_emissions[k, words[b, t]])
            lp += float(p.log_end[z[-1]]) if positions else 0.0
            joint[z] = lp
        lse = (
            float(torch.logsumexp(torch.tensor(list(joint.values()), dtype=F64), 0))
            if positions
            else 0.0
        )
        assert float(log_px[b]) == pytest.approx(lse, abs=1e-12)  # log Z = log p(x)
        for t_i, t in enumerate(positions):
            for k in range(3):
                marg = sum(math.exp(v - lse) for z, v in joint.items() if z[t_i] == k)
                assert float(gamma[b, t, k]) == pytest.approx(marg, abs=1e-12)
        best = max(joint, key=lambda z: joint[z])
        assert [hmm.decode(em, mask)[b, t].item() for t in positions] == list(best)


def test_hmm_pools_singletons_into_the_unknown_word() -> None:
    words = torch.tensor([[2, 3, 3, 4], [2, 5, 2, 2]])  # 3 twice, 4 and 5 once
    tags = torch.tensor([[0, 1, 1, 2], [0, 2, 0, 0]])
    hmm = HMM(3, 8).fit(words, tags, alpha=0.1)
    sym = hmm.symbols()
    assert sym.tolist() == [1, 1, 2, 3, 1, 1, 1, 1]  # 0 padding and unseen ids read as <unk>=1
    em = hmm.emit(torch.tensor([[4, 5, 7, 3]]))
    assert torch.equal(em[0, 0], em[0, 1]) and torch.equal(em[0, 1], em[0, 2])
    b = hmm.log_parameters().log_emissions.exp()
    # tag 2 emitted the two singletons: its <unk> count is 2; symbols are {1, 2, 3}.
    assert float(b[2, 1]) == pytest.approx((2 + 0.1) / (2 + 3 * 0.1))
    assert float(b[0, 7]) == 0.0 and float(b[0, 0]) == 0.0


def test_hmm_constraints_give_forbidden_events_probability_zero_and_rows_still_sum_to_one() -> None:
    labels = ["O", "B-X", "I-X"]
    words = torch.tensor([[2, 3, 4, 2]])
    tags = torch.tensor([[1, 2, 0, 0]])
    hmm = HMM(3, 6, labels=labels, scheme="BIO").fit(words, tags, alpha=1.0)
    p = hmm.log_parameters()
    ok_t, ok_s, _ = allowed_transitions(labels, "BIO")
    assert bool((p.log_transitions[~ok_t] <= IMPOSSIBLE).all())
    assert bool((p.log_start[~ok_s] <= IMPOSSIBLE).all())
    rows = torch.where(ok_t, p.log_transitions.exp(), 0).sum(1) + p.log_end.exp()
    assert torch.allclose(rows, torch.ones(3, dtype=F64))
    assert float(hmm.length_law()) == pytest.approx(1.0, abs=1e-12)


def test_hmm_tunes_alpha_by_heldout_conditional_log_loss() -> None:
    words, tags, mask = _corpus(22, n=30)
    hmm = HMM(3, 7, alphas=(5.0, 0.5, 0.05)).fit(words[:20], tags[:20], mask[:20])
    losses = hmm.held_out_losses(words[20:], tags[20:], mask[20:])
    chosen = hmm.tune_alpha(words[20:], tags[20:], mask[20:])
    assert chosen == (5.0, 0.5, 0.05)[int(losses.argmin())]
    assert float(hmm.alpha) == chosen
    em = hmm.emit(words[20:])
    total = hmm.nll(em, tags[20:], mask[20:], "sum")
    assert float(total) == pytest.approx(float(losses.min()), rel=1e-12)


def test_hmm_without_end_state_and_its_joint_loss() -> None:
    words, tags, mask = _corpus(23, n=4, T=3)
    hmm = HMM(3, 7, end_state=False, unknown_singletons=False, padding_index=None)
    hmm.fit(words, tags, mask, alpha=1.0)
    assert torch.equal(hmm.log_parameters().log_end, torch.zeros(3, dtype=F64))
    em = hmm.emit(words)
    joint = hmm.loss(em, tags, mask, "none")
    cond = hmm.nll(em, tags, mask, "none")
    assert torch.allclose(
        joint - cond, -hmm.log_partition(em, mask)
    )  # -log p(x,z) = -log p(z|x) - log p(x)


def test_hmm_errors_name_the_bad_input() -> None:
    hmm = HMM(3, 5)
    with pytest.raises(
        ValueError, match=r"word id 9 at \(batch 0, time 1\) is out of range \[0, 5\)"
    ):
        hmm.fit(torch.tensor([[1, 9]]), torch.tensor([[0, 0]]))
    with pytest.raises(ValueError, match="words must be an integer tensor"):
        hmm.emit(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"word id 7 at \(batch 0, time 1\) is out of range"):
        hmm.emit(torch.tensor([[1, 7]]))  # never clamped to a valid id
    with pytest.raises(ValueError, match="mask must be bool"):
        hmm.accumulate(torch.tensor([[1, 2]]), torch.tensor([[0, 0]]), torch.ones(1, 2))
    with pytest.raises(ValueError, match="alpha and every alphas must be > 0"):
        HMM(3, 5, alpha=0.0)
    with pytest.raises(ValueError, match="tag 3 at unmasked position"):
        hmm.fit(torch.tensor([[1, 2]]), torch.tensor([[0, 3]]))


# ------------------------------------------------------------------------------------ all heads
def _heads() -> list[ChainHead]:
    words = torch.tensor([[2, 3, 4]])
    return [
        _randomise(CRF(3, labels=LABELS, scheme="BIO"), 30),
        _randomise(MEMM(3, labels=LABELS, scheme="BIO"), 31),
        _randomise(StructuredPerceptron(3, labels=LABELS, scheme="BIO", cost=1.0), 32),
        HMM(3, 6, labels=LABELS, scheme="BIO").fit(words, torch.tensor([[1, 2, 0]])),
    ]


@pytest.mark.parametrize("head", _heads(), ids=lambda h: type(h).__name__)
def test_every_head_handles_empty_rows_length_zero_and_one(head: ChainHead) -> None:
    em = torch.randn(3, 4, 3, dtype=F64)
    mask = torch.tensor([[1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 1, 0]], dtype=torch.bool)
    tags = torch.tensor([[1, 2, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0]])
    loss = head.loss(em, tags, mask, "none")
    assert float(loss[1]) == 0.0 and bool(torch.isfinite(loss).all())
    paths = head.decode(em, mask)
    assert paths[1].tolist() == [-1] * 4 and paths[2].tolist()[:2] == [-1, -1]
    assert head.decode(em[:, :0], mask[:, :0]).shape == (3, 0)
    assert float(head.loss(em[:, :0], tags[:, :0], mask[:, :0], "sum")) == 0.0
    assert head.decode_labels(em, mask)[1] == []


@pytest.mark.parametrize("head", _heads(), ids=lambda h: type(h).__name__)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_every_head_computes_half_precision_emissions_in_float32(
    head: ChainHead, dtype: torch.dtype
) -> None:
    em = torch.randn(2, 5, 3)
    tags = torch.tensor([[1, 2, 0, 0, 1], [0, 0, 1, 2, 2]])
    half = em.to(dtype)
    loss = head.loss(half, tags, None, "none")
    assert loss.dtype == torch.float32
    assert torch.allclose(loss, head.loss(half.float(), tags, None, "none"))
    assert torch.equal(head.decode(half), head.decode(half.float()))


@pytest.mark.parametrize("head", _heads(), ids=lambda h: type(h).__name__)
def test_every_head_refuses_gold_tags_that_break_the_scheme(head: ChainHead) -> None:
    em = torch.randn(1, 3, 3)
    with pytest.raises(ValueError, match=r"gold tags of sequence\(s\) \[0\] break the BIO scheme"):
        head.loss(em, torch.tensor([[0, 2, 0]]), None)  # O -> I-X
    with pytest.raises(ValueError, match=r"emissions must be \(B, T, K=3\), got shape \(1, 3, 4\)"):
        head.loss(torch.randn(1, 3, 4), torch.tensor([[0, 0, 0]]), None)
    with pytest.raises(ValueError, match="reduction must be one of"):
        head.loss(em, torch.tensor([[0, 0, 0]]), None, reduction="avg")


def test_decoder_setting_is_validated_and_selects_the_decoder() -> None:
    with pytest.raises(ValueError, match="decoder must be one of"):
        CRF(3, decoder="beam")
    em, mask = _random(40, holes=False)
    crf = _randomise(CRF(3, labels=LABELS, scheme="BIO", decoder="posterior_valid"), 41).double()
    assert torch.equal(crf.predict(em, mask), crf.posterior_decode(em, mask, valid_only=True))


# ------------------------------------------------------------------------------------ window encoder
def test_word_window_encoder_sums_offset_weights_with_boundaries() -> None:
    enc = _randomise(WordWindowEncoder(2, 5, offsets=(-1, 0, 2)), 50).double()
    words = torch.tensor([[1, 4, 3, 0]])
    mask = torch.tensor([[True, True, True, False]])
    em = enc.emissions(words, mask)
    W = enc.weight
    V = 5
    for t in range(3):
        expect = torch.zeros(2, dtype=F64)
        for i, o in enumerate((-1, 0, 2)):
            s = t + o
            idx = int(words[0, s]) if 0 <= s < 3 else (V if o < 0 else V + 1)
            expect = expect + W[i, idx]
        assert torch.allclose(em[0, t], expect)
    assert torch.equal(em[0, 3], torch.zeros(2, dtype=F64))
    assert enc.lookahead == 2
    with pytest.raises(ValueError, match="offsets must be distinct"):
        WordWindowEncoder(2, 5, offsets=(0, 0))
    with pytest.raises(ValueError, match=r"word id 7 at \(batch 0, time 1\)"):
        enc.emissions(torch.tensor([[1, 7]]))
