"""The whole tagger as one traceable module: batch tensors in, tags, marginals, ``log Z`` and potentials out.

:class:`ModelProgram` is what :func:`crfhead.inference.export.export_model` hands to ``torch.export``
and to ``torch.onnx.export``. Its inputs are the tensors of the model's own
:class:`~crfhead.data.batching.Batch` (:data:`INPUT_FIELDS` that the model reads, then the mask);
its outputs are :data:`OUTPUTS` (only ``tags`` for a head that is not a probability model).

Two ways to run the chain, chosen by ``chain``:

* ``"engine"`` (``.pt2``): the engine's own functions, which trace to the CPU kernel's custom ops
  (``crfhead::viterbi``, ``crfhead::marginals``, ...): one program for every length, and the same
  numbers as the eager model, bit for bit.
* ``"scan"`` (ONNX, which has no such ops): :func:`chain_scans`, the same recursions written with
  ``torch.scan``, which the ONNX exporter translates to ONNX ``Scan`` nodes. The graph holds two
  loops whatever the length (unrolling the portable backend's Python loop over ``T`` is what made
  ONNX export take minutes and fixed ``T``). Forward-backward runs in float64 (marginals within
  ``1e-7`` of the kernel's float32 ones), Viterbi in the potentials' dtype with the kernel's order
  of additions and its tie rule (the lowest tag), so the paths are the kernel's.

The BiLSTM encoder packs its sequences by length (``pack_padded_sequence``: data-dependent, not
traceable), and ``nn.LSTM`` exports only at a fixed length; :class:`TracedBiLSTM` computes the same
function on padded tensors, each direction of each layer its recurrence as a scan, the backward one
over each row reversed within its length. For ONNX the indicator encoder's ``embedding_bag`` is
:class:`GatheredIndicators` (ONNX has no bag op: it becomes a loop over the bags). Every other
encoder is traced as it is; the transformer encoder is not exportable (it tokenises in its forward).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from crfhead import engine
from crfhead.data.batching import Batch
from crfhead.encoders.bilstm import BiLSTMEncoder, _CharLSTM
from crfhead.encoders.indicator import IndicatorEncoder
from crfhead.encoders.rnn import reverse_within
from crfhead.engine.decode import mbr_potentials
from crfhead.engine.potentials import ChainPotentials
from crfhead.model.tagger import Tagger

__all__ = [
    "INPUT_FIELDS",
    "OUTPUTS",
    "ChainResult",
    "GatheredIndicators",
    "ModelProgram",
    "TracedBiLSTM",
    "chain_scans",
    "input_names",
    "scan_decode",
]

INPUT_FIELDS = ("words", "chars", "features")
"""The batch fields a program may take (those the model reads, in this order), before ``mask``."""

OUTPUTS = ("tags", "marginals", "log_z", "emissions", "transitions", "start", "end")
"""What a probability head's program returns: tags ``(B, T)`` int64 (``-1`` where masked),
marginals ``(B, T, K)``, ``log Z`` ``(B,)`` and the chain potentials (emissions ``(B, T, K)``,
transitions ``(K, K)`` or ``(B, T-1, K, K)``, start and end ``(K,)``), from which span probabilities
are computed exactly."""


def input_names(model: Tagger) -> list[str]:
    """The program's inputs for ``model``: the fields it reads (of :data:`INPUT_FIELDS`), then ``mask``.

    Raises:
        ValueError: the model reads something no tensor carries (the transformer reads the
            sentences' words and tokenises them itself).
    """
    needs = set(model.needs)
    unknown = sorted(needs - set(INPUT_FIELDS))
    if unknown:
        raise ValueError(
            f"{type(model.encoder).__name__} reads {unknown} (not tensors): it cannot be exported; "
            f"exportable encoders read only {list(INPUT_FIELDS)}"
        )
    return [name for name in INPUT_FIELDS if name in needs] + ["mask"]


ChainResult = tuple[Tensor | None, Tensor | None, Tensor | None]
"""``(marginals, log_z, paths)`` of :func:`chain_scans`, ``None`` for what was not asked."""


# ------------------------------------------------------------------------------ the chain by scan
def _lse(x: Tensor, dim: int) -> Tensor:
    """Log-sum-exp over ``dim``, ``-inf`` (never NaN) where every entry is ``-inf``."""
    top = x.amax(dim)
    safe = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    return torch.log(torch.exp(x - safe.unsqueeze(dim)).sum(dim)) + safe


def _per_step(pot: ChainPotentials) -> Tensor | None:
    """Per-edge transitions time-major ``(T, B, K, K)`` (entry ``t`` enters ``t``), else ``None``."""
    if not pot.per_position:
        return None
    tr = pot.transitions  # (B, T-1, K, K)
    first = tr.new_zeros(tr.shape[0], 1, tr.shape[2], tr.shape[3])  # unused: nothing enters t = 0
    return torch.cat([first, tr], 1).transpose(0, 1)


def _zeros(B: int, like: Tensor, dtype: torch.dtype = torch.bool) -> Tensor:
    return torch.zeros(B, dtype=dtype, device=like.device)


Step = Callable[
    [tuple[Tensor, ...], tuple[Tensor, ...], tuple[Tensor, ...]],
    tuple[tuple[Tensor, ...], tuple[Tensor, ...]],
]
"""A scan step: ``(carry, x, consts) -> (next carry, outputs)``."""


def _scan(
    step: Step,
    init: tuple[Tensor, ...],
    xs: tuple[Tensor, ...],
    consts: tuple[Tensor, ...],
    reverse: bool = False,
) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """``torch.scan`` over dim 0 of ``xs``, the step's constant tensors passed explicitly.

    Calls the scan operator itself rather than ``torch.scan``, which first compiles the step with
    dynamo (most of the export time, and nothing gained: the steps are plain tensor code); the
    constants are the operator's ``additional_inputs``, so the step closes over no tensor.
    """
    from torch._higher_order_ops.scan import scan_op

    n, m = len(init), len(xs)

    def flat(*args: Tensor) -> list[Tensor]:
        carry, ys = step(args[:n], args[n : n + m], args[n + m :])
        return [*carry, *ys]

    if reverse:
        xs = tuple(x.flip(0) for x in xs)
    out = scan_op(flat, list(init), list(xs), tuple(consts))
    carry, ys = tuple(out[:n]), tuple(out[n:])
    if reverse:
        ys = tuple(y.flip(0) for y in ys)
    return carry, ys


def chain_scans(pot: ChainPotentials, *, sums: bool = True, best: bool = True) -> ChainResult:
    """Marginals and ``log Z`` (``sums``) and the Viterbi paths (``best``) of ``pot`` in two scans.

    One forward scan carries the log forward scores (float64) and the max-product scores with their
    back-pointers (the potentials' dtype); one reverse scan carries the backward scores and walks
    the back-pointers. Masked positions carry the state over, so holes are skipped as the engine
    skips them.

    Returns:
        ``(marginals (B, T, K) or None, log_z (B,) or None, paths (B, T) int64 or None)``: the
        marginals 0 and the paths ``-1`` where masked; a row with no allowed path has path all
        ``-1``, as :func:`crfhead.engine.viterbi` says.
    """
    em = pot.emissions.transpose(0, 1)  # (T, B, K)
    B, K = em.shape[1], em.shape[2]
    mask = pot.mask.transpose(0, 1)  # (T, B)
    em64 = em.double()
    steps = _per_step(pot)  # (T, B, K, K) or None
    shared = steps is None
    # The step's constants: (transitions in float64 and as given, start, end) as given, then float64.
    consts = (
        pot.transitions.double(),
        pot.transitions,
        pot.start,
        pot.end,
        pot.start.double(),
        pot.end.double(),
    )

    def ahead(
        carry: tuple[Tensor, ...], x: tuple[Tensor, ...], c: tuple[Tensor, ...]
    ) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
        started, alpha, delta = carry
        m, e64, e = x[0], x[1], x[2]
        into64, into = (c[0], c[1]) if shared else (x[3], x[4])
        ys: list[Tensor] = []
        if sums:
            new = _lse(alpha[:, :, None] + into64, 1) + e64
            alpha = torch.where(m[:, None], torch.where(started[:, None], new, c[4] + e64), alpha)
            ys.append(alpha.clone())
        if best:
            top, arg = (delta[:, :, None] + into).max(1)  # (B, K): the best previous tag of each
            new = torch.where(started[:, None], top + e, c[2] + e)
            delta = torch.where(m[:, None], new, delta)
            ys.append(arg)
        return (started | m, alpha.clone(), delta.clone()), tuple(ys)  # no carry aliased

    xs: tuple[Tensor, ...] = (mask, em64, em)
    if steps is not None:
        xs = (*xs, steps.double(), steps)
    init = (_zeros(B, em), em64.new_zeros(B, K), em.new_zeros(B, K))
    (_, last_alpha, last_delta), ys = _scan(ahead, init, xs, consts)
    alphas = ys[0] if sums else None
    pointers = ys[-1] if best else None
    last = (last_delta + pot.end).argmax(1)  # (B,)

    def back(
        carry: tuple[Tensor, ...], x: tuple[Tensor, ...], c: tuple[Tensor, ...]
    ) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
        # later: emissions + beta at the next unmasked position; into: the edges entering it;
        # pending: the tag its back-pointer gives this position.
        has, later, into, pending = carry
        m, e64 = x[0], x[1]
        ys: list[Tensor] = []
        if sums:
            edges = c[0] if shared else into
            beta = _lse(edges + later[:, None, :], 2)
            beta = torch.where(has[:, None], beta, c[5].expand_as(beta))
            later = torch.where(m[:, None], e64 + beta, later)
            if not shared:
                into = torch.where(m[:, None, None], x[-1], into)
            ys.append(beta.clone())
        if best:
            tag = torch.where(has, pending, c[6])
            before = x[2].gather(1, tag[:, None])[:, 0]
            ys.append(torch.where(m, tag, torch.full_like(tag, -1)))
            pending = torch.where(m, before, pending)
        return (has | m, later.clone(), into.clone(), pending.clone()), tuple(ys)

    xs = (mask, em64)
    if best and pointers is not None:
        xs = (*xs, pointers)
    if steps is not None:
        xs = (*xs, steps.double())
    into0 = em64.new_zeros(()) if steps is None else torch.zeros_like(steps[0]).double()
    init_back = (_zeros(B, em), em64.new_zeros(B, K), into0, _zeros(B, em, torch.long))
    ys = _scan(back, init_back, xs, (*consts, last), reverse=True)[1]
    gamma = log_z = paths = None
    if sums and alphas is not None:
        log_z64 = torch.where(
            pot.nonempty, _lse(last_alpha + consts[5], 1), torch.zeros_like(last_alpha[:, 0])
        )
        g = torch.exp(alphas + ys[0] - log_z64[None, :, None]).transpose(0, 1)  # (B, T, K)
        gamma = torch.where(pot.mask[..., None], g, torch.zeros_like(g)).to(em.dtype)
        log_z = log_z64.to(em.dtype)
    if best:
        found = ys[-1].transpose(0, 1)  # (B, T)
        lost = ~torch.isfinite((last_delta + pot.end).amax(1)) & pot.nonempty
        paths = torch.where(lost[:, None], torch.full_like(found, -1), found)
    return gamma, log_z, paths


# ------------------------------------------------------------------------------ the BiLSTM
def _lstm_step(
    carry: tuple[Tensor, ...], x: tuple[Tensor, ...], c: tuple[Tensor, ...]
) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """One LSTM step: ``x`` the input's projection ``(B, 4H)``, ``c`` the recurrent weights and bias."""
    h, cell = carry
    gates = x[0] + h @ c[0].t() + c[1]
    i, f, g, o = gates.chunk(4, 1)
    cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(cell)
    return (h.clone(), cell.clone()), (h.clone(),)


def _one_way(lstm: nn.LSTM, layer: int, suffix: str, x: Tensor) -> Tensor:
    """One direction of one layer of ``lstm`` over ``x`` ``(B, T, D)``: outputs ``(B, T, H)``.

    ``torch.nn.LSTM`` itself cannot be exported at a dynamic length (its decomposition unrolls the
    time steps); this is its recurrence as a scan: the input projection for every step at once, then
    ``h @ W_hh^T`` per step.
    """
    w_ih, w_hh = (
        getattr(lstm, f"weight_ih_l{layer}{suffix}"),
        getattr(lstm, f"weight_hh_l{layer}{suffix}"),
    )
    bias = w_ih.new_zeros(w_ih.shape[0])
    if lstm.bias:
        bias = getattr(lstm, f"bias_ih_l{layer}{suffix}") + getattr(
            lstm, f"bias_hh_l{layer}{suffix}"
        )
    projected = (x @ w_ih.t()).transpose(0, 1)  # (T, B, 4H)
    B, H = x.shape[0], lstm.hidden_size
    init = (x.new_zeros(B, H), x.new_zeros(B, H))
    out = _scan(_lstm_step, init, (projected,), (w_hh, bias))[1][0]
    return out.transpose(0, 1)


class _BiDirections(nn.Module):
    """A bidirectional ``batch_first`` LSTM on padded rows of given lengths, as if packed."""

    def __init__(self, lstm: nn.LSTM) -> None:
        super().__init__()
        if not (lstm.bidirectional and lstm.batch_first) or lstm.proj_size:
            raise ValueError("only batch-first bidirectional LSTMs without projections are traced")
        self.lstm = lstm

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Outputs ``(B, T, 2H)`` (valid within each length) and final states ``(B, 2H)`` of the top layer."""
        ahead = back = x
        for layer in range(self.lstm.num_layers):
            ahead = _one_way(self.lstm, layer, "", x)
            back = _one_way(self.lstm, layer, "_reverse", reverse_within(x, lengths))
            back = reverse_within(back, lengths)
            x = torch.cat([ahead, back], -1)
        last = (lengths - 1).clamp(min=0)[:, None, None].expand(-1, 1, ahead.shape[2])
        final_ahead = ahead.gather(1, last)[:, 0]
        final_back = back[:, 0]  # the backward direction ends at the first position
        return x, torch.cat([final_ahead, final_back], -1)


class TracedBiLSTM(nn.Module):
    """:class:`~crfhead.encoders.BiLSTMEncoder`'s forward on padded tensors: traceable, same emissions.

    Shares the encoder's weights. Masks must be prefixes (each row's tokens first), as the
    encoder requires and the collator makes them.
    """

    def __init__(self, encoder: BiLSTMEncoder) -> None:
        super().__init__()
        self.encoder = encoder
        self.words = _BiDirections(encoder.lstm)
        self.char_lstm = (
            _BiDirections(encoder.chars.lstm) if isinstance(encoder.chars, _CharLSTM) else None
        )

    def _chars(self, chars: Tensor) -> Tensor:
        """``(N, C)`` character ids → ``(N, out)`` as the encoder's character encoder (zeros for none)."""
        encoder = self.encoder.chars
        assert encoder is not None
        if self.char_lstm is None:
            out: Tensor = encoder(chars)  # the CNN masks padding itself
            return out
        lengths = (chars != 0).sum(1)
        assert isinstance(encoder, _CharLSTM)
        final = self.char_lstm(encoder.embed(chars), lengths)[1]
        return torch.where(lengths[:, None] > 0, final, torch.zeros_like(final))

    def forward(self, batch: Batch) -> Tensor:
        """Emissions ``(B, T, K)``, 0 at padded positions."""
        enc = self.encoder
        assert batch.words is not None
        mask, words = batch.mask, batch.words
        B, T = mask.shape
        x = enc.embed(words)  # (B, T, word_dim)
        if enc.chars is not None:
            assert batch.chars is not None
            chars = batch.chars
            per_word = self._chars(chars.reshape(B * T, chars.shape[2]))
            per_word = torch.where(mask.reshape(-1, 1), per_word, torch.zeros_like(per_word))
            x = torch.cat([x, per_word.reshape(B, T, -1).to(x.dtype)], -1)
        hidden = self.words(x, mask.sum(1))[0]
        hidden = torch.where(mask[..., None], hidden, torch.zeros_like(hidden))
        emissions: Tensor = enc.out(hidden)
        return emissions.masked_fill(~mask[..., None], 0.0)


class GatheredIndicators(nn.Module):
    """:class:`~crfhead.encoders.IndicatorEncoder`'s sums as a gather and a sum (for ONNX).

    ``embedding_bag`` becomes a loop over the ``B * T`` bags in ONNX (slow in onnxruntime); a
    gather of the ``(B, T, F, K)`` rows and a sum over ``F`` is the same sum (id 0 left out), in
    another order of additions. Shares the encoder's weights.
    """

    def __init__(self, encoder: IndicatorEncoder) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, batch: Batch) -> Tensor:
        """Emissions ``(B, T, K)``, 0 at padded positions (all of whose ids are 0)."""
        assert batch.features is not None
        ids = batch.features
        rows = self.encoder.weight[ids]  # (B, T, F, K)
        out: Tensor = torch.where((ids > 0)[..., None], rows, torch.zeros_like(rows)).sum(2)
        return out


