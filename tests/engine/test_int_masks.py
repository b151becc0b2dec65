"""Integer masks (int64 as HuggingFace's ``attention_mask``, int32, uint8 as pytorch-crf's) equal bool ones.

Every public method of every head that takes a ``mask`` is found by its signature and called with the
same 0/1 mask as bool, int64, int32 and uint8 (holes and a fully masked row included); the results
must be identical (the oracle: the bool mask's results, bit for bit). A mask holding another value is
refused naming it and the count; a float mask is refused; under ``torch.compile`` an int64 mask gives
the eager bool results.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from crfhead.checks import as_bool_mask
from crfhead.compat import torchcrf as compat
from crfhead.engine.potentials import ChainPotentials, make_potentials
from crfhead.heads import CRF, HMM, MEMM, ChainHead, StructuredPerceptron

LABELS = ["O", "B-X", "I-X"]
B, T, K, V = 3, 5, 3, 6
INT_DTYPES = (torch.int64, torch.int32, torch.uint8)


def _mask() -> Tensor:
    """``(B, T)`` bool: row 0 with holes (first step off), row 1 fully masked, row 2 left-padded."""
    return torch.tensor([[0, 1, 1, 0, 1], [0, 0, 0, 0, 0], [0, 0, 1, 1, 1]], dtype=torch.bool)


def _inputs() -> tuple[Tensor, Tensor, Tensor]:
    """Emissions ``(B, T, K)`` float64, gold tags ``(B, T)`` (-100 at masked positions, valid BIO), words."""
    g = torch.Generator().manual_seed(0)
    em = torch.randn(B, T, K, generator=g, dtype=torch.float64)
    tags = torch.tensor([[-100, 1, 2, -100, 0], [-100] * 5, [-100, -100, 0, 1, 2]])
    words = torch.randint(2, V, (B, T), generator=g)
    return em, tags, words


def _hmm() -> HMM:
    hmm = HMM(K, V, labels=LABELS, alphas=(1.0, 0.1))
    _, tags, words = _inputs()
    hmm.fit(words, tags.clamp(min=0), _mask())
    return hmm


def _randomised(head: nn.Module) -> nn.Module:
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in head.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    return head


HEADS: dict[str, Callable[[], nn.Module]] = {
    "crf": lambda: _randomised(CRF(K, labels=LABELS)),
    "crf_bio": lambda: _randomised(CRF(K, labels=LABELS, scheme="BIO")),
    "memm": lambda: _randomised(MEMM(K, labels=LABELS)),
    "memm_bio": lambda: _randomised(MEMM(K, labels=LABELS, scheme="BIO")),
    "perceptron": lambda: _randomised(StructuredPerceptron(K, labels=LABELS, cost=1.0)),
    "hmm": _hmm,
    "torchcrf": lambda: _randomised(compat.CRF(K, batch_first=True, labels=LABELS)),
    "torchcrf_time_first": lambda: _randomised(compat.CRF(K, labels=LABELS)),
}


def _mask_methods(head: nn.Module) -> list[str]:
    """The public methods of ``head`` with a ``mask`` parameter (the ones this file covers)."""
    names = []
    for name in dir(type(head)):
        fn = getattr(type(head), name)
        if name.startswith("_") or not inspect.isfunction(fn):
            continue
        if "mask" in inspect.signature(fn).parameters:
            names.append(name)
    return sorted(names)


def _call(head: nn.Module, name: str, mask: Tensor) -> Any:
    """``head.name(...)`` on the fixed inputs, ``mask`` given; arguments filled by parameter name."""
    em, tags, words = _inputs()
    if isinstance(head, HMM):
        em = head.emit(words)
    if isinstance(head, compat.CRF) and not head.batch_first:  # (T, B, ...) inputs
        em, tags, words, mask = em.transpose(0, 1), tags.T, words.T, mask.T
    values: dict[str, Any] = {
        "emissions": em,
        "tags": tags,
        "words": words,
        "mask": mask,
        "k": 2,
        "num_samples": 4,
    }
    args: dict[str, Any] = {}
    for param in list(inspect.signature(getattr(type(head), name)).parameters.values())[1:]:
        if param.name == "generator":
            args["generator"] = torch.Generator().manual_seed(7)
        elif param.name == "allowed" and param.default is inspect.Parameter.empty:
            # partial_nll: one label per position (its own tests cover real sets), in the layout
            args["allowed"] = torch.nn.functional.one_hot(tags.clamp(min=0), K).bool()
        elif param.name in values:
            args[param.name] = values[param.name]
        elif param.default is inspect.Parameter.empty:
            raise AssertionError(f"{type(head).__name__}.{name}: no test value for {param.name!r}")
    return getattr(head, name)(**args)


def _assert_identical(got: Any, want: Any, where: str) -> None:
    if isinstance(want, ChainPotentials):
        assert isinstance(got, ChainPotentials), where
        for field in ("emissions", "transitions", "start", "end", "mask"):
            _assert_identical(getattr(got, field), getattr(want, field), f"{where}.{field}")
    elif isinstance(want, nn.Module):  # fit returns the head: its state is compared by the caller
        assert type(got) is type(want), where
    elif isinstance(want, Tensor):
        assert isinstance(got, Tensor) and got.dtype == want.dtype, f"{where}: {got!r} vs {want!r}"
        assert torch.equal(got, want), f"{where}: {got} != {want}"
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_identical(g, w, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def test_every_head_takes_a_mask_in_these_methods() -> None:
    """The discovery finds the contract's methods (so a renamed one is not silently left out)."""
    want = {
        "decode",
        "decode_labels",
        "edge_marginals",
        "entropy",
        "forward",
        "log_partition",
        "loss",
        "marginals",
        "max_marginals",
        "nll",
        "partial_nll",
        "chain",
        "posterior_decode",
        "potentials",
        "predict",
        "sample",
        "score",
        "sequence_losses",
        "sequence_nll",
        "topk",
        "viterbi",
    }
    for name, make in HEADS.items():
        assert want <= set(_mask_methods(make())), name
    assert {"accumulate", "fit", "held_out_losses", "tune_alpha"} <= set(_mask_methods(_hmm()))
    assert "mistakes" in _mask_methods(StructuredPerceptron(K))


