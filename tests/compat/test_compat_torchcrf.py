"""Agreement with pytorch-crf 0.7.2 and the drop-in ``crfhead.compat.torchcrf.CRF``."""

from __future__ import annotations

import io

import pytest
import torch

from crfhead import CRF
from crfhead.compat import torchcrf as compat

torchcrf = pytest.importorskip("torchcrf")


def _left_aligned(
    seed: int, B: int, T: int, K: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    E = torch.randn(B, T, K, generator=g)
    tags = torch.randint(0, K, (B, T), generator=g)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0] = T
    mask = torch.arange(T)[None] < lengths[:, None]
    return E, tags, mask


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("reduction", ["none", "sum", "mean", "token_mean"])
def test_log_likelihood_and_decode_agree_with_pytorch_crf(seed: int, reduction: str) -> None:
    E, tags, mask = _left_aligned(seed, B=6, T=12, K=7)
    theirs = torchcrf.CRF(7, batch_first=True)
    ours = CRF(7)
    ours.load_state_dict(theirs.state_dict())
    want = theirs(E, tags, mask, reduction=reduction)
    torch.testing.assert_close(
        -ours.nll(E, tags, mask, reduction=reduction), want, rtol=1e-5, atol=1e-5
    )
    decoded = ours.decode(E, mask)
    assert [[t for t in row if t >= 0] for row in decoded.tolist()] == theirs.decode(E, mask)


@pytest.mark.parametrize("batch_first", [False, True])
def test_compat_layer_is_a_drop_in_replacement(batch_first: bool) -> None:
    E, tags, mask = _left_aligned(7, B=4, T=9, K=5)
    if not batch_first:
        E, tags, mask = E.transpose(0, 1), tags.transpose(0, 1), mask.transpose(0, 1)
    theirs = torchcrf.CRF(5, batch_first=batch_first)
    ours = compat.CRF(5, batch_first=batch_first)
    ours.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(
        ours(E, tags, mask.byte()), theirs(E, tags, mask.byte()), rtol=1e-5, atol=1e-5
    )
    torch.testing.assert_close(ours(E, tags), theirs(E, tags), rtol=1e-5, atol=1e-5)
    assert ours.decode(E, mask) == theirs.decode(E, mask)
    assert ours.decode(E) == theirs.decode(E)


def test_compat_gradients_match_pytorch_crf() -> None:
    E, tags, mask = _left_aligned(3, B=5, T=10, K=4)
    theirs = torchcrf.CRF(4, batch_first=True)
    ours = compat.CRF(4, batch_first=True)
    ours.load_state_dict(theirs.state_dict())
    theirs(E, tags, mask).backward()
    ours(E, tags, mask).backward()
    for name in ("transitions", "start_transitions", "end_transitions"):
        torch.testing.assert_close(
            getattr(ours, name).grad, getattr(theirs, name).grad, rtol=1e-4, atol=1e-5
        )


def test_compat_accepts_left_padding_that_pytorch_crf_rejects() -> None:
    E, tags, mask = _left_aligned(1, B=3, T=6, K=4)
    shifts = [int(s) for s in mask.shape[1] - mask.sum(1)]

    def left_pad(x: torch.Tensor) -> torch.Tensor:
        return torch.stack([row.roll(s, dims=0) for row, s in zip(x, shifts, strict=True)])

    left = left_pad(mask)
    assert not left[:, 0].all()
    ours = compat.CRF(4, batch_first=True)
    with pytest.raises(ValueError):
        torchcrf.CRF(4, batch_first=True)(E, tags, left)
    llh = ours(left_pad(E), left_pad(tags), left, reduction="none")
    torch.testing.assert_close(llh, ours(E, tags, mask, reduction="none"), rtol=1e-5, atol=1e-5)


def test_compat_rejects_float_mask() -> None:
    with pytest.raises(
        ValueError, match=r"mask must be bool or an integer dtype .*got torch\.float32"
    ):
        compat.CRF(3).decode(torch.zeros(2, 1, 3), torch.ones(2, 1))


# ---------------------------------------------------------------- batch_first on every public method
# Each case: how to call the method (batch-first arguments in the layout the module is given) and how
# its batch-first output maps to the time-first one (the layout the drop-in documents).
K_TAGS = 5
LABELS = ["O", "B-X", "I-X", "B-Y", "I-Y"]


def _same(out: object) -> object:
    return out


def _swap(a: int, b: int):
    return lambda out: out.transpose(a, b)


def _pair(f, g):
    return lambda out: (f(out[0]), g(out[1]))


def _sample(crf, E, tags, mask):
    return crf.sample(E, 4, mask, generator=torch.Generator().manual_seed(0))