# ------------------------------------------------------------------------------ the program
class ModelProgram(nn.Module):
    """Encoder → potentials → tags (+ marginals, ``log Z`` and the potentials): see the module docstring.

    Args:
        model: the tagger (in eval mode, on the CPU).
        chain: ``"engine"`` (the engine's custom ops) or ``"scan"`` (``torch.scan``, for ONNX).

    Attributes:
        inputs: the input names (:func:`input_names`), the order :meth:`forward` takes them in.
        outputs: the output names, the order :meth:`forward` returns them in.
    """

    def __init__(self, model: Tagger, chain: str = "engine") -> None:
        super().__init__()
        if chain not in ("engine", "scan"):
            raise ValueError(f"chain must be 'engine' or 'scan', got {chain!r}")
        self.model = model
        self.chain = chain
        self.inputs = input_names(model)
        self.encoder: nn.Module = model.encoder
        if isinstance(model.encoder, BiLSTMEncoder):
            self.encoder = TracedBiLSTM(model.encoder)
        elif isinstance(model.encoder, IndicatorEncoder) and chain == "scan":
            self.encoder = GatheredIndicators(model.encoder)
        self.calibrated = bool(model.head.calibrated)
        self.outputs: list[str] = list(OUTPUTS if self.calibrated else OUTPUTS[:1])

    def forward(self, *tensors: Tensor) -> tuple[Tensor, ...]:
        """The outputs named by :attr:`outputs`, from the inputs named by :attr:`inputs`."""
        given = dict(zip(self.inputs, tensors, strict=True))
        mask = given["mask"]
        batch = Batch(
            mask=mask,
            words=given.get("words"),
            chars=given.get("chars"),
            features=given.get("features"),
            tags=None,
            sentences=[],
        )
        head = self.model.head
        emissions = head.emissions_for(batch, self.encoder)
        pot = head.potentials(emissions, mask)
        if self.chain == "engine":
            tags = head.predict_from(pot)
            if not head.calibrated:
                return (tags,)
            gamma, log_z = engine.marginals(pot), engine.log_partition(pot)
        else:
            gamma, log_z, tags = scan_decode(pot, head.decoder)
            if not head.calibrated:
                return (tags,)
        return (tags, gamma, log_z, *_potential_outputs(pot))


def scan_decode(pot: ChainPotentials, decoder: str) -> tuple[Tensor, Tensor, Tensor]:
    """Marginals, ``log Z`` and the head's ``decoder`` (:data:`~crfhead.heads.base.DECODERS`) by scan."""
    gamma, log_z, paths = chain_scans(pot, best=decoder == "viterbi")
    assert gamma is not None and log_z is not None
    if decoder == "posterior":
        top = gamma.argmax(-1)
        paths = torch.where(pot.mask, top, torch.full_like(top, -1))
    elif decoder == "posterior_valid":
        paths = chain_scans(mbr_potentials(pot, gamma), sums=False)[2]
    assert paths is not None
    return gamma, log_z, paths


def _potential_outputs(pot: ChainPotentials) -> Sequence[Tensor]:
    """The chain potentials as outputs (copies: an exported program returns no parameter itself)."""
    return (pot.emissions, pot.transitions.clone(), pot.start.clone(), pot.end.clone())
