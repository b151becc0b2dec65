"""The whole tagger as one traceable module: batch tensors in, tags, marginals, ``log Z`` and potentials out.

:class:`ModelProgram` is what :func:`crfhead.inference.export.export_model` hands to ``torch.export``
and to ``torch.onnx.export``. Its inputs are the tensors of the model's own
:class:`~crfhead.data.batching.Batch` (:data:`INPUT_FIELDS` that the model reads, then the mask);
its outputs are :data:`OUTPUTS` (only ``tags`` for a head that is not a probability model).

Two ways to run the chain, chosen by ``chain``:

* ``"engine"`` (``.pt2``): the engine's own functions, which trace to the CPU kernel's custom ops
  (``crfhead::viterbi``, ``crfhead::marginals``, ...): one program for every length, and the same
  numbers as the eager model, bit for bit.
* ``"scan"`` (ONNX, which has no such ops): :func:`scan_chain`, the same recursions written with
  ``torch.scan``, which the ONNX exporter translates to ONNX ``Scan`` nodes. The graph holds four
  loops whatever the length (unrolling the portable backend's Python loop over ``T`` is what made
  ONNX export take minutes and fixed ``T``). Forward-backward runs in float64 (marginals within
  ``1e-7`` of the kernel's float32 ones), Viterbi in the potentials' dtype with the kernel's order
  of additions and its tie rule (the lowest tag), so the paths are the kernel's.

The BiLSTM encoder packs its sequences by length (``pack_padded_sequence``: data-dependent, not
traceable); :class:`TracedBiLSTM` computes the same function on padded tensors, each direction of
each layer a one-way LSTM, the backward one over each row reversed within its length. Every other
encoder is traced as it is; the transformer encoder is not exportable (it tokenises in its forward).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from crfhead import engine
from crfhead.data.batching import Batch
from crfhead.engine.decode import mbr_potentials
from crfhead.engine.potentials import ChainPotentials
from crfhead.model.tagger import Tagger

__all__ = ["INPUT_FIELDS", "OUTPUTS", "ModelProgram", "TracedBiLSTM", "input_names", "scan_chain"]

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
    return torch.cat([torch.zeros_like(tr[:, :1]), tr], 1).transpose(0, 1)  # row 0 unused


def _forward(pot: ChainPotentials, em: Tensor, tr: Tensor, steps: Tensor | None) -> Tensor:
    """Log forward scores ``(T, B, K)`` in ``em``'s dtype, carried over masked positions."""
    from torch._higher_order_ops.scan import scan

    B, K = em.shape[1], em.shape[2]
    start = pot.start.to(em.dtype)
    mask = pot.mask.transpose(0, 1)  # (T, B)

    def step(
        carry: tuple[Tensor, Tensor], x: tuple[Tensor, ...]
    ) -> tuple[tuple[Tensor, Tensor], Tensor]:
        alpha, started = carry
        e, m = x[0], x[1]
        into = tr if steps is None else x[2]
        new = torch.where(started[:, None], _lse(alpha[:, :, None] + into, 1) + e, start + e)
        alpha = torch.where(m[:, None], new, alpha)
        return (alpha, started | m), alpha.clone()

    xs = (em, mask) if steps is None else (em, mask, steps)
    init = (em.new_zeros(B, K), torch.zeros(B, dtype=torch.bool, device=em.device))
    out: Tensor = scan(step, init, xs)[1]
    return out


def _backward(pot: ChainPotentials, em: Tensor, tr: Tensor, steps: Tensor | None) -> Tensor:
    """Log backward scores ``(T, B, K)``: ``beta_t`` from the next unmasked position on."""
    from torch._higher_order_ops.scan import scan

    B, K = em.shape[1], em.shape[2]
    end = pot.end.to(em.dtype)
    mask = pot.mask.transpose(0, 1)

    def step(carry: tuple[Tensor, ...], x: tuple[Tensor, ...]) -> tuple[tuple[Tensor, ...], Tensor]:
        # ahead: emissions + beta at the next unmasked position; into: the edges entering it.
        ahead, has = carry[0], carry[1]
        into = tr if steps is None else carry[2]
        e, m = x[0], x[1]
        beta = torch.where(has[:, None], _lse(into + ahead[:, None, :], 2), end.expand(B, K))
        ahead = torch.where(m[:, None], e + beta, ahead)
        if steps is None:
            return (ahead, has | m), beta.clone()
        into = torch.where(m[:, None, None], x[2], into)
        return (ahead, has | m, into), beta.clone()

    init: tuple[Tensor, ...] = (
        em.new_zeros(B, K),
        torch.zeros(B, dtype=torch.bool, device=em.device),
    )
    xs: tuple[Tensor, ...] = (em, mask)
    if steps is not None:
        init, xs = (*init, torch.zeros_like(steps[0])), (em, mask, steps)
    out: Tensor = scan(step, init, xs, reverse=True)[1]
    return out


