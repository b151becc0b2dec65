"""The training step reads its loss on the host once (on an accelerator each read waits for the device)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from crfhead.data.corpora import FinanceCorpus
from crfhead.data.datamodule import TaggingDataModule
from crfhead.training.module import TaggerModule


class _CountingTensor(torch.Tensor):
    """A tensor that counts the reads of its value on the host (``item``, ``float``, ``bool``)."""

    reads = 0

    def item(self) -> Any:
        type(self).reads += 1
        return super().item()

    def __float__(self) -> float:
        type(self).reads += 1
        return super().__float__()

    def __bool__(self) -> bool:
        type(self).reads += 1
        return super().__bool__()


@pytest.mark.parametrize("value", [2.5, float("nan")])
def test_training_step_reads_the_loss_once(value: float, monkeypatch: pytest.MonkeyPatch) -> None:
    data = TaggingDataModule(corpus=FinanceCorpus(train_docs=2, dev_docs=1, test_docs=1))
    module = TaggerModule(vocabs=data.vocabs)
    batch = next(iter(data.train_dataloader()))
    real = module.tagger.fit_step

    def loss(*args: Any, **kwargs: Any) -> torch.Tensor:
        out = real(*args, **kwargs)
        return (out * 0 + value).as_subclass(_CountingTensor)

    monkeypatch.setattr(module.tagger, "fit_step", loss)
    _CountingTensor.reads = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # self.log outside a Trainer
        if value != value:
            with pytest.raises(FloatingPointError, match="non-finite loss nan at global step 0"):
                module.training_step(batch, 0)
        else:
            out = module.training_step(batch, 0)
            assert out is not None and float(out.detach()) == value
            _CountingTensor.reads -= 1  # the assertion's own read
    assert _CountingTensor.reads == 1
