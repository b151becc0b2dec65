"""The cpu backend's dispatcher ops traced: registration, fake shapes, gradients, compile, export.

Oracles: ``torch.library.opcheck`` (schema, fake tensors, autograd registration, AOT dispatch with
dynamic shapes) on every op; ``gradcheck``/``gradgradcheck`` in float64 through the differentiable
ops; every op's results equal the portable engine's; a compiled BiLSTM-CRF step calls the same op as
an eager call (its forward and backward graphs the kernel's parts and scaling) and never the portable
scan; an exported decoder with a dynamic length decodes lengths it was not traced with exactly as
eager.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from helpers import Chain, random_chain
from torch import nn

from crfhead import engine
from crfhead.engine import scan
from crfhead.engine.backends import available, use_backend
from crfhead.engine.backends.select import resolve
from crfhead.heads import CRF


def _loaded() -> bool:
    if not available("cpu")[0]:
        return False
    from crfhead.engine.backends.cpu import dispatcher

    return dispatcher.status()[0]


pytestmark = pytest.mark.skipif(not _loaded(), reason="the cpu backend's ops do not build here")
ops = torch.ops.crfhead


def _inputs(c: Chain, grad: bool = False) -> tuple[torch.Tensor, ...]:
    scores = (c.emissions, c.transitions, c.start, c.end)
    return (*(x.clone().requires_grad_(grad) for x in scores), c.mask)


def _tags(c: Chain) -> torch.Tensor:
    B, T, K = c.emissions.shape
    g = torch.Generator().manual_seed(1)
    return torch.where(c.mask, torch.randint(0, K, (B, T), generator=g), -100)


CASES = [(False, torch.float64), (True, torch.float64), (False, torch.float32)]


@pytest.fixture(autouse=True)
def _fresh_dynamo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # These tests are about what ``auto`` traces to: an ambient $CRFHEAD_BACKEND (test.sh's portable
    # pass) would choose for them.
    monkeypatch.delenv("CRFHEAD_BACKEND", raising=False)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# --------------------------------------------------------------------------- opcheck
@pytest.mark.parametrize(("per_position", "dtype"), CASES)
def test_opcheck_every_op(per_position: bool, dtype: torch.dtype) -> None:
    c = random_chain(0, 3, 5, 4, per_position=per_position, dtype=dtype)
    grad = _inputs(c, grad=True)
    plain = _inputs(c)
    tags = _tags(c)
    for inputs in (grad, plain):
        torch.library.opcheck(ops.fused_nll, (*inputs, tags))
        torch.library.opcheck(ops.fused_log_partition, inputs)
    for grads, edges in ((True, True), (True, False), (False, False)):
        torch.library.opcheck(ops.nll, (*plain, tags, grads, edges))
        torch.library.opcheck(ops.forward_backward, (*plain, grads, edges))
    for edges in (True, False):
        _, _, *parts = ops.nll(*plain, tags, True, edges)
        torch.library.opcheck(ops.scale_grads, (torch.rand(3, dtype=dtype), *parts))
    torch.library.opcheck(ops.marginals, plain)
    torch.library.opcheck(ops.viterbi, plain)
    torch.library.opcheck(ops.viterbi, grad)


def test_fake_shapes_follow_the_flags() -> None:
    c = random_chain(0, 2, 4, 3, per_position=True)
    real, tags = _inputs(c), _tags(c)
    with torch._subclasses.FakeTensorMode() as mode:
        fake = [mode.from_tensor(x) for x in real]
        value, gold, node, edge, first, last = ops.nll(*fake, mode.from_tensor(tags), True, True)
        assert [tuple(x.shape) for x in (value, gold, node, edge, first, last)] == [
            (2,), (2,), (2, 4, 3), (2, 3, 3, 3), (2, 3), (2, 3)
        ]  # fmt: skip
        d = ops.scale_grads(value, node, edge, first, last)
        assert [tuple(x.shape) for x in d] == [(2, 4, 3), (2, 3, 3, 3), (3,), (3,)]
        d = ops.scale_grads(value, node, edge.sum((0, 1)).expand(2, 3, 3), first, last)
        assert tuple(d[1].shape) == (3, 3)
        parts = ops.forward_backward(*fake, False, False)
        assert [tuple(x.shape) for x in parts] == [(2,), (0,), (0,), (0,), (0,)]
        _, paths = ops.viterbi(*fake)
        assert paths.dtype == torch.long and tuple(paths.shape) == (2, 4)
        assert [tuple(x.shape) for x in ops.fused_nll(*fake, mode.from_tensor(tags))] == [
            (2,),
            (2,),
        ]


# --------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("with_tags", [False, True])
def test_gradcheck_and_gradgradcheck_through_the_ops(per_position: bool, with_tags: bool) -> None:
    c = random_chain(2, 3, 5, 3, per_position=per_position)
    tags = _tags(c)

    def f(em: torch.Tensor, tr: torch.Tensor, st: torch.Tensor, en: torch.Tensor) -> torch.Tensor:
        if with_tags:
            out: torch.Tensor = ops.fused_nll(em, tr, st, en, c.mask, tags)[0]
        else:
            out = ops.fused_log_partition(em, tr, st, en, c.mask)
        return out

    inputs = _inputs(c, grad=True)[:4]
    assert torch.autograd.gradcheck(f, inputs)
    assert torch.autograd.gradgradcheck(f, inputs)


# --------------------------------------------------------------------------- equal to portable
@pytest.mark.parametrize("per_position", [False, True])
def test_every_op_equals_the_portable_engine(per_position: bool) -> None:
    c = random_chain(3, 4, 6, 4, per_position=per_position)
    inputs = _inputs(c)
    pot = engine.make_potentials(*inputs)
    tags = torch.where(c.mask, _tags(c), 0)
    loss, gold, *_ = ops.nll(*inputs, tags, True, True)
    want_loss, want_gold = engine.nll(pot, tags, backend="portable")
    torch.testing.assert_close(loss, want_loss)
    torch.testing.assert_close(gold, want_gold)
    torch.testing.assert_close(ops.fused_nll(*inputs, tags), (want_loss, want_gold))
    log_z, *fb = ops.forward_backward(*inputs, True, True)
    m = scan.moments(pot, True)
    torch.testing.assert_close(log_z, m.value)
    torch.testing.assert_close(ops.fused_log_partition(*inputs), m.value)
    for got, want in zip(fb, m[1:], strict=True):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(ops.marginals(*inputs), scan.marginals(pot))
    scores, paths = ops.viterbi(*inputs)
    want_scores, want_paths = engine.viterbi(pot, backend="portable")
    torch.testing.assert_close(scores, want_scores)
    assert torch.equal(paths, want_paths)


def test_a_bad_tag_raises_from_the_op() -> None:
    c = random_chain(0, 2, 3, 3, holes=False)
    tags = torch.zeros(2, 3, dtype=torch.long)
    tags[1, 2] = 3
    with pytest.raises(ValueError, match=r"tag 3 at unmasked position \(batch 1, time 2\)"):
        ops.nll(*_inputs(c), tags, False, False)
    with pytest.raises(ValueError, match=r"tag 3 at unmasked position \(batch 1, time 2\)"):
        ops.fused_nll(*_inputs(c, grad=True), tags)


# --------------------------------------------------------------------------- selection
def test_tracing_selects_the_cpu_ops_but_not_on_request_of_portable() -> None:
    seen: list[str] = []

    def f(x: torch.Tensor) -> torch.Tensor:
        seen.append(resolve(x.device))
        return x + 1

    torch.compile(f, backend="eager", fullgraph=True)(torch.zeros(2))
    assert seen == ["cpu"]
    torch._dynamo.reset()
    with use_backend("portable"):
        torch.compile(f, backend="eager", fullgraph=True)(torch.zeros(3))
    assert seen == ["cpu", "portable"]


# --------------------------------------------------------------------------- torch.compile
class _BiLSTMCRF(nn.Module):
    """A BiLSTM-CRF of plain torch modules (``BiLSTMEncoder`` packs sequences: a graph break)."""

    def __init__(self, vocab: int = 30, K: int = 5) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 8)
        self.lstm = nn.LSTM(8, 6, batch_first=True, bidirectional=True)
        self.out = nn.Linear(12, K)
        self.crf = CRF(K)

    def forward(self, words: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        loss: torch.Tensor = self.crf(self.out(self.lstm(self.embed(words))[0]), tags, mask)
        return loss


def _step_inputs(T: int = 7) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    words = torch.randint(1, 30, (3, T), generator=g)
    mask = torch.ones(3, T, dtype=torch.bool)
    mask[1, T - 2 :] = False
    tags = torch.where(mask, torch.randint(0, 5, (3, T), generator=g), -100)
    return words, tags, mask


def _no_portable_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the portable scan ran")

    for name in ("forward_scan", "backward_scan"):
        monkeypatch.setattr(scan, name, refuse)


def test_compiled_bilstm_crf_step_uses_the_fused_op_without_a_graph_break(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch.manual_seed(0)
    model = _BiLSTMCRF()
    args = _step_inputs()
    model(*args).backward()
    want = [p.grad.clone() for p in model.parameters()]  # type: ignore[union-attr]
    model.zero_grad(set_to_none=True)

    graphs: list[torch.fx.GraphModule] = []
    forward: list[torch.fx.GraphModule] = []
    backward: list[torch.fx.GraphModule] = []

    def backend(gm: torch.fx.GraphModule, example: Any) -> Any:
        graphs.append(gm)
        from functorch.compile import make_boxed_func
        from torch._dynamo.backends.common import aot_autograd

        def keep(into: list[torch.fx.GraphModule]) -> Any:
            def compiler(g: torch.fx.GraphModule, _: Any) -> Any:
                into.append(g)
                return make_boxed_func(g)

            return compiler

        return aot_autograd(fw_compiler=keep(forward), bw_compiler=keep(backward))(gm, example)

    _no_portable_scan(monkeypatch)
    step = torch.compile(model, backend=backend, fullgraph=True, dynamic=False)
    with torch._dynamo.config.patch(allow_rnn=True):
        loss = step(*args)
    loss.backward()
    assert len(graphs) == 1

    def targets(g: torch.fx.GraphModule) -> set[str]:
        return {str(n.target) for n in g.graph.nodes if n.op == "call_function"}

    assert "crfhead.fused_nll.default" in targets(graphs[0])  # the op of an eager call
    assert "crfhead.nll.default" in targets(forward[0])  # its gradient rule's steps
    assert "crfhead.scale_grads.default" in targets(backward[0])
    for p, w in zip(model.parameters(), want, strict=True):
        torch.testing.assert_close(p.grad, w)


def test_compiled_loss_of_the_bilstm_encoder_breaks_only_in_the_encoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from crfhead.data import Batch
    from crfhead.encoders import BiLSTMEncoder

    enc = BiLSTMEncoder(5, 30, char_encoder=None, word_dim=8, hidden_size=6, dropout=0.0)
    crf = CRF(5)
    words, tags, mask = _step_inputs()

    def step(words: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch = Batch(mask=mask, words=words, chars=None, features=None, tags=tags, sentences=[])
        loss: torch.Tensor = crf(enc(batch), tags, mask)
        return loss

    want = step(words, tags, mask)
    _no_portable_scan(monkeypatch)
    explained = torch._dynamo.explain(step)(words, tags, mask)
    for reason in explained.break_reasons:
        assert "encoders" in reason.user_stack[-1].filename, reason.user_stack[-1]
    ops_seen = {
        str(n.target) for g in explained.graphs for n in g.graph.nodes if n.op == "call_function"
    }
    assert "crfhead.fused_nll.default" in ops_seen
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(step, backend="aot_eager")(words, tags, mask), want)


# --------------------------------------------------------------------------- torch.export
class _Decoder(nn.Module):
    def __init__(self, crf: CRF) -> None:
        super().__init__()
        self.crf = crf

    def forward(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        paths: torch.Tensor = self.crf.predict(emissions, mask)
        return paths


def test_exported_decoder_with_a_dynamic_length_decodes_other_lengths_as_eager() -> None:
    crf = CRF(5, labels=["O", "B-X", "I-X", "B-Y", "I-Y"], scheme="BIO").eval()
    module = _Decoder(crf)
    B, T = torch.export.Dim("batch"), torch.export.Dim("length", min=1)
    dynamic = {"emissions": {0: B, 1: T}, "mask": {0: B, 1: T}}
    example = (torch.randn(2, 6, 5), torch.ones(2, 6, dtype=torch.bool))
    with torch.no_grad():
        program = torch.export.export(module, example, dynamic_shapes=dynamic)
    targets = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    assert targets.count("crfhead.viterbi.default") == 1
    assert len(targets) < 40  # no unrolled time loop
    run = program.module()
    g = torch.Generator().manual_seed(0)
    for batch, length in ((3, 11), (1, 1), (4, 30)):
        emissions = torch.randn(batch, length, 5, generator=g) * 3
        mask = torch.arange(length)[None] < torch.randint(1, length + 1, (batch, 1), generator=g)
        with use_backend("portable"):
            want = module(emissions, mask)
        assert torch.equal(run(emissions, mask), want)


def test_exported_loss_with_a_dynamic_length_equals_portable() -> None:
    crf = CRF(4)

    class Loss(nn.Module):
        def forward(self, e: torch.Tensor, t: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = crf.nll(e, t, m, reduction="none")
            return out

    B, T = torch.export.Dim("batch"), torch.export.Dim("length", min=1)
    shapes = {"e": {0: B, 1: T}, "t": {0: B, 1: T}, "m": {0: B, 1: T}}
    example = (
        torch.randn(2, 5, 4),
        torch.zeros(2, 5, dtype=torch.long),
        torch.ones(2, 5, dtype=torch.bool),
    )
    with torch.no_grad():
        program = torch.export.export(Loss(), example, dynamic_shapes=shapes)
    assert any(str(n.target) == "crfhead.fused_nll.default" for n in program.graph.nodes)
    e, t = torch.randn(3, 9, 4), torch.randint(0, 4, (3, 9))
    m = torch.ones(3, 9, dtype=torch.bool)
    m[2, 6:] = False
    with torch.no_grad(), use_backend("portable"):
        want = Loss()(e, t, m)
    torch.testing.assert_close(program.module()(e, t, m), want)
