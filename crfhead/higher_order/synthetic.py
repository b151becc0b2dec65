"""Synthetic 2D-grid and 3-wise CRFs with planted labellings, and the anytime comparison of the decoders.

Qian & Liu (TACL 2014, "Sentence Dependency Tagging", Table 3 and Figures 2 and 4) decode 2D-grid CRFs
(Qu & Liu 2012: one vertex per sentence pair of a forum thread, 4-connected) and 3-wise CRFs (the grid
plus order-3 factors on adjacent edge pairs) by 2-slave and naive dual decomposition, and plot F, the
dual objective and the fraction of optimality certificates against decoding time. Their QA corpus is
not public; this module builds the two models on seeded synthetic data instead.

The generator (:class:`SyntheticSpec`, defaults in brackets). A grid has ``B`` rows [16] of ``T``
columns [16] over ``K`` labels [2]; label 0 is the background (the seed's "no dependency").

* The planted labelling ``gold`` ``(B, T)``: background, with ``blocks`` [10] rectangles drawn one after
  another (height uniform in ``1..block_height`` [4], width in ``1..block_width`` [4], position uniform,
  label uniform in ``1..K-1``; a later one overwrites), so that labels run along rows and down columns.
* Emissions ``(B, T, K)``: noisy evidence of ``gold``, ``signal`` [1.0] on the gold label plus
  ``N(0, 1)`` on every label.
* Rows are chains with shared transitions ``(K, K)`` ``horizontal · I`` [0.5] (agreement along a row).
* Vertical edges ``(b, t)``–``(b + 1, t)``, one ``K × K`` table each as size-2 patterns: an edge's
  evidence says whether ``gold`` agrees across it, wrong with probability ``flip`` [0.2]; where it
  says "agree", the table rewards the same label on both ends by ``vertical`` [1.0] (where it says
  "disagree", the edge has no factor). ``table_noise`` [0.0] adds ``N(0, table_noise)`` to all ``K²``
  entries of every edge (mixed signs: a frustrated, non-attractive model).
* 3-wise CRFs add order-3 factors over the collinear adjacent edge pairs: ``(b, t), (b, t+1),
  (b, t+2)`` along the rows and ``(b, t), (b+1, t), (b+2, t)`` down the columns (``triples``
  [both]); the evidence that all three ``gold`` labels agree is wrong with probability ``flip``, and
  where it says "agree" the factor rewards every uniform labelling ``(k, k, k)`` by ``triple`` [0.5];
  ``table_noise`` adds ``N(0, table_noise)`` to each of the ``K³`` entries with probability
  ``noise_density`` [0.3]. Only non-zero entries become size-3 patterns.

Every factor is noisy evidence of ``gold``, so a labelling that scores higher under the model tends
to be closer to ``gold``: better decoding gives better F, as in the seed's tagging task. The 3-wise
model of a seed is its grid model plus the triples (same ``gold``, emissions and edges).

:func:`anytime` decodes every instance by each dual decomposition at each iteration budget (a real
run per budget: the anytime curve is honest, each point's time its own), plus the chains alone
(``viterbi``) and the exact ILP, the reference. A :class:`Point` holds token F (:func:`f_score`: micro
F1 of the labels other than the background, pooled over the instances), the certified fraction, the
mean iterations and decode seconds, and the mean gap of the dual bound above the ILP optimum, per
instance. The naive decomposition is :mod:`~crfhead.higher_order.dd_factor`, one slave per pattern
(per table entry); the seed's naive DD on 2D grids had two spanning-tree slaves (rows, columns),
whose dual is the local polytope's, at least as tight as one slave per entry.
:func:`markdown_table` lays the points out as the seed's Table 3, :func:`plot_anytime` as its
Figures 2 and 4 (matplotlib, the ``plot`` extra, imported on use).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from crfhead.higher_order.decode import decode
from crfhead.higher_order.group import prepare
from crfhead.higher_order.patterns import Pattern

__all__ = [
    "BUDGETS",
    "DD_METHODS",
    "MODELS",
    "Comparison",
    "Instance",
    "Point",
    "SyntheticSpec",
    "anytime",
    "f_counts",
    "f_score",
    "grid_crf",
    "instances",
    "markdown_table",
    "plot_anytime",
    "threewise_crf",
]

BUDGETS = (1, 2, 5, 10, 20, 50, 100, 200, 500)
"""The iteration budgets of the anytime curves (each one a separate run)."""

DD_METHODS = ("dd2slave", "dd_factor")
"""The dual decompositions compared: the seed's 2-slave and the naive per-factor one."""

