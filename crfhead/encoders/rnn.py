"""A bidirectional LSTM over padded rows of given lengths, as if packed: the CPU's fused recurrence.

:func:`bidirectional_lstm` computes what ``nn.LSTM(bidirectional=True)`` computes on a
``PackedSequence``: each row's outputs within its length, and each row's final states, with padding
never reaching the backward direction. It takes the module's own weights.

Why not the packed module on the CPU: a packed ``nn.LSTM`` runs ATen's composite recurrence, one
small matrix product and a dozen element-wise ops per time step, each recorded by autograd (whose
backward also fills a full-size zero tensor per step to undo the slicing). Unpacked, the CPU runs
the whole recurrence of a direction in one oneDNN call (forward and backward). So each direction
runs unpacked: the forward one over the rows as they are (padding after a row's tokens never reaches
them), the backward one over each row reversed within its length (the same trick makes the
exported graph's LSTM, :mod:`crfhead.inference.export_graph`). Float64, which oneDNN does not take,
runs the same way through ATen's recurrence. Elsewhere (CUDA: cuDNN runs packed sequences fused),
under CPU autocast (bfloat16, which oneDNN's LSTM takes only on CPUs that have it), for other dtypes
and for projections, the packed module runs.

Unpacked, a row costs its batch's longest length. The rows are therefore grouped by length: rows
sorted by length, cut into groups, each group run at its own longest length, both rounded up to a
coarse grid of shapes (:func:`grid`; padding rows and steps changes no real output). A group costs
its rows × its steps × the multiply-adds of one step, plus the fixed cost of its calls; the cuts
minimise that total (dynamic programming over the distinct lengths, :func:`length_groups`).
"""

from __future__ import annotations

import bisect

import torch
from torch import Tensor, nn

from crfhead.encoders.dropout import dropout

__all__ = ["bidirectional_lstm", "grid", "length_groups", "reverse_within"]

_MAX_CANDIDATES = 64
"""Cut candidates the grouping considers (distinct lengths beyond this are coarsened)."""


def reverse_within(x: Tensor, lengths: Tensor) -> Tensor:
    """Each row of ``x`` ``(N, L, D)`` reversed within its length ``(N,)``, padding left in place."""
    N, L, D = x.shape
    t = torch.arange(L, device=x.device)[None, :]
    index = torch.where(t < lengths[:, None], lengths[:, None] - 1 - t, t)  # an involution
    # Whole vectors of D values moved by one index_select of the (N * L, D) rows (its backward an
    # index_add_ of rows): a gather with an (N, L, D) index reads one index per value, forward and
    # backward.
    rows = (index + torch.arange(N, device=x.device)[:, None] * L).reshape(-1)
    return x.reshape(N * L, D).index_select(0, rows).view(N, L, D)