CASES = {
    "forward": (lambda crf, E, tags, mask: crf(E, tags, mask, reduction="none"), _same),
    "decode": (lambda crf, E, tags, mask: crf.decode(E, mask), _same),
    "loss": (lambda crf, E, tags, mask: crf.loss(E, tags, mask, reduction="none"), _same),
    "nll": (lambda crf, E, tags, mask: crf.nll(E, tags, mask, reduction="token_mean"), _same),
    "score": (lambda crf, E, tags, mask: crf.score(E, tags, mask), _same),
    "log_partition": (lambda crf, E, tags, mask: crf.log_partition(E, mask), _same),
    "entropy": (lambda crf, E, tags, mask: crf.entropy(E, mask), _same),
    "marginals": (lambda crf, E, tags, mask: crf.marginals(E, mask), _swap(0, 1)),
    "max_marginals": (lambda crf, E, tags, mask: crf.max_marginals(E, mask), _swap(0, 1)),
    "edge_marginals": (lambda crf, E, tags, mask: crf.edge_marginals(E, mask), _swap(0, 1)),
    "viterbi": (lambda crf, E, tags, mask: crf.viterbi(E, mask), _pair(_same, _swap(0, 1))),
    "topk": (lambda crf, E, tags, mask: crf.topk(E, 3, mask), _pair(_same, _swap(0, 2))),
    "posterior_decode": (
        lambda crf, E, tags, mask: crf.posterior_decode(E, mask, valid_only=True),
        _swap(0, 1),
    ),
    "sample": (_sample, _swap(1, 2)),
    "predict": (lambda crf, E, tags, mask: crf.predict(E, mask), _swap(0, 1)),
    "decode_labels": (lambda crf, E, tags, mask: crf.decode_labels(E, mask), _same),
    "sequence_nll": (
        lambda crf, E, tags, mask: crf.sequence_nll(E, tags, mask),
        _pair(_same, _swap(0, 1)),
    ),
    "sequence_losses": (
        lambda crf, E, tags, mask: crf.sequence_losses(E, tags, mask),
        _pair(_same, _swap(0, 1)),
    ),
    "partial_nll": (  # one label per position: allowed (T, B, K) time-first
        lambda crf, E, tags, mask: crf.partial_nll(
            E, None, mask, torch.nn.functional.one_hot(tags.clamp(min=0), E.shape[-1]).bool()
        ),
        _pair(_same, _swap(0, 1)),
    ),
}
# Engine-level methods (ChainPotentials in or out): refused with batch_first=False.
REFUSED = {"potentials", "chain", "predict_from", "gold_score", "check_gold"}
# Methods that take or give no (B, T) layout.
LAYOUT_FREE = {
    "emissions_from_batch",
    "emissions_for",
    "reads",
    "fitting",
    "reset_parameters",
    "extra_repr",
}


def _public_methods() -> set[str]:
    """Every public method a crfhead.heads.CRF has below nn.Module."""
    mro = CRF.__mro__[: CRF.__mro__.index(torch.nn.Module)]
    return {
        name
        for klass in mro
        for name, value in vars(klass).items()
        if not name.startswith("_") and callable(value)
    }