def _viterbi(pot: ChainPotentials) -> Tensor:
    """Best paths ``(B, T)`` int64, ``-1`` where masked, ties to the lowest tag (the kernel's rule)."""
    from torch._higher_order_ops.scan import scan

    em = pot.emissions.transpose(0, 1)  # (T, B, K)
    B, K = em.shape[1], em.shape[2]
    mask = pot.mask.transpose(0, 1)
    steps = _per_step(pot)
    tr = pot.transitions

    def forward(
        carry: tuple[Tensor, Tensor], x: tuple[Tensor, ...]
    ) -> tuple[tuple[Tensor, Tensor], Tensor]:
        delta, started = carry
        e, m = x[0], x[1]
        into = tr if steps is None else x[2]
        best, arg = (delta[:, :, None] + into).max(1)  # (B, K): the best previous tag of each
        new = torch.where(started[:, None], best + e, pot.start + e)
        delta = torch.where(m[:, None], new, delta)
        return (delta, started | m), arg

    xs = (em, mask) if steps is None else (em, mask, steps)
    init = (em.new_zeros(B, K), torch.zeros(B, dtype=torch.bool, device=em.device))
    (last_delta, _), pointers = scan(forward, init, xs)  # pointers (T, B, K)
    last = (last_delta + pot.end).argmax(1)  # (B,)

    def back(
        carry: tuple[Tensor, Tensor], x: tuple[Tensor, Tensor]
    ) -> tuple[tuple[Tensor, Tensor], Tensor]:
        pending, placed = carry  # the tag of the next unmasked position's predecessor
        pointer, m = x
        tag = torch.where(placed, pending, last)
        before = pointer.gather(1, tag[:, None])[:, 0]
        out = torch.where(m, tag, torch.full_like(tag, -1))
        return (torch.where(m, before, pending), placed | m), out

    init_back = (
        torch.zeros(B, dtype=torch.long, device=em.device),
        torch.zeros(B, dtype=torch.bool, device=em.device),
    )
    paths = scan(back, init_back, (pointers, mask), reverse=True)[1].transpose(0, 1)  # (B, T)
    # A row with no allowed path (best score -inf) has no path, as the engine says.
    lost = ~torch.isfinite((last_delta + pot.end).amax(1)) & pot.nonempty
    out: Tensor = torch.where(lost[:, None], torch.full_like(paths, -1), paths)
    return out


def scan_chain(pot: ChainPotentials) -> tuple[Tensor, Tensor]:
    """Node marginals ``(B, T, K)`` (0 where masked) and ``log Z`` ``(B,)`` by ``torch.scan``.

    The forward-backward of :func:`crfhead.engine.marginals` and :func:`crfhead.engine.log_partition`
    in float64 (see the module docstring); results in the potentials' dtype.
    """
    em = pot.emissions.transpose(0, 1).double()  # (T, B, K)
    tr = pot.transitions.double()
    steps = _per_step(pot)
    steps = None if steps is None else steps.double()
    alphas = _forward(pot, em, tr, steps)
    betas = _backward(pot, em, tr, steps)
    last = alphas[-1]  # masked positions carry the last unmasked alpha forward
    log_z = torch.where(
        pot.nonempty, _lse(last + pot.end.double(), 1), torch.zeros_like(last[:, 0])
    )
    gamma = torch.exp(alphas + betas - log_z[None, :, None]).transpose(0, 1)  # (B, T, K)
    gamma = torch.where(pot.mask[..., None], gamma, torch.zeros_like(gamma))
    dtype = pot.emissions.dtype
    return gamma.to(dtype), log_z.to(dtype)


