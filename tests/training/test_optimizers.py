"""The AdamW the tagger module builds: fused where the fused step is the same update."""

from __future__ import annotations

import torch

from crfhead.training.module import _fused_adamw


def _groups() -> list[dict[str, object]]:
    torch.manual_seed(0)
    return [
        {"params": [torch.nn.Parameter(torch.randn(50, 7))], "lr": 5e-3, "weight_decay": 0.01},
        {"params": [torch.nn.Parameter(torch.randn(7, 7))], "lr": 5e-3, "weight_decay": 0.0},
    ]


def test_fused_on_the_cpu_except_under_a_float16_grad_scaler() -> None:
    groups = _groups()
    for precision in ("32-true", "bf16-mixed", "64-true", None):
        assert _fused_adamw(groups, precision) is True
    assert _fused_adamw(groups, "16-mixed") is None
    assert _fused_adamw([{"params": []}], "32-true") is None
    meta = [{"params": [torch.nn.Parameter(torch.zeros(3, device="meta"))]}]
    assert _fused_adamw(meta, "32-true") is None


def test_the_fused_step_is_the_per_tensor_update() -> None:
    fused_groups, plain_groups = _groups(), _groups()
    fused = torch.optim.AdamW(fused_groups, fused=_fused_adamw(fused_groups, "32-true"))  # type: ignore[arg-type]
    plain = torch.optim.AdamW(plain_groups)  # type: ignore[arg-type]
    assert fused.defaults["fused"] is True and not plain.defaults["fused"]
    gen = torch.Generator().manual_seed(1)
    for _ in range(5):
        for a, b in zip(fused_groups, plain_groups, strict=True):
            for p, q in zip(a["params"], b["params"], strict=True):  # type: ignore[call-overload]
                p.grad = torch.randn(p.shape, generator=gen)
                q.grad = p.grad.clone()
        fused.step()
        plain.step()
    for a, b in zip(fused_groups, plain_groups, strict=True):
        for p, q in zip(a["params"], b["params"], strict=True):  # type: ignore[call-overload]
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
