"""The length-grouped bidirectional LSTM against the packed ``nn.LSTM`` it replaces on the CPU."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from crfhead.encoders.rnn import bidirectional_lstm, grid, length_groups, reverse_within


def _packed(lstm: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The oracle: the module on a packed sequence (outputs 0 past each length, final states).

    Rows of length 0 (which ``pack_padded_sequence`` refuses) get zeros.
    """
    rows = torch.nonzero(lengths > 0).flatten()
    packed = nn.utils.rnn.pack_padded_sequence(
        x[rows], lengths[rows], batch_first=True, enforce_sorted=False
    )
    out, (h, _) = lstm(packed)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    full = out.new_zeros(x.shape[0], x.shape[1], out.shape[2]).index_copy(0, rows, out)
    final = torch.cat([h[-2], h[-1]], -1)
    return full, final.new_zeros(x.shape[0], final.shape[1]).index_copy(0, rows, final)


def _grads(outputs: tuple[torch.Tensor, ...], inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    out, final = outputs
    loss = out.sin().sum() + final.cos().sum()
    return list(torch.autograd.grad(loss, inputs))


def _groups(lstm: nn.LSTM, lengths: torch.Tensor) -> int:
    """How many groups the rows of nonzero length run in."""
    step = 4 * lstm.hidden_size * (lstm.input_size + lstm.hidden_size)
    return len(length_groups(sorted(v for v in lengths.tolist() if v), step))


@pytest.mark.parametrize(
    ("layers", "bias", "N", "L", "groups"),
    [
        (1, True, 1, 1, 1),
        (1, True, 9, 7, 1),
        (2, True, 60, 40, 3),
        (1, False, 50, 30, 2),
        (3, True, 6, 5, 1),
    ],
)
def test_float64_equals_the_packed_module_with_gradients(
    layers: int, bias: bool, N: int, L: int, groups: int
) -> None:
    torch.manual_seed(N + L)
    lstm = nn.LSTM(16, 48, num_layers=layers, bias=bias, batch_first=True, bidirectional=True)
    lstm = lstm.double()
    x = torch.randn(N, L, 16, dtype=torch.float64, requires_grad=True)
    lengths = torch.randint(0 if N > 2 else 1, L + 1, (N,))  # rows of length 0 among them
    lengths[0] = L
    assert _groups(lstm, lengths) >= groups  # the grouping is exercised, not one call
    ours = bidirectional_lstm(lstm, x, lengths)
    assert ours[0] is not None
    oracle = _packed(lstm, x, lengths)
    torch.testing.assert_close(ours[0], oracle[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(ours[1], oracle[1], rtol=0, atol=1e-12)
    inputs = [x, *lstm.parameters()]
    for a, b in zip(_grads((ours[0], ours[1]), inputs), _grads(oracle, inputs), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert bool((ours[0][torch.arange(L)[None, :] >= lengths[:, None]] == 0).all())


def test_float32_fused_path_matches_and_final_states_alone() -> None:
    torch.manual_seed(0)
    lstm = nn.LSTM(16, 48, batch_first=True, bidirectional=True)
    x = torch.randn(300, 24, 16)
    lengths = torch.randint(0, 25, (300,))  # rows of length 0 and several groups
    assert int((lengths == 0).sum()) > 0 and _groups(lstm, lengths) >= 3
    out, final = bidirectional_lstm(lstm, x, lengths)
    oracle_out, oracle_final = _packed(lstm, x, lengths)
    assert out is not None
    torch.testing.assert_close(out, oracle_out, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(final, oracle_final, rtol=1e-5, atol=1e-6)
    none, alone = bidirectional_lstm(lstm, x, lengths, outputs=False)
    assert none is None
    torch.testing.assert_close(alone, final, rtol=0, atol=0)


@pytest.mark.parametrize("layers", [1, 2])
def test_final_states_alone_equal_the_packed_module_with_gradients(layers: int) -> None:
    """``outputs=False`` (a character encoder) skips the top layer's outputs, not its exactness."""
    torch.manual_seed(layers)
    lstm = nn.LSTM(16, 48, num_layers=layers, batch_first=True, bidirectional=True).double()
    x = torch.randn(300, 24, 16, dtype=torch.float64, requires_grad=True)
    lengths = torch.randint(0, 25, (300,))  # rows of length 0 and several groups
    assert int((lengths == 0).sum()) > 0 and _groups(lstm, lengths) >= 3
    none, final = bidirectional_lstm(lstm, x, lengths, outputs=False)
    assert none is None
    oracle = _packed(lstm, x, lengths)[1]
    torch.testing.assert_close(final, oracle, rtol=0, atol=1e-12)
    inputs = [x, *lstm.parameters()]
    ours = torch.autograd.grad(final.cos().sum(), inputs)
    theirs = torch.autograd.grad(oracle.cos().sum(), inputs)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_eval_and_train_modes_and_dropout_between_layers() -> None:
    torch.manual_seed(1)
    lstm = nn.LSTM(4, 3, num_layers=2, dropout=0.5, batch_first=True, bidirectional=True)
    x, lengths = torch.randn(8, 6, 4), torch.randint(1, 7, (8,))
    lstm.eval()
    first = bidirectional_lstm(lstm, x, lengths)[1]
    torch.testing.assert_close(first, _packed(lstm, x, lengths)[1], rtol=1e-5, atol=1e-6)
    assert torch.equal(first, bidirectional_lstm(lstm, x, lengths)[1])  # no dropout in eval
    lstm.train()
    a, b = bidirectional_lstm(lstm, x, lengths)[1], bidirectional_lstm(lstm, x, lengths)[1]
    assert not torch.equal(a, b)  # dropout between the layers draws a new mask


def test_empty_batch_rows_of_length_zero_and_packed_fallback_for_projections() -> None:
    lstm = nn.LSTM(4, 3, batch_first=True, bidirectional=True)
    out, final = bidirectional_lstm(lstm, torch.zeros(0, 5, 4), torch.zeros(0, dtype=torch.long))
    assert out is not None and out.shape == (0, 5, 6) and final.shape == (0, 6)
    out, final = bidirectional_lstm(lstm, torch.randn(3, 5, 4), torch.zeros(3, dtype=torch.long))
    assert out is not None and not out.any() and not final.any()
    proj = nn.LSTM(4, 3, proj_size=2, batch_first=True, bidirectional=True)
    x, lengths = torch.randn(5, 4, 4), torch.tensor([4, 1, 0, 2, 4])
    out, final = bidirectional_lstm(proj, x, lengths)
    oracle = _packed(proj, x, lengths)
    assert out is not None
    torch.testing.assert_close(out, oracle[0])
    torch.testing.assert_close(final, oracle[1])


def test_reverse_within_is_an_involution_that_leaves_padding() -> None:
    x = torch.arange(12.0).reshape(2, 6, 1)
    lengths = torch.tensor([4, 6])
    r = reverse_within(x, lengths)
    assert r[0, :, 0].tolist() == [3.0, 2.0, 1.0, 0.0, 4.0, 5.0]
    assert r[1, :, 0].tolist() == [11.0, 10.0, 9.0, 8.0, 7.0, 6.0]
    assert torch.equal(reverse_within(r, lengths), x)
    wide = torch.randn(3, 5, 4, requires_grad=True)  # vectors move whole; the gradient goes back
    short = torch.tensor([5, 2, 1])
    out = reverse_within(wide, short)
    assert torch.equal(out[1, :2], wide[1, :2].flip(0)) and torch.equal(out[1, 2:], wide[1, 2:])
    weights = torch.randn(3, 5, 4)
    (grad,) = torch.autograd.grad((out * weights).sum(), wide)
    assert torch.equal(grad, reverse_within(weights, short))


def _brute_cost(lengths: list[int], ends: list[int], penalty: int) -> int:
    starts = [0, *ends[:-1]]
    return sum(
        grid(e - s) * grid(lengths[e - 1]) + penalty for s, e in zip(starts, ends, strict=True)
    )


@pytest.mark.parametrize("step_cost", [5_500, 280_000])
def test_length_groups_is_the_cheapest_grouping(step_cost: int) -> None:
    """Against every way to cut a small sorted list between distinct lengths."""
    penalty = 64 + 10**6 // step_cost
    gen = torch.Generator().manual_seed(step_cost)
    for _ in range(30):
        n = int(torch.randint(1, 12, (1,), generator=gen))
        lengths = sorted(torch.randint(1, 400, (n,), generator=gen).tolist())
        ends = length_groups(lengths, step_cost)
        assert ends[-1] == n and ends == sorted(set(ends))
        assert all(lengths[e - 1] != lengths[e] for e in ends[:-1])  # cuts between distinct lengths
        candidates = [i for i in range(1, n) if lengths[i - 1] != lengths[i]]
        best = min(
            _brute_cost(lengths, [*cut, n], penalty)
            for r in range(len(candidates) + 1)
            for cut in itertools.combinations(candidates, r)
        )
        assert _brute_cost(lengths, ends, penalty) == best
    assert length_groups([], 10) == []


def test_grid_rounds_up_to_four_steps_an_octave() -> None:
    assert [grid(v) for v in (1, 8, 9, 10, 11, 16, 17, 21, 33, 100, 1000)] == [
        1, 8, 10, 10, 12, 16, 20, 24, 40, 112, 1024,
    ]  # fmt: skip
    for v in range(1, 5000):
        g = grid(v)
        assert v <= g <= max(v, 1.25 * v + 1) and grid(g) == g


def test_length_groups_coarsens_many_distinct_lengths() -> None:
    lengths = list(range(1, 1001))
    ends = length_groups(lengths, 5_500)
    assert ends[-1] == 1000 and 1 < len(ends) <= 64


def test_cpu_autocast_runs_the_packed_module() -> None:
    torch.manual_seed(3)
    lstm = nn.LSTM(4, 3, batch_first=True, bidirectional=True)
    x, lengths = torch.randn(5, 6, 4), torch.tensor([6, 1, 0, 3, 6])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, final = bidirectional_lstm(lstm, x, lengths)
        oracle = _packed(lstm, x, lengths)
    assert out is not None
    torch.testing.assert_close(out, oracle[0])
    torch.testing.assert_close(final, oracle[1])
