"""The flat L-BFGS (``crfhead.training.lbfgs``): exact minima of a quadratic and Rosenbrock's function,
the strong Wolfe conditions at each accepted step (short, long and non-finite first steps), the same
minimum as ``torch.optim.LBFGS`` on a CRF objective, the flat parameter views, and its errors."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import random_chain

from crfhead import CRF
from crfhead.training.lbfgs import FlatParameters, _line_search, minimize


def _quadratic(seed: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(n, n, generator=g, dtype=torch.float64)
    return m @ m.T + 0.1 * torch.eye(n, dtype=torch.float64), torch.randn(
        n, generator=g, dtype=torch.float64
    )


def test_quadratic_minimum() -> None:
    A, b = _quadratic(0, 20)

    def f(x: torch.Tensor) -> tuple[float, torch.Tensor]:
        return float(0.5 * x @ A @ x - b @ x), A @ x - b

    x0 = torch.zeros(20, dtype=torch.float64)
    res = minimize(f, x0, history=10, max_iter=500, tolerance_grad=1e-10, tolerance_change=0.0)
    # To float64's resolution of the objective (the line search stops there: cond(A) ~ 600).
    torch.testing.assert_close(res.x, torch.linalg.solve(A, b), rtol=1e-5, atol=1e-5)
    assert float((A @ res.x - b).abs().max()) < 1e-6
    assert res.iterations < 500
    assert bool((x0 == 0).all())  # the start is not modified


def test_rosenbrock_minimum() -> None:
    def f(x: torch.Tensor) -> tuple[float, torch.Tensor]:
        a, b = float(x[0]), float(x[1])
        value = (1 - a) ** 2 + 100 * (b - a * a) ** 2
        grad = torch.tensor(
            [-2 * (1 - a) - 400 * a * (b - a * a), 200 * (b - a * a)], dtype=x.dtype
        )
        return value, grad

    res = minimize(
        f, torch.tensor([-1.2, 1.0], dtype=torch.float64), max_iter=200, tolerance_grad=1e-9
    )
    torch.testing.assert_close(res.x, torch.ones(2, dtype=torch.float64), rtol=1e-6, atol=1e-6)
    assert res.iterations < 100


@pytest.mark.parametrize("t0", [1e-4, 1.0, 50.0])  # extrapolation, at once, and a zoom
def test_line_search_returns_a_strong_wolfe_step(t0: float) -> None:
    A, b = _quadratic(1, 5)
    x = torch.zeros(5, dtype=torch.float64)
    g0 = A @ x - b
    d = -g0

    def phi(t: float) -> tuple[float, float, torch.Tensor]:
        y = x + t * d
        g = A @ y - b
        return float(0.5 * y @ A @ y - b @ y), float(g @ d), g

    f0, gtd0 = phi(0.0)[:2]
    c1, c2 = 1e-4, 0.9
    point, used = _line_search(
        phi, f0, gtd0, t0, float(d.abs().max()), c1=c1, c2=c2, max_ls=25, tolerance_change=1e-12
    )
    assert used >= 1
    assert point.f <= f0 + c1 * point.t * gtd0
    assert abs(point.gtd) <= -c2 * gtd0


def test_a_non_finite_trial_point_is_a_step_too_long() -> None:
    # f = -log(1 - x^2) is finite only on (-1, 1): the first steps leave it.
    def f(x: torch.Tensor) -> tuple[float, torch.Tensor]:
        v = float(x[0])
        if abs(v) >= 1:
            return math.inf, torch.full_like(x, math.nan)
        return -math.log(1 - v * v) + 0.3 * v, torch.tensor(
            [2 * v / (1 - v * v) + 0.3], dtype=x.dtype
        )

    x0 = torch.tensor([0.9], dtype=torch.float64)
    res = minimize(f, x0, max_iter=50, tolerance_grad=1e-10, tolerance_change=0.0)
    want = (-1 + math.sqrt(1 + 0.09)) / 0.3  # the root of 2v / (1 - v^2) = -0.3 in (-1, 1)
    assert float(res.x[0]) == pytest.approx(-want, abs=1e-7)
    assert math.isfinite(res.value)


def test_the_same_minimum_as_torch_lbfgs_on_a_crf_objective() -> None:
    c = random_chain(3, 6, 7, 4, dtype=torch.float64)
    tags = torch.randint(0, 4, (6, 7), generator=torch.Generator().manual_seed(0))

    def fit(lean: bool) -> tuple[float, torch.Tensor]:
        torch.manual_seed(0)
        crf = CRF(4).double()
        em = c.emissions.clone().requires_grad_(True)
        params = [em, crf.transitions, crf.start_transitions, crf.end_transitions]

        def loss() -> torch.Tensor:
            value = crf.nll(em, tags, c.mask, reduction="sum")
            return value + 0.5 * sum((p * p).sum() for p in params)

        if lean:
            flat = FlatParameters(params)
            res = minimize(flat.objective(loss), flat.x, max_iter=200, tolerance_grad=1e-9)
            flat.load(res.x)
        else:
            opt = torch.optim.LBFGS(
                params, max_iter=200, tolerance_grad=1e-9, line_search_fn="strong_wolfe"
            )

            def closure() -> torch.Tensor:
                opt.zero_grad()
                value = loss()
                value.backward()
                return value

            opt.step(closure)
        with torch.no_grad():
            return float(loss()), crf.transitions.detach().clone()

    ours, theirs = fit(True), fit(False)
    assert ours[0] == pytest.approx(theirs[0], rel=1e-9)
    torch.testing.assert_close(ours[1], theirs[1], rtol=1e-5, atol=1e-6)


def test_flat_parameters_are_views_and_gradients_accumulate_into_one_tensor() -> None:
    a = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3))
    b = torch.nn.Parameter(torch.tensor([7.0, 8.0]))
    flat = FlatParameters([a, b])
    assert flat.x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 8.0]
    flat.load(torch.ones(8))
    assert a.tolist() == [[1.0] * 3] * 2 and b.tolist() == [1.0, 1.0]
    value, g = flat.objective(lambda: (a * a).sum() + 3 * b.sum())(torch.full((8,), 2.0))
    assert value == pytest.approx(6 * 4 + 3 * 4)
    assert g.tolist() == [4.0] * 6 + [3.0, 3.0]
    assert a.grad is not None and a.grad.data_ptr() == g.data_ptr()


def test_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="not finite"):
        minimize(lambda x: (math.nan, x.clone()), torch.zeros(3))
    with pytest.raises(ValueError, match="Wolfe"):
        minimize(lambda x: (0.0, x.clone()), torch.ones(3), c1=0.9, c2=0.1)
    with pytest.raises(ValueError, match="flat"):
        minimize(lambda x: (0.0, x.clone()), torch.ones(2, 2))
    with pytest.raises(ValueError, match="one dtype"):
        FlatParameters(
            [torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2).double())]
        )
    with pytest.raises(ValueError, match="leaf"):
        FlatParameters([torch.ones(2)])


def test_a_stationary_start_takes_no_iteration() -> None:
    res = minimize(lambda x: (float((x * x).sum()), 2 * x), torch.zeros(4))
    assert res.iterations == 0 and res.evaluations == 1
