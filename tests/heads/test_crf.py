"""The CRF layer: public API, constraints in training and decoding, errors, training, export."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
import torch
from brute import enumerate_rows
from torch import nn

from crfhead import CRF, IMPOSSIBLE, make_potentials
from crfhead.schemes import allowed_transitions, is_valid

BIO = ["O", "B-X", "I-X", "B-Y"]
BIOES = ["O", "B-X", "E-X", "S-X"]


def _crf(K: int = 4, **kw: object) -> CRF:
    torch.manual_seed(0)
    crf = CRF(K, **kw).double()  # type: ignore[arg-type]
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_()
    return crf


def _batch(B: int = 3, T: int = 5, K: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    E = torch.randn(B, T, K, generator=g, dtype=torch.float64) * 2
    mask = torch.rand(B, T, generator=g) < 0.75
    mask[0] = True
    return E, mask


def test_parameters_and_state_dict_match_pytorch_crf() -> None:
    torchcrf = pytest.importorskip("torchcrf")
    ours, theirs = CRF(5), torchcrf.CRF(5, batch_first=True)
    assert ours.transitions.shape == (5, 5)
    assert ours.start_transitions.shape == ours.end_transitions.shape == (5,)
    assert set(ours.state_dict()) == set(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())
    assert torch.equal(ours.transitions, theirs.transitions)
    assert (ours.transitions.abs() <= 0.1).all()


def test_nll_is_log_partition_minus_score_with_every_reduction() -> None:
    crf = _crf()
    E, mask = _batch()
    tags = torch.randint(0, 4, (3, 5), generator=torch.Generator().manual_seed(1))
    tags = torch.where(mask, tags, torch.full_like(tags, -100))
    per = crf.nll(E, tags, mask, reduction="none")
    torch.testing.assert_close(per, crf.log_partition(E, mask) - crf.score(E, tags, mask))
    rows = enumerate_rows(E, crf.transitions, crf.start_transitions, crf.end_transitions, mask)
    for b, row in enumerate(rows):
        path = [t if m else -1 for t, m in zip(tags[b].tolist(), mask[b].tolist(), strict=True)]
        want = row.log_partition - row.scores[row.paths.index(path)]
        assert per[b].item() == pytest.approx(want, abs=1e-10)
    torch.testing.assert_close(crf.nll(E, tags, mask, reduction="sum"), per.sum())
    torch.testing.assert_close(crf.nll(E, tags, mask, reduction="mean"), per.mean())
    torch.testing.assert_close(
        crf.nll(E, tags, mask, reduction="token_mean"), per.sum() / mask.sum()
    )
    torch.testing.assert_close(crf(E, tags, mask), per.mean())


def test_mask_none_means_every_position() -> None:
    crf = _crf()
    E, _ = _batch()
    full = torch.ones(3, 5, dtype=torch.bool)
    torch.testing.assert_close(crf.log_partition(E), crf.log_partition(E, full))
    assert torch.equal(crf.decode(E), crf.decode(E, full))


def test_outputs_have_the_documented_shapes() -> None:
    crf = _crf()
    E, mask = _batch()
    assert crf.decode(E, mask).shape == (3, 5)
    assert crf.marginals(E, mask).shape == (3, 5, 4)
    assert crf.edge_marginals(E, mask).shape == (3, 4, 4, 4)
    assert crf.max_marginals(E, mask).shape == (3, 5, 4)
    scores, paths = crf.topk(E, 3, mask)
    assert scores.shape == (3, 3) and paths.shape == (3, 3, 5)
    assert crf.posterior_decode(E, mask).shape == (3, 5)
    assert crf.entropy(E, mask).shape == (3,)
    assert crf.sample(E, 2, mask).shape == (2, 3, 5)
    assert ((crf.decode(E, mask) == -1) == ~mask).all()


def test_inference_works_under_inference_mode() -> None:
    crf = _crf()
    E, mask = _batch()
    with torch.inference_mode():
        m = crf.marginals(E, mask)
        d = crf.decode(E, mask)
    torch.testing.assert_close(m, crf.marginals(E, mask).detach())
    assert torch.equal(d, crf.decode(E, mask))


# ----------------------------------------------------------------------------- constraints


@pytest.mark.parametrize(("labels", "scheme"), [(BIO, "BIO"), (BIOES, "BIOES")])
def test_constrained_log_partition_sums_valid_paths_only(labels: list[str], scheme: str) -> None:
    crf = _crf(labels=labels, scheme=scheme)
    E, mask = _batch()
    allowed = allowed_transitions(labels, scheme)
    rows = enumerate_rows(
        E, crf.transitions, crf.start_transitions, crf.end_transitions, mask, allowed=allowed
    )
    want = torch.tensor([r.log_partition for r in rows], dtype=torch.float64)
    torch.testing.assert_close(crf.log_partition(E, mask), want, rtol=1e-10, atol=1e-10)
    node = torch.stack([r.node_marginals() for r in rows])
    torch.testing.assert_close(crf.marginals(E, mask), node, rtol=1e-9, atol=1e-10)
    unconstrained = _crf()
    assert not torch.allclose(unconstrained.log_partition(E, mask), want)


@pytest.mark.parametrize(("labels", "scheme"), [(BIO, "BIO"), (BIOES, "BIOES")])
def test_constrained_decoders_never_output_an_invalid_sequence(
    labels: list[str], scheme: str
) -> None:
    crf = _crf(labels=labels, scheme=scheme)
    allowed = allowed_transitions(labels, scheme)
    for seed in range(10):
        E, mask = _batch(seed=seed)
        E = E * 5  # strong emissions push towards invalid bigrams
        rows = enumerate_rows(
            E, crf.transitions, crf.start_transitions, crf.end_transitions, mask, allowed=allowed
        )
        for path in crf.decode_labels(E, mask):
            assert is_valid(path, scheme), path
        scores, paths = crf.topk(E, 4, mask)
        mea = crf.posterior_decode(E, mask, valid_only=True)
        for b, row in enumerate(rows):
            want = row.sorted_scores()[:4]
            want += [-math.inf] * (4 - len(want))
            assert scores[b].tolist() == pytest.approx(want, abs=1e-9)
            for r in range(4):
                tags = [labels[i] for i in paths[b, r].tolist() if i >= 0]
                assert scores[b, r] == -math.inf or is_valid(tags, scheme)
            # Constrained MBR: the valid path with the fewest expected wrong tags.
            guess = mea[b].tolist()
            assert guess in row.paths
            risk = row.expected_hamming(guess)
            assert all(risk <= row.expected_hamming(p) + 1e-9 for p in row.paths)


def test_constraints_apply_in_training_forbidden_scores_get_no_gradient() -> None:
    crf = _crf(labels=BIO, scheme="BIO")
    E, mask = _batch()
    tags = torch.tensor([[1, 2, 0, 3, 0], [0, 1, 2, 2, 0], [3, 0, 0, 1, 2]])
    crf.nll(E, tags, mask).backward()
    assert crf.transitions.grad is not None
    allowed, start_ok, _ = allowed_transitions(BIO, "BIO")
    assert (crf.transitions.grad[~allowed] == 0).all()
    assert crf.start_transitions.grad is not None
    assert (crf.start_transitions.grad[~start_ok] == 0).all()
    assert (crf.transitions.grad[allowed] != 0).any()


def test_gold_path_breaking_the_scheme_is_an_error() -> None:
    crf = _crf(labels=BIO, scheme="BIO")
    E, _ = _batch()
    tags = torch.tensor([[0, 2, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]])  # O I-X: invalid
    with pytest.raises(ValueError, match=r"gold tags of sequence\(s\) \[0\] break the BIO scheme"):
        crf.nll(E, tags)


# ----------------------------------------------------------------------------- errors


def test_error_emissions_wrong_number_of_tags() -> None:
    with pytest.raises(ValueError, match=r"emissions must be \(B, T, K=4\), got shape \(2, 3, 5\)"):
        _crf().decode(torch.zeros(2, 3, 5))


def test_error_emissions_wrong_rank() -> None:
    with pytest.raises(ValueError, match=r"emissions must be \(B, T, K=4\), got shape \(3, 4\)"):
        _crf().log_partition(torch.zeros(3, 4))


def test_error_emissions_integer_dtype() -> None:
    with pytest.raises(ValueError, match="emissions must be a floating-point tensor"):
        _crf().decode(torch.zeros(2, 3, 4, dtype=torch.long))


def test_error_tags_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"tags must be \(B, T\) = \(2, 3\).*got shape \(2, 4\)"):
        _crf().nll(torch.zeros(2, 3, 4), torch.zeros(2, 4, dtype=torch.long))


def test_error_tags_float_dtype() -> None:
    with pytest.raises(ValueError, match="tags must be an integer tensor"):
        _crf().nll(torch.zeros(2, 3, 4), torch.zeros(2, 3))


def test_error_tag_out_of_range_at_unmasked_position() -> None:
    tags = torch.zeros(2, 3, dtype=torch.long)
    tags[1, 2] = 7
    with pytest.raises(
        ValueError, match=r"tag 7 at unmasked position \(batch 1, time 2\) is out of range \[0, 4\)"
    ):
        _crf().nll(torch.zeros(2, 3, 4), tags)
    mask = torch.ones(2, 3, dtype=torch.bool)
    mask[1, 2] = False
    _crf().nll(torch.zeros(2, 3, 4), tags, mask)  # ignored where masked


def test_error_mask_not_bool() -> None:
    with pytest.raises(
        ValueError, match=r"mask must be bool or an integer dtype .*got torch\.float32"
    ):
        _crf().decode(torch.zeros(2, 3, 4), torch.ones(2, 3))


def test_error_mask_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"mask must be \(B, T\) = \(2, 3\).*got shape \(3, 2\)"):
        _crf().decode(torch.zeros(2, 3, 4), torch.ones(3, 2, dtype=torch.bool))


def test_error_unknown_reduction() -> None:
    with pytest.raises(ValueError, match="reduction must be one of"):
        _crf().nll(torch.zeros(2, 3, 4), torch.zeros(2, 3, dtype=torch.long), reduction="avg")


def test_error_scheme_without_labels() -> None:
    with pytest.raises(ValueError, match="scheme='BIO' needs the label list"):
        CRF(3, scheme="BIO")


def test_error_labels_length() -> None:
    with pytest.raises(ValueError, match="got 2 labels for num_tags=3"):
        CRF(3, labels=["O", "B-X"])


def test_error_num_tags() -> None:
    with pytest.raises(ValueError, match="num_tags must be a positive int, got 0"):
        CRF(0)


def test_error_decode_labels_without_labels() -> None:
    with pytest.raises(ValueError, match="decode_labels needs the CRF to be built with labels"):
        _crf().decode_labels(torch.zeros(1, 2, 4))


def test_error_topk_k_below_one() -> None:
    with pytest.raises(ValueError, match="k-best needs k >= 1, got k=0"):
        _crf().topk(torch.zeros(1, 2, 4), 0)


def test_error_num_samples_below_one() -> None:
    with pytest.raises(ValueError, match="num_samples must be >= 1, got 0"):
        _crf().sample(torch.zeros(1, 2, 4), 0)


def test_error_transitions_wrong_shape() -> None:
    with pytest.raises(
        ValueError,
        match=r"transitions must be \(K, K\) = \(3, 3\) or \(B, T-1, K, K\) = \(2, 4, 3, 3\).*got shape \(3, 4\)",
    ):
        make_potentials(torch.zeros(2, 5, 3), torch.zeros(3, 4))


def test_error_start_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"start must be \(K,\) = \(3,\).*got shape \(4,\)"):
        make_potentials(torch.zeros(2, 5, 3), torch.zeros(3, 3), torch.zeros(4))


def test_error_transitions_integer_dtype() -> None:
    with pytest.raises(
        ValueError, match=r"transitions must be a floating-point tensor, got dtype torch\.int64"
    ):
        make_potentials(torch.zeros(2, 5, 3), torch.zeros(3, 3, dtype=torch.long))


def test_error_not_a_tensor() -> None:
    with pytest.raises(ValueError, match=r"emissions must be a torch\.Tensor, got list"):
        make_potentials([[0.0]], torch.zeros(1, 1))  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- in a user's model


class BiLSTMTagger(nn.Module):
    def __init__(self, vocab: int, labels: list[str]) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 16, padding_idx=0)
        self.lstm = nn.LSTM(16, 16, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(32, len(labels))
        self.crf = CRF(len(labels), labels=labels, scheme="BIO")

    def forward(self, words: torch.Tensor) -> torch.Tensor:
        return self.proj(self.lstm(self.embed(words))[0])


def test_crf_trains_inside_a_users_bilstm() -> None:
    torch.manual_seed(0)
    labels = ["O", "B-X", "I-X"]
    # Word 1 and 2 form an X entity, everything else is O.
    words = torch.randint(3, 10, (32, 8))
    words[:, 2], words[:, 3] = 1, 2
    words[:16, 5], words[:16, 6] = 1, 2
    tags = torch.zeros(32, 8, dtype=torch.long)
    tags[words == 1], tags[words == 2] = 1, 2
    lengths = torch.randint(4, 9, (32,))
    mask = torch.arange(8)[None] < lengths[:, None]
    model = BiLSTMTagger(10, labels)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    first = None
    for _ in range(40):
        opt.zero_grad()
        loss = model.crf.nll(model(words), tags, mask, reduction="token_mean")
        first = first if first is not None else loss.item()
        loss.backward()
        opt.step()
    assert loss.item() < first / 10
    pred = model.crf.decode(model(words), mask)
    assert torch.equal(pred[mask], tags[mask])


class Decode(nn.Module):
    """Viterbi as a module, for export."""

    def __init__(self, crf: CRF) -> None:
        super().__init__()
        self.crf = crf

    def forward(self, e: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.crf.viterbi(e, m)


class Loss(Decode):
    """The per-sequence loss as a module, for export."""

    def forward(self, e: torch.Tensor, t: torch.Tensor, m: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.crf.nll(e, t, m, reduction="none")


def _export_inputs() -> tuple[CRF, torch.Tensor, torch.Tensor, torch.Tensor]:
    crf = CRF(4, labels=BIO, scheme="BIO").eval()
    E = torch.randn(3, 6, 4)
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, 3:] = False
    mask[2, 0] = False
    return crf, E, torch.zeros(3, 6, dtype=torch.long), mask


def test_export_decode_and_loss_reload_and_compare() -> None:
    crf, E, tags, mask = _export_inputs()
    batch = torch.export.Dim("batch")
    for module, args, dyn in (
        (Decode(crf), (E, mask), {"e": {0: batch}, "m": {0: batch}}),
        (Loss(crf), (E, tags, mask), {"e": {0: batch}, "t": {0: batch}, "m": {0: batch}}),
    ):
        program = torch.export.export(module, args, dynamic_shapes=dyn)
        buf = io.BytesIO()
        torch.export.save(program, buf)
        buf.seek(0)
        loaded = torch.export.load(buf).module()
        want, got = module(*args), loaded(*args)
        for w, g in zip(
            want if isinstance(want, tuple) else (want,),
            got if isinstance(got, tuple) else (got,),
            strict=True,
        ):
            torch.testing.assert_close(g, w)
        # A different batch size through the same exported program.
        more = tuple(torch.cat([a, a[:1]]) for a in args)
        torch.testing.assert_close(loaded(*more)[0], module(*more)[0])


def test_impossible_is_minus_infinity_in_every_dtype_and_exp_of_it_is_zero() -> None:
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        x = torch.tensor(IMPOSSIBLE, dtype=dtype)
        assert bool(torch.isneginf(x))
        assert x.exp().item() == 0.0


def test_error_emissions_not_three_dimensional() -> None:
    with pytest.raises(ValueError, match=r"emissions must be \(B, T, K\), got shape \(4, 3\)"):
        make_potentials(torch.zeros(4, 3), torch.zeros(3, 3))


def test_error_potentials_on_different_devices() -> None:
    with pytest.raises(ValueError, match="transitions is on meta but emissions are on cpu"):
        make_potentials(torch.zeros(2, 3, 3), torch.zeros(3, 3, device="meta"))


def test_onnx_export_of_decode_and_loss_runs_in_onnxruntime(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    import warnings

    crf, E, tags, mask = _export_inputs()
    for name, module, args in (
        ("decode", Decode(crf), (E, mask)),
        ("loss", Loss(crf), (E, tags, mask)),
    ):
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(module, args, dynamo=True, verbose=False)
        path = tmp_path / f"{name}.onnx"
        assert program is not None
        program.save(str(path))
        session = ort.InferenceSession(str(path))
        feeds = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args, strict=True)}
        got = session.run(None, feeds)
        with torch.no_grad():
            want = module(*args)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(torch.from_numpy(g), w)