# ------------------------------------------------------------------------------ the BiLSTM
def _reverse_within(x: Tensor, lengths: Tensor) -> Tensor:
    """Each row of ``x`` ``(B, T, D)`` reversed within its length, padding left in place."""
    T = x.shape[1]
    t = torch.arange(T, device=x.device)[None, :]
    index = torch.where(t < lengths[:, None], lengths[:, None] - 1 - t, t)  # an involution
    return x.gather(1, index[:, :, None].expand(-1, -1, x.shape[2]))


def _one_way(lstm: nn.LSTM, layer: int, suffix: str) -> nn.LSTM:
    """A one-layer one-way LSTM sharing the weights of one direction of one layer of ``lstm``."""
    size = lstm.input_size if layer == 0 else 2 * lstm.hidden_size
    one = nn.LSTM(size, lstm.hidden_size, batch_first=True, bias=lstm.bias)
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        if hasattr(lstm, f"{name}_l{layer}{suffix}"):
            setattr(one, f"{name}_l0", getattr(lstm, f"{name}_l{layer}{suffix}"))
    return one


class _BiDirections(nn.Module):
    """A bidirectional ``batch_first`` LSTM on padded rows of given lengths, as if packed."""

    def __init__(self, lstm: nn.LSTM) -> None:
        super().__init__()
        if not (lstm.bidirectional and lstm.batch_first) or lstm.proj_size:
            raise ValueError("only batch-first bidirectional LSTMs without projections are traced")
        self.forward_layers = nn.ModuleList(_one_way(lstm, i, "") for i in range(lstm.num_layers))
        self.backward_layers = nn.ModuleList(
            _one_way(lstm, i, "_reverse") for i in range(lstm.num_layers)
        )

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Outputs ``(B, T, 2H)`` (valid within each length) and final states ``(B, 2H)`` of the top layer."""
        ahead = back = x
        for fwd, bwd in zip(self.forward_layers, self.backward_layers, strict=True):
            ahead = fwd(x)[0]
            back = _reverse_within(bwd(_reverse_within(x, lengths))[0], lengths)
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

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        from crfhead.encoders.bilstm import _CharLSTM

        self.encoder = encoder
        self.words = _BiDirections(encoder.lstm)
        self.char_lstm = (
            _BiDirections(encoder.chars.lstm) if isinstance(encoder.chars, _CharLSTM) else None
        )

    def _chars(self, chars: Tensor) -> Tensor:
        """``(N, C)`` character ids → ``(N, out)`` as the encoder's character encoder (zeros for none)."""
        encoder = self.encoder.chars
        if self.char_lstm is None:
            out: Tensor = encoder(chars)  # the CNN masks padding itself
            return out
        lengths = (chars != 0).sum(1)
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
        from crfhead.encoders.bilstm import BiLSTMEncoder

        self.model = model
        self.chain = chain
        self.inputs = input_names(model)
        self.encoder: nn.Module = (
            TracedBiLSTM(model.encoder)
            if isinstance(model.encoder, BiLSTMEncoder) and not model.head.scores_words
            else model.encoder
        )
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
            gamma, log_z = scan_chain(pot)
            tags = _scan_decode(pot, gamma, head.decoder)
            if not head.calibrated:
                return (tags,)
        return (tags, gamma, log_z, *_potential_outputs(pot))


def _scan_decode(pot: ChainPotentials, gamma: Tensor, decoder: str) -> Tensor:
    """The head's ``decoder`` (:data:`~crfhead.heads.base.DECODERS`) on the scan chain."""
    if decoder == "viterbi":
        return _viterbi(pot)
    if decoder == "posterior":
        best = gamma.argmax(-1)
        return torch.where(pot.mask, best, torch.full_like(best, -1))
    return _viterbi(mbr_potentials(pot, gamma))


def _potential_outputs(pot: ChainPotentials) -> Sequence[Tensor]:
    """The chain potentials as outputs (copies: an exported program returns no parameter itself)."""
    return (pot.emissions, pot.transitions.clone(), pot.start.clone(), pot.end.clone())
