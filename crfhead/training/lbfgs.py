"""Full-batch L-BFGS on one flat parameter vector, with a strong Wolfe line search.

For objectives whose every evaluation is a pass over the whole training set (the indicator CRF of
Lafferty et al. 2001 trained as CRFsuite does): the optimiser's own work per iteration should be a
few vector operations, not a loop over parameter tensors. :class:`FlatParameters` makes the
parameters of a model views of one flat tensor and their gradients views of another, so an
evaluation writes the point with one copy and reads the gradient with none; :func:`minimize` runs

* the two-loop recursion for the direction ``-H g`` with the last ``history`` pairs ``(s, y)`` and the
  initial scaling ``gamma = s'y / y'y`` (Nocedal and Wright, *Numerical Optimization*, 2nd ed. 2006,
  Algorithm 7.4 and eq. 7.20); a pair with ``s'y <= 1e-10`` is skipped (the update would not stay
  positive definite);
* the line search of their Algorithms 3.5 and 3.6: steps grow by safeguarded cubic extrapolation
  until one satisfies the strong Wolfe conditions (``c1 = 1e-4``, ``c2 = 0.9``) or brackets such a
  step, which a zoom by safeguarded cubic interpolation then finds. The first iteration's step is
  ``min(1, 1 / |g|_1)``, later ones 1;
* the stopping rules of ``torch.optim.LBFGS``: the largest gradient entry at most
  ``tolerance_grad``, a step or a change of the objective below ``tolerance_change``, ``max_iter``
  iterations or ``max_eval`` evaluations.

A non-finite objective or gradient at the start is an error naming it; during a line search such a
point counts as too long a step (the zoom shrinks it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["FlatParameters", "LBFGSResult", "minimize"]

Objective = Callable[[Tensor], tuple[float, Tensor]]
"""``f(x) -> (value, gradient)`` at a flat point ``x`` ``(N,)``; the gradient may be reused storage
(the optimiser copies what it keeps)."""


@dataclass(frozen=True)
class LBFGSResult:
    """What :func:`minimize` ended with.

    Attributes:
        x: the final point ``(N,)`` (the best evaluated one: the last accepted step).
        value: the objective there.
        iterations: directions taken (line searches run).
        evaluations: objective evaluations, the first included.
        reason: why it stopped.
    """

    x: Tensor
    value: float
    iterations: int
    evaluations: int
    reason: str


class FlatParameters:
    """Parameters as views of one flat tensor ``x`` ``(N,)`` and their gradients as views of ``g``.

    Args:
        params: leaf tensors requiring gradients, one dtype and device (their values are kept).

    After construction each parameter's ``.data`` and ``.grad`` are views into :attr:`x` and
    :attr:`g`: writing ``x`` moves the model, and a backward accumulates into ``g``.
    """

    def __init__(self, params: Iterable[Tensor]) -> None:
        self.params = [p for p in params]
        if not self.params:
            raise ValueError("FlatParameters needs at least one parameter")
        kinds = {(p.dtype, p.device) for p in self.params}
        if len(kinds) != 1:
            raise ValueError(
                f"the parameters must share one dtype and device, got {sorted(map(str, kinds))}"
            )
        if not all(p.requires_grad and p.is_leaf for p in self.params):
            raise ValueError("every parameter must be a leaf tensor with requires_grad=True")
        self.x = torch.cat([p.detach().reshape(-1) for p in self.params])
        self.g = torch.zeros_like(self.x)
        offset = 0
        for p in self.params:
            n = p.numel()
            p.data = self.x[offset : offset + n].view_as(p)
            p.grad = self.g[offset : offset + n].view_as(p)
            offset += n

    def load(self, x: Tensor) -> None:
        """Write the point ``x`` ``(N,)`` into the parameters."""
        self.x.copy_(x)

    def objective(self, loss: Callable[[], Tensor], l2: float = 0.0) -> Objective:
        """``f(x)``: ``x`` written into the parameters, ``loss()`` and its backward, ``(value, g)``.

        ``l2``: adds ``l2 * |x|^2`` to the value and ``2 l2 x`` to the gradient outside autograd
        (CRFsuite's ``c2`` penalty on every weight).
        """

        def f(x: Tensor) -> tuple[float, Tensor]:
            if x is not self.x:
                self.x.copy_(x)
            self.g.zero_()
            with torch.enable_grad():
                value = loss()
                value.backward()  # type: ignore[no-untyped-call]
            total = float(value.detach())
            if l2:
                total += l2 * float(self.x.dot(self.x))
                self.g.add_(self.x, alpha=2 * l2)
            return total, self.g

        return f


def _cubic(
    t1: float, f1: float, g1: float, t2: float, f2: float, g2: float, lo: float, hi: float
) -> float:
    """The minimiser of the cubic through two points with slopes, clamped to ``[lo, hi]``.

    Nocedal and Wright eq. 3.59; the midpoint of the bounds where the cubic has no minimiser.
    """
    if t1 == t2:
        return (lo + hi) / 2
    d1 = g1 + g2 - 3 * (f1 - f2) / (t1 - t2)
    square = d1 * d1 - g1 * g2
    if square < 0 or not math.isfinite(square):
        return (lo + hi) / 2
    d2 = math.copysign(math.sqrt(square), t2 - t1)
    denominator = g2 - g1 + 2 * d2
    if denominator == 0:
        return (lo + hi) / 2
    t = t2 - (t2 - t1) * (g2 + d2 - d1) / denominator
    return min(max(t, lo), hi) if math.isfinite(t) else (lo + hi) / 2


@dataclass
class _Point:
    t: float
    f: float
    gtd: float
    g: Tensor | None  # the gradient there (a copy), for the accepted point


def _line_search(
    phi: Callable[[float], tuple[float, float, Tensor]],
    f0: float,
    gtd0: float,
    t: float,
    step_size: float,
    *,
    c1: float,
    c2: float,
    max_ls: int,
    tolerance_change: float,
) -> tuple[_Point, int]:
    """A step satisfying the strong Wolfe conditions (Algorithms 3.5 and 3.6), or the best found.

    ``phi(t) -> (f, g'd, g)`` evaluates along the direction; ``step_size`` is the direction's largest
    entry (the zoom stops when the bracket moves the point by less than ``tolerance_change``).
    Returns the point and the number of evaluations.
    """

    def at(t: float) -> _Point:
        f, gtd, g = phi(t)
        if not (math.isfinite(f) and math.isfinite(gtd)):
            f, gtd = math.inf, math.inf  # too long a step
        return _Point(t, f, gtd, g.clone())

    def sufficient(p: _Point) -> bool:
        return p.f <= f0 + c1 * p.t * gtd0

    def curvature(p: _Point) -> bool:
        return abs(p.gtd) <= -c2 * gtd0

    prev = _Point(0.0, f0, gtd0, None)
    best: _Point | None = None
    evals = 0
    lo = hi = None
    while evals < max_ls:
        cur = at(t)
        evals += 1
        if not sufficient(cur) or (evals > 1 and cur.f >= prev.f):
            lo, hi = prev, cur
            break
        best = cur
        if curvature(cur):
            return cur, evals
        if cur.gtd >= 0:
            lo, hi = cur, prev
            break
        grown = _cubic(
            prev.t,
            prev.f,
            prev.gtd,
            cur.t,
            cur.f,
            cur.gtd,
            cur.t + 0.01 * (cur.t - prev.t),
            10 * cur.t,
        )
        prev, t = cur, grown
    if lo is None or hi is None:  # out of evaluations while extrapolating
        assert best is not None
        return best, evals
    # Zoom: lo satisfies sufficient decrease with the lowest value so far; the bracket holds a
    # strong Wolfe step.
    while evals < max_ls and abs(hi.t - lo.t) * step_size >= tolerance_change:
        a, b = min(lo.t, hi.t), max(lo.t, hi.t)
        width = b - a
        if math.isfinite(hi.f) and math.isfinite(hi.gtd):
            t = _cubic(lo.t, lo.f, lo.gtd, hi.t, hi.f, hi.gtd, a + 0.1 * width, b - 0.1 * width)
        else:
            t = (a + b) / 2
        cur = at(t)
        evals += 1
        if not sufficient(cur) or cur.f >= lo.f:
            hi = cur
        else:
            if curvature(cur):
                return cur, evals
            if cur.gtd * (hi.t - lo.t) >= 0:
                hi = lo
            lo = cur
    return lo, evals  # the lowest point (the start, with no gradient, if none was lower)


def minimize(
    f: Objective,
    x0: Tensor,
    *,
    history: int = 6,
    max_iter: int = 100,
    max_eval: int | None = None,
    tolerance_grad: float = 1e-7,
    tolerance_change: float = 1e-9,
    c1: float = 1e-4,
    c2: float = 0.9,
    max_ls: int = 25,
    point: Tensor | None = None,
) -> LBFGSResult:
    """Minimise ``f`` from ``x0`` ``(N,)`` by L-BFGS with a strong Wolfe line search (module docstring).

    Args:
        f: the objective, ``f(x) -> (value, gradient)``.
        x0: the start (not modified).
        history: the number of ``(s, y)`` pairs kept (CRFsuite's and ``torch.optim.LBFGS``'s ``m``).
        max_iter: the largest number of iterations.
        max_eval: the largest number of evaluations (default ``max_iter * 5 // 4``, as torch).
        tolerance_grad: stop when the largest absolute gradient entry is at most this.
        tolerance_change: stop when a step moves no entry, or changes the objective, by more.
        c1: the sufficient-decrease constant of the strong Wolfe conditions.
        c2: the curvature constant, ``0 < c1 < c2 < 1``.
        max_ls: the largest number of evaluations of one line search.
        point: where each trial point is written before ``f`` is called (``FlatParameters.x``, so
            that ``f`` need not copy it); a scratch tensor by default. It holds the last evaluated
            point afterwards, which need not be the result's ``x``.

    Raises:
        ValueError: bad arguments, or a non-finite objective or gradient at ``x0``.
    """
    if x0.dim() != 1 or not x0.is_floating_point():
        raise ValueError(
            f"x0 must be a flat floating-point tensor (N,), got {tuple(x0.shape)} {x0.dtype}"
        )
    if history < 1 or max_iter < 1 or max_ls < 1:
        raise ValueError(
            f"history, max_iter and max_ls must be >= 1, got {history}, {max_iter}, {max_ls}"
        )
    if not 0 < c1 < c2 < 1:
        raise ValueError(f"the Wolfe constants need 0 < c1 < c2 < 1, got c1={c1}, c2={c2}")
    max_eval = max_iter * 5 // 4 if max_eval is None else max_eval
    x = x0.detach().clone()
    value, grad = f(x)
    g = grad.detach().clone()
    if not (math.isfinite(value) and bool(torch.isfinite(g).all())):
        raise ValueError(
            f"the objective at the start is not finite: value {value}, gradient finite: {bool(torch.isfinite(g).all())}"
        )
    evals, it = 1, 0
    if float(g.abs().max()) <= tolerance_grad:
        return LBFGSResult(x, value, 0, evals, "gradient below tolerance_grad at the start")
    s_list: list[Tensor] = []
    y_list: list[Tensor] = []
    rho: list[float] = []
    reason = "max_iter reached"
    trial = torch.empty_like(x) if point is None else point
    if trial.shape != x.shape or trial.dtype != x.dtype:
        raise ValueError(f"point must be like x0, got {tuple(trial.shape)} {trial.dtype}")
    while it < max_iter:
        # The direction -H g by the two-loop recursion.
        q = g.neg()
        alphas: list[float] = []
        for s, y, r in zip(reversed(s_list), reversed(y_list), reversed(rho), strict=True):
            a = r * float(s.dot(q))
            alphas.append(a)
            q.add_(y, alpha=-a)
        if s_list:
            y = y_list[-1]
            q.mul_(float(s_list[-1].dot(y)) / float(y.dot(y)))
        for s, y, r, a in zip(s_list, y_list, rho, reversed(alphas), strict=True):
            b = r * float(y.dot(q))
            q.add_(s, alpha=a - b)
        d = q
        gtd = float(g.dot(d))
        if gtd > -tolerance_change:
            reason = "not a descent direction: the directional derivative is below tolerance_change"
            break
        t0 = min(1.0, 1.0 / float(g.abs().sum())) if it == 0 else 1.0

        def phi(t: float, d: Tensor = d) -> tuple[float, float, Tensor]:
            torch.add(x, d, alpha=t, out=trial)
            fv, gv = f(trial)
            return fv, float(gv.dot(d)), gv

        found, used = _line_search(
            phi,
            value,
            gtd,
            t0,
            float(d.abs().max()),
            c1=c1,
            c2=c2,
            max_ls=min(max_ls, max(max_eval - evals, 1)),
            tolerance_change=tolerance_change,
        )
        evals += used
        it += 1
        if found.g is None:  # nothing lowered the objective
            reason = "the line search found no lower value"
            break
        step = d.mul(found.t)
        x.add_(step)
        y_new = found.g - g
        sy = float(step.dot(y_new))
        if sy > 1e-10:
            if len(s_list) == history:
                s_list.pop(0)
                y_list.pop(0)
                rho.pop(0)
            s_list.append(step)
            y_list.append(y_new)
            rho.append(1.0 / sy)
        change = value - found.f
        value, g = found.f, found.g
        if float(g.abs().max()) <= tolerance_grad:
            reason = "gradient below tolerance_grad"
            break
        if float(step.abs().max()) <= tolerance_change:
            reason = "step below tolerance_change"
            break
        if abs(change) < tolerance_change:
            reason = "objective change below tolerance_change"
            break
        if evals >= max_eval:
            reason = "max_eval reached"
            break
    return LBFGSResult(x, value, it, evals, reason)
