"""The fused finiteness check (the cpu kernel's ``first_non_finite``) against torch's reductions.

The boundary check (:func:`crfhead.checks.refuse_non_finite_chain`) runs one native pass where the
kernel is loaded; every code it returns is checked here against what the torch path decides, on
chains with NaN, ``+inf`` and ``-inf`` at masked and unmasked positions of each score tensor.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from crfhead import checks
from crfhead.checks import NonFiniteError, refuse_non_finite
from crfhead.engine.backends import cpu

pytestmark = pytest.mark.skipif(not cpu.status()[0], reason="the cpu kernel does not build here")


def _torch_code(em, tr, st, en, mask) -> int:  # type: ignore[no-untyped-def]
    """What the native check must return, decided by torch alone."""
    ok = torch.where(mask[..., None], em, 0.0)
    for i, x in enumerate((ok, tr, st, en)):
        flat = x.reshape(-1)
        bad = torch.isnan(flat) | (flat == math.inf)
        if bool(bad.any()):
            return 4 * int(bad.nonzero()[0]) + i
    padding = em[~mask]
    return -1 if bool(torch.isfinite(padding).all()) else -2


def _chain(seed: int, per_position: bool, dtype: torch.dtype):  # type: ignore[no-untyped-def]
    g = torch.Generator().manual_seed(seed)
    B, T, K = 3, 5, 4
    em = torch.randn(B, T, K, generator=g, dtype=dtype)
    tr = torch.randn(*((B, T - 1, K, K) if per_position else (K, K)), generator=g, dtype=dtype)
    st, en = torch.randn(K, generator=g, dtype=dtype), torch.randn(K, generator=g, dtype=dtype)
    mask = torch.rand(B, T, generator=g) < 0.7
    return em, tr, st, en, mask, g


@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_codes_agree_with_torch(per_position: bool, dtype: torch.dtype) -> None:
    check = checks._chain_check
    assert check is not None  # registered when the kernel loaded
    values = (math.nan, math.inf, -math.inf)
    seen = set()
    for seed, (where, value) in enumerate(itertools.product(range(4), values)):
        for extra in range(3):
            em, tr, st, en, mask, g = _chain(seed * 7 + extra, per_position, dtype)
            x = (em, tr, st, en)[where]
            flat = x.view(-1)
            for _ in range(extra + 1):
                flat[int(torch.randint(flat.numel(), (1,), generator=g))] = value
            want = _torch_code(em, tr, st, en, mask)
            assert check(em, tr, st, en, mask) == want, (where, value, extra)
            seen.add(want if want < 0 else want % 4)
    em, tr, st, en, mask, _ = _chain(99, per_position, dtype)
    assert check(em, tr, st, en, mask) == -1
    assert seen >= {-2, 0, 1, 2, 3}  # every outcome was exercised


def test_refusal_message_is_the_torch_one() -> None:
    em, tr, st, en, mask, _ = _chain(1, False, torch.float32)
    mask[:] = True
    em[2, 3, 1] = math.nan
    with pytest.raises(NonFiniteError) as fused:
        checks.refuse_non_finite_chain(em, tr, st, en, mask)
    with pytest.raises(NonFiniteError) as plain:
        refuse_non_finite("emissions", em, mask)
    assert str(fused.value) == str(plain.value)
    assert "(2, 3, 1)" in str(fused.value)


def test_masked_padding_passes_and_is_reported_not_finite() -> None:
    em, tr, st, en, mask, _ = _chain(2, False, torch.float64)
    mask[1, 4] = False
    em[1, 4] = math.nan
    assert checks.refuse_non_finite_chain(em, tr, st, en, mask) is False
    em[1, 4] = 0.0
    assert checks.refuse_non_finite_chain(em, tr, st, en, mask) is True
    em[0, 0, 0] = tr[1, 2] = st[3] = -math.inf  # forbidden scores: the padding needs no zeroing
    assert checks.refuse_non_finite_chain(em, tr, st, en, mask) is True


def test_layouts_it_does_not_take_fall_back() -> None:
    check = checks._chain_check
    assert check is not None
    em, tr, st, en, mask, _ = _chain(3, False, torch.float32)
    assert check(em.transpose(0, 1).contiguous().transpose(0, 1), tr, st, en, mask) is None
    assert check(em, tr.double(), st, en, mask) is None
    assert check(em.half(), tr, st, en, mask) is None
    tr_t = tr.t()
    tr_t[0, 1] = math.inf
    with pytest.raises(NonFiniteError, match="transitions is \\+inf"):
        checks.refuse_non_finite_chain(em, tr_t, st, en, mask)


def _both_checks():  # type: ignore[no-untyped-def]
    """The dispatcher op's check and the ctypes one (used where the dispatcher ops do not load)."""
    from crfhead.engine.backends.cpu import dispatcher, native

    found = [("ctypes", native._chain_check(native.entries()["first_non_finite"]))]
    loaded = dispatcher.ops()
    if loaded is not None:
        found.append(("dispatcher", dispatcher._chain_check(loaded.check)))
    return found


def _bad_shapes():  # type: ignore[no-untyped-def]
    em, tr, st, en, mask, _ = _chain(5, False, torch.float32)
    B, T, K = em.shape
    yield "start (1, K)", (em, tr, st[None], en, mask)
    yield "end (K, 1)", (em, tr, st, en[:, None], mask)
    yield "start (K+1,)", (em, tr, torch.zeros(K + 1), en, mask)
    yield "transitions (K, K+1)", (em, torch.zeros(K, K + 1), st, en, mask)
    yield "transitions (B, T, K, K)", (em, torch.zeros(B, T, K, K), st, en, mask)
    yield "mask (B, T+1)", (em, tr, st, en, torch.ones(B, T + 1, dtype=torch.bool))
    yield "mask (T, B)", (em, tr, st, en, mask.t().contiguous())
    yield "emissions (B, T)", (em[..., 0].contiguous(), tr, st, en, mask)


@pytest.mark.parametrize("case", list(_bad_shapes()), ids=lambda c: c[0])
def test_a_clean_answer_is_never_given_to_a_shape_make_potentials_refuses(case) -> None:  # type: ignore[no-untyped-def]
    """``-1`` lets make_potentials skip its own checks, so every check must refuse these shapes."""
    from crfhead.engine.potentials import make_potentials

    _, chain = case
    for name, check in _both_checks():
        assert check(*chain) in (None, -3), name  # not taken: the full checks decide
    with pytest.raises(ValueError, match="must be"):
        make_potentials(*chain)


def test_the_clean_fast_path_keeps_the_tensors_and_the_others_are_fixed() -> None:
    from crfhead.engine.potentials import make_potentials

    em, tr, st, en, mask, _ = _chain(6, True, torch.float32)
    assert checks.chain_is_clean(em, tr, st, en, mask)
    pot = make_potentials(em, tr, st, en, mask)
    assert pot.emissions is em and pot.transitions is tr and pot.mask is mask
    em[~mask] = math.nan  # padding: zeroed by the full path, not passed on
    assert not checks.chain_is_clean(em, tr, st, en, mask)
    pot = make_potentials(em, tr, st, en, mask)
    assert bool(torch.isfinite(pot.emissions).all())
    assert torch.equal(pot.emissions[mask], em[mask])
    ints = mask.long()  # a 0/1 integer mask: the full path converts it
    assert not checks.chain_is_clean(em, tr, st, en, ints)
    assert make_potentials(em, tr, st, en, ints).mask.dtype == torch.bool