def grid(size: int) -> int:
    """``size`` rounded up to the shape grid: itself up to 8, then 4 steps an octave (10, 12, 14, 16, 20, ...).

    Groups run at grid shapes (rows and length), so a corpus meets a few hundred shapes, not
    thousands: oneDNN builds and caches one primitive per shape (1,024 by default), and building
    one costs more than the rows a grid shape pads (at most a quarter, about a tenth on average).
    """
    if size <= 8:
        return size
    step = 1 << ((size - 1).bit_length() - 3)
    return -(-size // step) * step


def length_groups(lengths: list[int], step_cost: int) -> list[int]:
    """Where to cut the rows, sorted by length, so that running each group at its grid shape is cheapest.

    Args:
        lengths: the rows' lengths, sorted ascending.
        step_cost: multiply-adds of one row's step (``4H (D + H)`` for an LSTM layer).

    Returns:
        The end index (exclusive) of each group, ascending; the last is ``len(lengths)``. Cuts fall
        between distinct lengths only.

    A group of ``n`` rows of longest length ``l`` runs ``grid(n)`` rows of ``grid(l)`` steps and
    costs ``grid(n) grid(l) + P`` row-steps, where ``P`` is the fixed cost of running a group (two
    fused calls, their gathers, the weight gradients' fixed part) in row-steps:
    ``P = 64 + 10**6 / step_cost``, which fits what was measured on x86 CPUs (about 0.6 ms for a
    25-unit character LSTM, whose step costs 2.3 us; 1.9 ms for a 200-unit word LSTM, 30 us a step).
    """
    n = len(lengths)
    if n == 0:
        return []
    # Cut candidates: after the last row of each distinct length (coarsened to _MAX_CANDIDATES).
    ends = [i + 1 for i in range(n - 1) if lengths[i] != lengths[i + 1]] + [n]
    if len(ends) > _MAX_CANDIDATES:
        stride = -(-len(ends) // _MAX_CANDIDATES)
        ends = sorted({*ends[stride - 1 :: stride], n})
    penalty = 64 + 10**6 // max(step_cost, 1)
    # best[j]: the cheapest cost of the rows before ends[j]; the group ending there starts at 0 or
    # after some earlier candidate.
    best: list[int] = []
    cut: list[int] = []
    for j, end in enumerate(ends):
        longest = grid(lengths[end - 1])
        cost, arg = grid(end) * longest + penalty, -1
        for i in range(j):
            c = best[i] + grid(end - ends[i]) * longest + penalty
            if c < cost:
                cost, arg = c, i
        best.append(cost)
        cut.append(arg)
    out: list[int] = []
    j = len(ends) - 1
    while j >= 0:
        out.append(ends[j])
        j = cut[j]
    return out[::-1]


def _fused(lstm: nn.LSTM, x: Tensor) -> bool:
    """Whether the unpacked fused path applies to ``lstm`` on ``x``."""
    return (
        x.device.type == "cpu"
        and x.dtype in (torch.float32, torch.float64)
        and x.dtype == lstm.weight_ih_l0.dtype
        # CPU autocast runs the LSTM in bfloat16, which oneDNN takes only where the CPU has it.
        and not torch.is_autocast_enabled("cpu")
        and lstm.batch_first
        and lstm.bidirectional
        and not lstm.proj_size
    )


def _one_way(lstm: nn.LSTM, layer: int, suffix: str, x: Tensor) -> Tensor:
    """One direction of one layer of ``lstm`` over ``x`` ``(n, l, D)`` from zero states: ``(n, l, H)``."""
    names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if lstm.bias else [])
    weights = [getattr(lstm, f"{name}_l{layer}{suffix}") for name in names]
    zeros = x.new_zeros(1, x.shape[0], lstm.hidden_size)
    out: Tensor = torch.lstm(
        x, (zeros, zeros), weights, lstm.bias, 1, 0.0, lstm.training, False, True
    )[0]
    return out


def _group(
    lstm: nn.LSTM, x: Tensor, lengths: Tensor, outputs: bool = True
) -> tuple[Tensor | None, Tensor]:
    """Every layer over one group ``x`` ``(n, l, D)``: outputs ``(n, l, 2H)`` and final states ``(n, 2H)``.

    Without ``outputs`` the outputs are ``None`` and the top layer's are never assembled.
    """
    last = (lengths - 1)[:, None, None].expand(-1, 1, lstm.hidden_size)
    for layer in range(lstm.num_layers):
        if layer:
            x = dropout(x, lstm.dropout, lstm.training)
        ahead = _one_way(lstm, layer, "", x)
        reversed_back = _one_way(lstm, layer, "_reverse", reverse_within(x, lengths))
        if not outputs and layer == lstm.num_layers - 1:
            # Final states alone (a character encoder): the backward direction's, after a row's
            # first token, is its reversed run's output at the row's last step; no reversal back.
            finals = [ahead.gather(1, last)[:, 0], reversed_back.gather(1, last)[:, 0]]
            return None, torch.cat(finals, -1)
        back = reverse_within(reversed_back, lengths)
        x = torch.cat([ahead, back], -1)
    return x, torch.cat([ahead.gather(1, last)[:, 0], back[:, 0]], -1)


def _packed(lstm: nn.LSTM, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """The packed module itself; rows of length 0 get zeros."""
    N, L = x.shape[:2]
    H2 = 2 * (lstm.proj_size or lstm.hidden_size)
    rows = torch.nonzero(lengths > 0).flatten()
    out, final = x.new_zeros(N, L, H2), x.new_zeros(N, H2)
    if rows.numel() == 0:
        return out, final
    packed = nn.utils.rnn.pack_padded_sequence(
        x.index_select(0, rows),
        lengths.index_select(0, rows).cpu(),
        batch_first=True,
        enforce_sorted=False,
    )
    packed_out, (h, _) = lstm(packed)
    padded, _ = nn.utils.rnn.pad_packed_sequence(packed_out, batch_first=True, total_length=L)
    return out.index_copy(0, rows, padded), final.index_copy(0, rows, torch.cat([h[-2], h[-1]], -1))


def bidirectional_lstm(
    lstm: nn.LSTM, x: Tensor, lengths: Tensor, *, outputs: bool = True
) -> tuple[Tensor | None, Tensor]:
    """A batch-first bidirectional ``lstm`` over rows of ``x`` as if packed by ``lengths``.

    Args:
        lstm: a batch-first bidirectional ``nn.LSTM`` (its weights, dropout and mode are used).
        x: ``(N, L, D)`` rows, each row's real positions first.
        lengths: ``(N,)`` int lengths, each in ``[0, L]``.
        outputs: return the outputs (``False``: only the final states, as a character encoder
            needs).

    Returns:
        ``(outputs, final)``: ``outputs`` ``(N, L, 2H)`` (the forward then the backward direction of
        the top layer; 0 past each length) or ``None``; ``final`` ``(N, 2H)``, the forward
        direction's state after each row's last token and the backward direction's after its first
        (the ``h_n`` of the packed module, directions concatenated; 0 for a row of length 0).
    """
    N, L = x.shape[:2]
    H2 = 2 * lstm.hidden_size
    if not _fused(lstm, x):
        out, final = _packed(lstm, x, lengths)
        return (out if outputs else None), final
    order = torch.argsort(lengths, stable=True)
    sorted_lengths = lengths.index_select(0, order)
    host = sorted_lengths.tolist()
    start = bisect.bisect_right(host, 0)  # rows of length 0 come first, and stay zeros
    pieces_out = [x.new_zeros(start, L, H2)] if outputs else []
    pieces_final = [x.new_zeros(start, H2)]
    step = 4 * lstm.hidden_size * (lstm.input_size + lstm.hidden_size)
    ends = [start + e for e in length_groups(host[start:], step)]
    for end in ends:
        n, longest = end - start, host[end - 1]
        rows, steps = grid(n), grid(longest)
        group = x.index_select(0, order[start:end])[:, : min(steps, L)]
        group = nn.functional.pad(group, (0, 0, 0, steps - group.shape[1], 0, rows - n))
        group_lengths = nn.functional.pad(sorted_lengths[start:end], (0, rows - n), value=1)
        group_out, group_final = _group(lstm, group, group_lengths, outputs)
        if group_out is not None:
            group_out = group_out[:n, : min(steps, L)]
            pieces_out.append(nn.functional.pad(group_out, (0, 0, 0, L - group_out.shape[1])))
        pieces_final.append(group_final[:n])
        start = end
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(N, device=order.device)
    final = torch.cat(pieces_final).index_select(0, inverse)
    if not outputs:
        return None, final
    out = torch.cat(pieces_out).index_select(0, inverse)
    valid = torch.arange(L, device=x.device)[None, :] < lengths[:, None]
    return out.masked_fill_(~valid[..., None], 0.0), final