@pytest.mark.parametrize("head_name", sorted(HEADS))
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_integer_mask_equals_bool_mask(head_name: str, dtype: torch.dtype) -> None:
    template = HEADS[head_name]()
    methods = _mask_methods(template)
    for name in methods:
        if (
            isinstance(template, compat.CRF)
            and not template.batch_first
            and name in compat._REFUSED
        ):
            continue  # refused time-first whatever the mask (tests/compat)
        bool_head, int_head = copy.deepcopy(template), copy.deepcopy(template)
        want = _call(bool_head, name, _mask())
        got = _call(int_head, name, _mask().to(dtype))
        _assert_identical(got, want, f"{head_name}.{name}({dtype})")
        # Counting methods change the head: the counts must be the same too.
        for key, value in bool_head.state_dict().items():
            assert torch.equal(int_head.state_dict()[key], value), f"{head_name}.{name}: {key}"


def test_make_potentials_converts_once_to_bool() -> None:
    em, _, _ = _inputs()
    for dtype in INT_DTYPES:
        pot = make_potentials(em, torch.zeros(K, K), mask=_mask().to(dtype))
        assert pot.mask.dtype == torch.bool and torch.equal(pot.mask, _mask())
    assert as_bool_mask(_mask()) is _mask() or torch.equal(as_bool_mask(_mask()), _mask())


@pytest.mark.parametrize("head_name", sorted(HEADS))
def test_mask_with_a_2_is_refused_naming_it(head_name: str) -> None:
    head = HEADS[head_name]()
    bad = _mask().long()
    bad[0, 1] = 2
    bad[2, 4] = 2
    with pytest.raises(ValueError, match=r"mask must hold only 0 and 1, got 2 entries .*: \[2\]"):
        _call(head, "decode", bad)
    with pytest.raises(ValueError, match=r"mask must hold only 0 and 1, got 2 entries .*: \[-1\]"):
        _call(head, "nll" if hasattr(head, "nll") else "loss", torch.where(bad == 2, -1, bad))


def test_hmm_counting_refuses_a_bad_mask() -> None:
    _, tags, words = _inputs()
    bad = _mask().to(torch.uint8)
    bad[0, 0] = 255
    with pytest.raises(
        ValueError, match=r"got 1 entry with other values: \[255\] \(dtype torch\.uint8\)"
    ):
        HMM(K, V).accumulate(words, tags.clamp(min=0), bad)


@pytest.mark.parametrize("head", [CRF(K), MEMM(K), compat.CRF(K, batch_first=True)], ids=str)
def test_float_mask_is_refused(head: ChainHead) -> None:
    em, _, _ = _inputs()
    with pytest.raises(
        ValueError, match=r"mask must be bool or an integer dtype .*got torch\.float32"
    ):
        head.decode(em, _mask().float())


def test_compiled_with_an_int64_mask_equals_eager_bool() -> None:
    """``torch.compile`` (eager backend, one graph) traces the conversion: same loss and paths."""
    head = _randomised(CRF(K, labels=LABELS, scheme="BIO"))
    em, tags, _ = _inputs()

    def step(em: Tensor, tags: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        return head.nll(em, tags, mask, reduction="none"), head.decode(em, mask)

    compiled = torch.compile(step, backend="eager", fullgraph=True)
    got = compiled(em, tags, _mask().long())
    want = step(em, tags, _mask())
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


def test_exported_with_an_int64_mask_equals_eager_bool() -> None:
    """``torch.export``: one program, run on other emissions with the int64 mask, decodes as eager."""
    head = _randomised(CRF(K, labels=LABELS, scheme="BIO"))
    em, _, _ = _inputs()

    class Decode(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head = head

        def forward(self, em: Tensor, mask: Tensor) -> Tensor:
            return self.head.decode(em, mask)

    program = torch.export.export(Decode(), (em.float(), _mask().long()))
    other = torch.randn(B, T, K, generator=torch.Generator().manual_seed(5))
    assert torch.equal(program.module()(other, _mask().long()), head.decode(other, _mask()))
