"""Argument validation at the heads' public boundary: every head, through the shared base.

Errors are ValueErrors that print the value and its type (a bool is not an int here); a mean loss
over an empty batch is 0, with a gradient path, as pytorch-crf's.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from crfhead import CRF
from crfhead.heads import HMM, MEMM, StructuredPerceptron
from crfhead.heads.base import ChainHead

HEADS: list[type[ChainHead]] = [CRF, MEMM, StructuredPerceptron]


def _build(cls: type[ChainHead], num_tags: Any, **kwargs: Any) -> ChainHead:
    if cls is HMM:
        return HMM(num_tags, 10, **kwargs)
    return cls(num_tags, **kwargs)


@pytest.mark.parametrize("cls", [*HEADS, HMM])
@pytest.mark.parametrize("num_tags", [True, False, 2.0, "3", 0])
def test_num_tags_must_be_a_positive_int_not_a_bool(cls: type[ChainHead], num_tags: Any) -> None:
    kind = type(num_tags).__name__
    with pytest.raises(ValueError, match=rf"num_tags must be a positive int, got .*\({kind}\)"):
        _build(cls, num_tags)


@pytest.mark.parametrize("vocab_size", [True, 2.5])
def test_the_hmms_vocab_size_must_be_an_int(vocab_size: Any) -> None:
    kind = type(vocab_size).__name__
    with pytest.raises(ValueError, match=rf"vocab_size must be an int >= 1, got .*\({kind}\)"):
        HMM(3, vocab_size)


@pytest.mark.parametrize("cls", [*HEADS, HMM])
def test_duplicate_labels_are_refused_naming_the_duplicate(cls: type[ChainHead]) -> None:
    with pytest.raises(ValueError, match=r"label 'O' appears twice in labels \(again at index 2\)"):
        _build(cls, 3, labels=["O", "B-X", "O"])
    _build(cls, 3, labels=["O", "B-X", "I-X"], scheme="BIO")  # distinct labels are fine


@pytest.mark.parametrize("cls", HEADS)
@pytest.mark.parametrize("k", [1.5, True, "2", None])
def test_topk_needs_an_int_k(cls: type[ChainHead], k: Any) -> None:
    head = cls(3)
    kind = type(k).__name__
    with pytest.raises(ValueError, match=rf"k must be an int >= 1, got .*\({kind}\)"):
        head.topk(torch.randn(2, 4, 3), k)


@pytest.mark.parametrize("cls", HEADS)
@pytest.mark.parametrize("n", [True, 2.0, "1"])
def test_sample_needs_an_int_number_of_samples(cls: type[ChainHead], n: Any) -> None:
    head = cls(3)
    kind = type(n).__name__
    with pytest.raises(ValueError, match=rf"num_samples must be an int >= 1, got .*\({kind}\)"):
        head.sample(torch.randn(2, 4, 3), n)


def test_integer_like_counts_are_accepted() -> None:
    head = CRF(3)
    em = torch.randn(2, 4, 3)
    assert head.topk(em, torch.tensor(2))[0].shape == (2, 2)
    assert head.sample(em, torch.tensor(3)).shape == (3, 2, 4)


@pytest.mark.parametrize("cls", HEADS)
@pytest.mark.parametrize("method", ["nll", "loss"])
def test_the_mean_loss_of_an_empty_batch_is_zero_with_a_gradient(
    cls: type[ChainHead], method: str
) -> None:
    head = cls(3)
    em = torch.randn(0, 4, 3, requires_grad=True)
    tags = torch.zeros(0, 4, dtype=torch.long)
    for reduction in ("mean", "sum", "token_mean"):
        loss = getattr(head, method)(em, tags, reduction=reduction)
        assert loss.shape == () and float(loss) == 0.0
    loss = getattr(head, method)(em, tags, reduction="mean")
    loss.backward()
    assert em.grad is not None and em.grad.shape == (0, 4, 3)