REFERENCES = ("ilp", "viterbi")
"""Decoded once per instance, first: the exact optimum (HiGHS, every gap's reference), the chains alone."""

_DIRECTIONS = ("rows", "columns")


@dataclass(frozen=True)
class SyntheticSpec:
    """The generator's parameters (see the module docstring for what each one does).

    Attributes:
        rows: ``B``, the grid's rows (chains).
        columns: ``T``, each row's length.
        labels: ``K``, label 0 the background.
        blocks: planted rectangles per grid.
        block_height: a rectangle's largest height (clipped to ``rows``).
        block_width: a rectangle's largest width (clipped to ``columns``).
        signal: the emission score added to the gold label (noise ``N(0, 1)`` on every label).
        horizontal: the transitions' diagonal (same label on consecutive tokens of a row).
        vertical: a vertical edge's reward for the same label on both ends, where its evidence
            says the gold labels agree.
        triple: an order-3 factor's reward for a uniform labelling, where its evidence says agree.
        flip: the probability that an edge's or a triple's agreement evidence is wrong.
        table_noise: the standard deviation of the noise added to every factor's entries.
        noise_density: the fraction of a triple's ``K³`` entries that get noise.
        triples: the directions of the order-3 factors: ``"rows"``, ``"columns"`` or both.
    """

    rows: int = 16
    columns: int = 16
    labels: int = 2
    blocks: int = 10
    block_height: int = 4
    block_width: int = 4
    signal: float = 1.0
    horizontal: float = 0.5
    vertical: float = 1.0
    triple: float = 0.5
    flip: float = 0.2
    table_noise: float = 0.0
    noise_density: float = 0.3
    triples: tuple[str, ...] = _DIRECTIONS

    def __post_init__(self) -> None:
        for name in ("rows", "columns", "block_height", "block_width"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.labels < 2:
            raise ValueError(f"labels must be >= 2 (a background and one more), got {self.labels}")
        if self.blocks < 0:
            raise ValueError(f"blocks must be >= 0, got {self.blocks}")
        for name in ("flip", "noise_density"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.table_noise < 0:
            raise ValueError(f"table_noise must be >= 0, got {self.table_noise}")
        if not set(self.triples) <= set(_DIRECTIONS):
            raise ValueError(f"triples must be among {_DIRECTIONS}, got {self.triples}")


@dataclass(frozen=True, eq=False)
class Instance:
    """One synthetic CRF: rows as chains plus patterns, with its planted labelling.

    Attributes:
        emissions: ``(B, T, K)`` float64.
        transitions: ``(K, K)`` float64 ``[from, to]``, shared by the rows (start and end: zeros).
        patterns: the non-local factors (size 2 vertical edges, size 3 triples).
        gold: ``(B, T)`` int64, the planted labelling.
    """

    emissions: Tensor
    transitions: Tensor
    patterns: tuple[Pattern, ...]
    gold: Tensor

    def score(self, tags: Tensor) -> float:
        """The model's score of a labelling ``tags`` ``(B, T)``: chains plus patterns."""
        group = prepare(self.emissions, self.transitions, None, None, None, self.patterns)
        return group.score(tags)


def _gold(rng: np.random.Generator, spec: SyntheticSpec) -> np.ndarray:
    B, T = spec.rows, spec.columns
    gold = np.zeros((B, T), dtype=np.int64)
    for _ in range(spec.blocks):
        height = int(rng.integers(1, min(spec.block_height, B) + 1))
        width = int(rng.integers(1, min(spec.block_width, T) + 1))
        b, t = int(rng.integers(0, B - height + 1)), int(rng.integers(0, T - width + 1))
        gold[b : b + height, t : t + width] = int(rng.integers(1, spec.labels))
    return gold


def _says_agree(
    rng: np.random.Generator, gold: np.ndarray, cells: Sequence[tuple[int, int]], flip: float
) -> bool:
    """The factor's evidence: whether the gold labels of ``cells`` agree, wrong with probability ``flip``."""
    agree = len({int(gold[c]) for c in cells}) == 1
    return agree != bool(rng.random() < flip)


def _table_patterns(cells: Sequence[tuple[int, int]], table: np.ndarray) -> list[Pattern]:
    """The non-zero entries of a ``(K,) * n`` table over ``cells`` as size-``n`` patterns."""
    return [
        Pattern(
            tuple((b, t, int(k)) for (b, t), k in zip(cells, ks, strict=True)), float(table[ks])
        )
        for ks in np.ndindex(*table.shape)
        if table[ks] != 0.0
    ]


def _grid(rng: np.random.Generator, spec: SyntheticSpec) -> tuple[Instance, np.ndarray]:
    B, T, K = spec.rows, spec.columns, spec.labels
    gold = _gold(rng, spec)
    emissions = spec.signal * np.eye(K)[gold] + rng.normal(size=(B, T, K))
    transitions = spec.horizontal * np.eye(K)
    patterns: list[Pattern] = []
    for b in range(B - 1):
        for t in range(T):
            cells = ((b, t), (b + 1, t))
            table = (
                spec.vertical * np.eye(K)
                if _says_agree(rng, gold, cells, spec.flip)
                else np.zeros((K, K))
            )
            if spec.table_noise > 0:
                table = table + rng.normal(scale=spec.table_noise, size=(K, K))
            patterns += _table_patterns(cells, table)
    instance = Instance(
        emissions=torch.from_numpy(emissions),
        transitions=torch.from_numpy(transitions),
        patterns=tuple(patterns),
        gold=torch.from_numpy(gold),
    )
    return instance, gold


def grid_crf(spec: SyntheticSpec, seed: int) -> Instance:
    """A 2D-grid CRF: rows as chains, vertical edges as size-2 patterns (module docstring)."""
    instance, _ = _grid(np.random.default_rng(seed), spec)
    return instance


def threewise_crf(spec: SyntheticSpec, seed: int) -> Instance:
    """A 3-wise CRF: :func:`grid_crf` of the same seed plus order-3 factors as size-3 patterns."""
    rng = np.random.default_rng(seed)
    grid, gold = _grid(rng, spec)
    B, T, K = spec.rows, spec.columns, spec.labels
    triples: list[tuple[tuple[int, int], ...]] = []
    if "rows" in spec.triples:
        triples += [((b, t), (b, t + 1), (b, t + 2)) for b in range(B) for t in range(T - 2)]
    if "columns" in spec.triples:
        triples += [((b, t), (b + 1, t), (b + 2, t)) for b in range(B - 2) for t in range(T)]
    uniform = np.zeros((K, K, K))
    uniform[np.arange(K), np.arange(K), np.arange(K)] = 1.0
    patterns = list(grid.patterns)
    for cells in triples:
        table = (
            spec.triple * uniform
            if _says_agree(rng, gold, cells, spec.flip)
            else np.zeros((K, K, K))
        )
        if spec.table_noise > 0:
            noisy = rng.random((K, K, K)) < spec.noise_density
            table = table + np.where(noisy, rng.normal(scale=spec.table_noise, size=(K, K, K)), 0.0)
        patterns += _table_patterns(cells, table)
    return Instance(grid.emissions, grid.transitions, tuple(patterns), grid.gold)


MODELS: dict[str, Callable[[SyntheticSpec, int], Instance]] = {
    "grid2d": grid_crf,
    "threewise": threewise_crf,
}
"""The seed's two models by name."""


def instances(
    model: str, count: int, spec: SyntheticSpec | None = None, seed: int = 0
) -> list[Instance]:
    """``count`` instances of ``model`` (a key of :data:`MODELS`), seeded ``seed, seed + 1, ...``."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {tuple(MODELS)}, got {model!r}")
    spec = SyntheticSpec() if spec is None else spec
    return [MODELS[model](spec, seed + i) for i in range(count)]


def f_counts(tags: Tensor, gold: Tensor) -> tuple[int, int, int]:
    """``(correct, predicted, gold)`` token counts of the labels other than the background (0).

    ``correct`` counts the tokens where ``tags`` ``(B, T)`` equals ``gold`` ``(B, T)`` on a label
    other than 0; ``predicted`` and ``gold`` the tokens each labels other than 0.
    """
    if tags.shape != gold.shape:
        raise ValueError(f"tags {tuple(tags.shape)} and gold {tuple(gold.shape)} differ in shape")
    tags, gold = tags.cpu(), gold.cpu()
    correct = int(((tags == gold) & (gold > 0)).sum())
    return correct, int((tags > 0).sum()), int((gold > 0).sum())


def f_score(counts: Iterable[tuple[int, int, int]]) -> float:
    """Micro F1 from pooled :func:`f_counts` (0 when nothing is predicted or gold)."""
    correct = predicted = gold = 0
    for c, p, g in counts:
        correct, predicted, gold = correct + c, predicted + p, gold + g
    return 2 * correct / (predicted + gold) if predicted + gold else 0.0


@dataclass(frozen=True)
class Point:
    """One method at one iteration budget, over every instance.

    Attributes:
        method: the decoder (``viterbi``, ``dd2slave``, ``dd_factor``, ``ilp``).
        budget: ``max_iterations`` of the run (1 for ``viterbi`` and ``ilp``).
        f: :func:`f_score` pooled over the instances.
        certified: the fraction of instances certified optimal.
        iterations: the mean iterations run (fewer than ``budget`` where a certificate stopped it).
        seconds: the mean decode seconds per instance.
        dual_gap: the mean of ``dual - optimum`` (the ILP's), per instance: 0 is a tight bound.
        primal_gap: the mean of ``optimum - primal``: 0 is as good a labelling as exact.
        primals: each instance's score of the decoded labelling.
        duals: each instance's bound.
    """

    method: str
    budget: int
    f: float
    certified: float
    iterations: float
    seconds: float
    dual_gap: float
    primal_gap: float
    primals: tuple[float, ...] = field(repr=False)
    duals: tuple[float, ...] = field(repr=False)


@dataclass(frozen=True)
class Comparison:
    """The anytime comparison on one model.

    Attributes:
        model: its name.
        optima: each instance's exact optimum (the ILP's score).
        points: the reference points and each dual decomposition at each budget.
    """

    model: str
    optima: tuple[float, ...]
    points: tuple[Point, ...]

    def curve(self, method: str) -> list[Point]:
        """``method``'s points by increasing budget."""
        return sorted((p for p in self.points if p.method == method), key=lambda p: p.budget)

    def point(self, method: str, budget: int = 1) -> Point:
        """``method``'s point at ``budget``.

        Raises:
            KeyError: when there is none.
        """
        for p in self.points:
            if p.method == method and p.budget == budget:
                return p
        raise KeyError(f"no point for {method!r} at budget {budget}")


def anytime(
    cases: Sequence[Instance],
    model: str = "",
    methods: Sequence[str] = DD_METHODS,
    budgets: Sequence[int] = BUDGETS,
    progress: Callable[[str], None] | None = None,
    maxflow: str = "auto",
) -> Comparison:
    """Decode every instance by ``viterbi``, ``ilp`` and each of ``methods`` at each of ``budgets``.

    Args:
        cases: the instances (:func:`instances`).
        model: a name for the comparison.
        methods: the iterative decoders (each run once per budget, from scratch).
        budgets: the iteration budgets (``max_iterations``), each >= 1.
        progress: called with a line after each method's budget is done.
        maxflow: the 2-slave's min-cut solver (see :func:`~crfhead.higher_order.decode.decode`).

    Each method first decodes the first instance once, untimed (its solver's imports).

    Raises:
        ValueError: no instances, or a budget below 1.
    """
    if not cases:
        raise ValueError("anytime needs at least one instance")
    if any(b < 1 for b in budgets):
        raise ValueError(f"budgets must be >= 1, got {tuple(budgets)}")
    runs = [(m, 1) for m in REFERENCES] + [(m, b) for m in methods for b in sorted(set(budgets))]
    optima: list[float] = []
    points: list[Point] = []
    first = cases[0]
    for method in dict.fromkeys(m for m, _ in runs):
        # Untimed: a method's first call imports (or builds) its solver: the max flow, HiGHS.
        decode(
            first.emissions,
            first.transitions,
            patterns=first.patterns,
            method=method,
            max_iterations=1,
            maxflow=maxflow,
        )
    for method, budget in runs:
        results = [
            decode(
                c.emissions,
                c.transitions,
                patterns=c.patterns,
                method=method,
                max_iterations=budget,
                maxflow=maxflow,
            )
            for c in cases
        ]
        if method == "ilp":
            optima = [r.primal for r in results]
        points.append(
            Point(
                method=method,
                budget=budget,
                f=f_score(f_counts(r.tags, c.gold) for r, c in zip(results, cases, strict=True)),
                certified=statistics.fmean(float(r.certified) for r in results),
                iterations=statistics.fmean(r.iterations for r in results),
                seconds=statistics.fmean(r.seconds for r in results),
                dual_gap=statistics.fmean(r.dual - o for r, o in zip(results, optima, strict=True)),
                primal_gap=statistics.fmean(
                    o - r.primal for r, o in zip(results, optima, strict=True)
                ),
                primals=tuple(r.primal for r in results),
                duals=tuple(r.dual for r in results),
            )
        )
        if progress is not None:
            p = points[-1]
            progress(
                f"{model} {method} budget {budget}: F {p.f:.3f}, certified {p.certified:.2f}, {p.seconds * 1e3:.1f} ms"
            )
    return Comparison(model=model, optima=tuple(optima), points=tuple(points))


_NAMES = {
    "viterbi": "rows alone (Viterbi)",
    "dd2slave": "2-slave DD",
    "dd_factor": "naive DD (per pattern)",
    "ilp": "ILP (HiGHS, exact)",
}


_TITLES = {"grid2d": "2D-grid CRFs", "threewise": "3-wise CRFs"}


def markdown_table(comparisons: Sequence[Comparison], budget: int) -> str:
    """The seed's Table 3: per model and method, F, certified fraction, iterations, decode time.

    The dual decompositions are shown at ``budget`` iterations; ``viterbi`` and ``ilp`` as run.
    """
    lines = [
        "| model | method | F | certified | mean iterations | ms / instance | dual - optimum | optimum - primal |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for comparison in comparisons:
        for method in (
            "viterbi",
            *sorted({p.method for p in comparison.points} - set(REFERENCES)),
            "ilp",
        ):
            p = comparison.point(method, 1 if method in REFERENCES else budget)
            lines.append(
                f"| {comparison.model} | {_NAMES.get(method, method)} | {p.f:.3f} | {p.certified:.2f} "
                f"| {p.iterations:.1f} | {p.seconds * 1e3:.1f} | {_rounded(p.dual_gap)} "
                f"| {_rounded(p.primal_gap)} |"
            )
    return "\n".join(lines)


def _rounded(value: float) -> str:
    """Three decimals, with no ``-0.000`` for a gap a rounding error below zero."""
    return f"{round(value, 3) + 0.0:.3f}"


_STYLE = {"dd2slave": ("o", "-", "tab:red"), "dd_factor": ("s", "--", "tab:blue")}
"""Method → (marker, line style, colour): the two curves stay apart in grey too."""


def plot_anytime(comparison: Comparison, path: str | Path, title: str | None = None) -> Path:
    """F, dual objective and certified fraction against decode time (the seed's Figures 2 and 4).

    Each dual decomposition is a line through its budgets (mean decode seconds per instance, log
    scale), each point labelled with its budget (unless every run stopped before the previous
    budget: the same runs again); the ILP is a star (and a dotted line at its value),
    the rows alone a cross. The dual panel shows the mean of ``dual - optimum`` per instance, on a
    symmetric-log scale.

    Raises:
        ModuleNotFoundError: without matplotlib (the ``plot`` extra), saying how to install it.
    """
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import LogLocator
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            "plotting needs matplotlib, which is not installed: pip install 'crfhead[plot]'",
            name="matplotlib",
        ) from error

    figure = Figure(figsize=(14, 4.2), layout="constrained")
    axes = figure.subplots(1, 3)
    panels = (
        ("f", "F (labels other than the background)"),
        ("dual_gap", "dual objective: mean dual - optimum"),
        ("certified", "fraction of optimality certificates"),
    )
    ilp, chains = comparison.point("ilp"), comparison.point("viterbi")
    for ax, (key, ylabel) in zip(axes, panels, strict=True):
        for method in sorted({p.method for p in comparison.points} - set(REFERENCES)):
            curve = comparison.curve(method)
            marker, line, colour = _STYLE.get(method, ("^", "-.", "tab:green"))
            xs, ys = [p.seconds for p in curve], [getattr(p, key) for p in curve]
            ax.plot(
                xs,
                ys,
                marker=marker,
                linestyle=line,
                color=colour,
                markersize=4,
                label=_NAMES.get(method, method),
            )
            for i, (p, x, y) in enumerate(zip(curve, xs, ys, strict=True)):
                if i and p.iterations == curve[i - 1].iterations:
                    continue  # every run had stopped before the smaller budget: the same runs
                ax.annotate(
                    str(p.budget),
                    (x, y),
                    textcoords="offset points",
                    xytext=(3, 3),
                    fontsize=6,
                    color=colour,
                )
        ax.axhline(getattr(ilp, key), color="black", linestyle=":", linewidth=1)
        for p, marker, size, colour in ((ilp, "*", 12, "black"), (chains, "x", 8, "grey")):
            ax.plot(
                [p.seconds],
                [getattr(p, key)],
                marker=marker,
                markersize=size,
                color=colour,
                linestyle="",
                label=_NAMES[p.method],
            )
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))  # labels that do not overlap
        if key == "dual_gap":
            ax.set_yscale("symlog", linthresh=0.1)
            # Gaps are >= 0; the headroom keeps the largest (the rows alone) off the frame.
            ax.set_ylim(0.0, 3 * max(0.1, *(p.dual_gap for p in comparison.points)))
        ax.set(xlabel="mean decode time per instance (s)", ylabel=ylabel, title=ylabel)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    n = len(comparison.optima)
    figure.suptitle(
        title
        or f"{_TITLES.get(comparison.model, comparison.model)}: {n} instances; "
        "one run per iteration budget (the small numbers)"
    )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    return out