def _padded(
    seed: int, B: int, T: int, kind: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Batch-first inputs ``(B, T, K)``, ``(B, T)``; ``kind``: no mask, right padding, holes (uint8)."""
    E, tags, mask = _left_aligned(seed, B, T, K_TAGS)
    if kind == "none":
        return E, tags, None
    if kind == "holes":
        g = torch.Generator().manual_seed(seed + 100)
        holes = torch.rand(B, T, generator=g) < 0.3
        mask = (mask & ~holes).byte()
    tags = tags.masked_fill(~mask.bool(), -100)  # padding tags are ignored
    return E, tags, mask


def _assert_same(got: object, want: object) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _assert_same(g, w)
    elif isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.shape == want.shape, (got, want)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    else:
        assert got == want


def _layers() -> tuple[compat.CRF, compat.CRF, CRF]:
    time_first = compat.CRF(K_TAGS, labels=LABELS, scheme="BIO")
    batch_first = compat.CRF(K_TAGS, batch_first=True, labels=LABELS, scheme="BIO")
    plain = CRF(K_TAGS, labels=LABELS, scheme="BIO")
    with torch.no_grad():
        for p in time_first.parameters():
            p.uniform_(-1.0, 1.0)
    batch_first.load_state_dict(time_first.state_dict())
    plain.load_state_dict(time_first.state_dict())
    return time_first, batch_first, plain


def _valid_tags(plain: CRF, E: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Gold tags the BIO scheme allows (the constrained Viterbi path), -100 where masked."""
    m = None if mask is None else mask.bool()
    paths = plain.decode(E, m)
    return paths.masked_fill(paths < 0, -100)


@pytest.mark.parametrize("kind", ["none", "right_padded", "holes"])
@pytest.mark.parametrize("method", sorted(CASES))
def test_every_method_honours_batch_first_false(method: str, kind: str) -> None:
    call, to_time_first = CASES[method]
    time_first, batch_first, plain = _layers()
    E, _, mask = _padded(11, B=4, T=7, kind=kind)  # B != T: a misread layout cannot pass
    tags = _valid_tags(plain, E, mask)
    want = to_time_first(call(batch_first, E, tags, mask))
    tr = (lambda x: x) if mask is None else (lambda x: x.transpose(0, 1).contiguous())
    got = call(
        time_first,
        E.transpose(0, 1).contiguous(),
        tags.transpose(0, 1).contiguous(),
        None if mask is None else tr(mask),
    )
    _assert_same(got, want)
    if method not in ("forward", "decode"):  # the drop-in's own surface; the rest is heads.CRF's
        plain_mask = None if mask is None else mask.bool()
        _assert_same(call(batch_first, E, tags, mask), call(plain, E, tags, plain_mask))


def test_every_public_method_is_honoured_or_refused() -> None:
    public = _public_methods()
    assert public == set(CASES) | REFUSED | LAYOUT_FREE, "classify the new method in CASES"
    time_first, batch_first, plain = _layers()
    E, _, _ = _left_aligned(2, B=3, T=6, K=K_TAGS)
    tags = _valid_tags(plain, E, None)
    Et, tagst = E.transpose(0, 1), tags.transpose(0, 1)
    with pytest.raises(
        NotImplementedError, match=r"batch_first=False\)\.potentials .*ChainPotentials"
    ):
        time_first.potentials(Et)
    pot = batch_first.potentials(E)
    with pytest.raises(NotImplementedError, match=r"batch_first=False\)\.gold_score"):
        time_first.gold_score(pot, Et, tagst)
    # batch_first=True keeps the engine-level methods.
    torch.testing.assert_close(
        batch_first.gold_score(pot, E, tags), batch_first.score(E, tags), rtol=1e-6, atol=1e-6
    )


def test_time_first_errors_say_the_shapes_were_transposed() -> None:
    with pytest.raises(ValueError, match=r"K=3.*after transposing the \(T, B, \.\.\.\) inputs"):
        compat.CRF(3).marginals(torch.zeros(6, 2, 4))


# ---------------------------------------------------------------- parameters and optimizer state
def test_parameters_are_registered_and_initialised_in_pytorch_crf_order() -> None:
    names = ["start_transitions", "end_transitions", "transitions"]
    torch.manual_seed(0)
    theirs = torchcrf.CRF(6)
    torch.manual_seed(0)
    ours = compat.CRF(6)
    assert [n for n, _ in theirs.named_parameters()] == names
    assert [n for n, _ in ours.named_parameters()] == names
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (_, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)  # same draws: same init from a seed


@pytest.mark.parametrize("batch_first", [False, True])
def test_pytorch_crf_optimizer_state_loads_and_continues_identically(batch_first: bool) -> None:
    E, tags, mask = _left_aligned(5, B=4, T=8, K=K_TAGS)
    if not batch_first:
        E, tags, mask = E.transpose(0, 1), tags.transpose(0, 1), mask.transpose(0, 1)
    theirs = torchcrf.CRF(K_TAGS, batch_first=batch_first).double()
    opt_theirs = torch.optim.Adam(theirs.parameters(), lr=0.05)

    def step(crf: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
        opt.zero_grad()
        (-crf(E.double(), tags, mask.byte(), reduction="mean")).backward()
        opt.step()

    for _ in range(3):  # a pytorch-crf user's training so far
        step(theirs, opt_theirs)
    saved = io.BytesIO()  # saved to disk and loaded back, as a checkpoint is: no shared tensors
    torch.save({"model": theirs.state_dict(), "optimizer": opt_theirs.state_dict()}, saved)
    saved.seek(0)
    checkpoint = torch.load(saved)
    ours = compat.CRF(K_TAGS, batch_first=batch_first).double()
    ours.load_state_dict(checkpoint["model"])
    opt_ours = torch.optim.Adam(ours.parameters(), lr=0.05)
    opt_ours.load_state_dict(checkpoint["optimizer"])
    for _ in range(3):  # both continue: the same moments apply to the same parameters
        step(theirs, opt_theirs)
        step(ours, opt_ours)
    for name, p in theirs.named_parameters():
        torch.testing.assert_close(getattr(ours, name), p, rtol=1e-9, atol=1e-10)
    for a, b in zip(
        opt_ours.state_dict()["state"].values(),
        opt_theirs.state_dict()["state"].values(),
        strict=True,
    ):
        torch.testing.assert_close(a["exp_avg_sq"], b["exp_avg_sq"], rtol=1e-9, atol=1e-12)
