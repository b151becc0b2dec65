"""The simulated-world experiments: learning curves (HMM vs CRFs) and MEMM ceilings.

From *Sequence Labeling: From HMMs to Linear-Chain CRFs*: the table of "A generative–discriminative pair" (test
token accuracy of the HMM, the indicator CRF, the ±1-word CRF and the Bayes tagger as the training size
grows, in the well-specified and next-state worlds of :mod:`crfhead.theory.worlds`), "Decoding risk"
(the Bayes tagger decoded by posterior marginals and by Viterbi), and the table of "Local normalization
and label bias" (MEMMs with lookahead ``w`` against Corollary 2's lagged Bayes ceiling).

Estimators, as the seed fits them:

* **CRF** (:func:`fit_crf`): a :class:`~crfhead.encoders.WordWindowEncoder` (offsets ``(0,)`` is the
  indicator CRF, ``(-1, 0, 1)`` the "CRF, ±1 word") under a :class:`~crfhead.CRF`, fit in float64 by
  full-batch L-BFGS (:func:`fit_lbfgs`, strong Wolfe line search) to a gradient norm of ``1e-6`` on
  the mean conditional negative log-likelihood plus ``λ/2 ||θ||²`` with ``λ = 1/n``: MAP under a
  standard normal prior on every weight (Theorem 2: strictly convex, one optimum).
* **MEMM** (:func:`fit_memm`): the same window encoder under a :class:`~crfhead.MEMM`, the same prior,
  the local log-loss. "Two words to the left" plus lookahead ``w``: offsets ``(-2, ..., w)``.
* **HMM** (:func:`fit_hmm`): counting (Proposition 1), fixed length (no end state, no unknown-word
  pooling), add-α with α tuned by conditional log-loss on a validation draw from ``{1, 0.1, 0.01}``.

Learned taggers are decoded by Viterbi (except the posterior-decoded MEMMs); the Bayes tagger both
ways. Log-losses are the conditional log-loss of the *true* test tags under each model's chain, in nats
per token. "Expected" accuracies are ``mean_t γ_t(ẑ_t)`` under the true posterior ``γ`` (Theorem 4
(b)): the accuracy the decoder earns on average over the tags given the test words, with less
sampling noise than the realized accuracy.

Shapes: ``words`` and ``tags`` are ``(n, T)`` int64 (``B = n`` sequences of length ``T``).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
from torch import Tensor, nn

from crfhead.encoders.window import WordWindowEncoder
from crfhead.engine import marginals
from crfhead.heads.base import ChainHead
from crfhead.heads.crf import CRF
from crfhead.heads.hmm import HMM
from crfhead.heads.memm import MEMM
from crfhead.theory.worlds import World, conditional_log_loss, token_accuracy

__all__ = [
    "CRF_WINDOW_OFFSETS",
    "CRF_WORDS_OFFSETS",
    "Row",
    "crf_objective",
    "fit_crf",
    "fit_hmm",
    "fit_lbfgs",
    "fit_memm",
    "fit_window_head",
    "fit_window_model",
    "format_learning_curves",
    "format_memm_ceilings",
    "learning_curves",
    "memm_ceilings",
    "memm_objective",
    "memm_offsets",
    "objective",
]

Row = dict[str, Any]
"""One table row: string keys to ``str``, ``int`` or ``float`` values (JSON-able)."""
H = TypeVar("H", CRF, MEMM)

CRF_WORDS_OFFSETS: tuple[int, ...] = (0,)
"""The indicator CRF's window: the current word only (Theorem 3)."""

CRF_WINDOW_OFFSETS: tuple[int, ...] = (-1, 0, 1)
"""The "CRF, ±1 word" window."""

_TRAIN, _VAL, _TEST = 0, 1, 2  # generator streams of one seed


def memm_offsets(lookahead: int) -> tuple[int, ...]:
    """The seed's MEMM window: two words to the left, the current word, ``lookahead`` to the right."""
    if lookahead < 0:
        raise ValueError(f"lookahead must be >= 0, got {lookahead}")
    return tuple(range(-2, lookahead + 1))


def _generator(seed: int, stream: int) -> torch.Generator:
    return torch.Generator().manual_seed(1000 * seed + stream)


def _grad_norm(params: Sequence[Tensor]) -> float:
    total = 0.0
    for p in params:
        if p.grad is not None:
            total += float(p.grad.detach().pow(2).sum())
    return math.sqrt(total)


def fit_lbfgs(
    params: Sequence[Tensor],
    objective: Callable[[], Tensor],
    tol: float = 1e-6,
    max_iter: int = 500,
) -> int:
    """Minimise ``objective()`` over ``params`` by full-batch L-BFGS to a gradient 2-norm of ``tol``.

    ``torch.optim.LBFGS`` with the strong Wolfe line search and a history of 100 pairs (a short
    history does not reach the tolerance on the ±1-word CRF at the largest training size).
    Its own stopping rule reads the largest absolute gradient entry, so that threshold is scaled by the
    ratio of the largest entry to the 2-norm and the run resumed (history kept) until the Euclidean
    norm of the full gradient is at most ``tol``, ``max_iter`` iterations are spent, or a pass ends
    without lowering the loss (the objective's rounding floor). Use float64 parameters for tolerances
    near ``1e-6``.

    Args:
        params: leaf tensors with ``requires_grad`` (updated in place).
        objective: a closure returning the scalar loss at the current ``params``.
        tol: the target gradient 2-norm.
        max_iter: the largest number of L-BFGS iterations, all passes together.

    Returns:
        The number of L-BFGS iterations run (0 if the start is already stationary).

    Warns:
        RuntimeWarning: the gradient norm is still above ``tol`` at the end.
    """
    if not params:
        raise ValueError("fit_lbfgs needs at least one parameter")
    if tol <= 0 or max_iter < 1:
        raise ValueError(f"tol must be > 0 and max_iter >= 1, got {tol} and {max_iter}")
    opt = torch.optim.LBFGS(
        params,
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=tol,
        # A pass ends when the loss does not change at all (the float64 floor), never earlier.
        tolerance_change=math.ulp(0.0),
        history_size=100,
        line_search_fn="strong_wolfe",
    )

    def closure() -> Tensor:
        opt.zero_grad()
        loss = objective()
        loss.backward()  # type: ignore[no-untyped-call]
        return loss

    def evaluate() -> tuple[float, float]:
        """``(loss, gradient 2-norm)`` at the current parameters."""
        with torch.enable_grad():
            loss = float(closure().detach())
        return loss, _grad_norm(params)

    group = opt.param_groups[0]
    loss, norm = evaluate()
    done = 0
    while norm > tol and done < max_iter:
        # LBFGS stops on the largest entry: scale its threshold so that it stops near the 2-norm.
        largest = max(float(p.grad.abs().max()) for p in params if p.grad is not None)
        group["tolerance_grad"] = min(group["tolerance_grad"], largest * tol / norm)
        group["max_iter"] = max_iter - done
        group["max_eval"] = (max_iter - done) * 5 // 4 + 25
        opt.step(closure)  # type: ignore[no-untyped-call]
        n_iter = int(opt.state[params[0]].get("n_iter", 0))
        previous, progressed = loss, n_iter > done
        done = n_iter
        loss, norm = evaluate()
        if not progressed or not loss < previous:
            break  # no iteration, or no decrease: the tolerance is below what float64 resolves
    opt.zero_grad()
    if norm > tol:
        warnings.warn(
            f"L-BFGS stopped after {done} iterations at gradient norm {norm:.3g} > tol {tol:.3g}",
            RuntimeWarning,
            stacklevel=2,
        )
    return done


def _penalty(modules: Sequence[nn.Module], l2: float) -> Tensor:
    params = [p for m in modules for p in m.parameters()]
    return 0.5 * l2 * sum((p.pow(2).sum() for p in params), torch.zeros((), dtype=torch.float64))


def objective(
    encoder: WordWindowEncoder,
    head: ChainHead,
    words: Tensor,
    tags: Tensor,
    l2: float,
    mask: Tensor | None = None,
) -> Tensor:
    """The head's mean training loss per sequence plus ``l2/2 ||θ||²`` over every weight (a scalar).

    The CRF's loss is the conditional NLL, the MEMM's the local log-loss.

    Args:
        encoder: the window encoder (float64).
        head: the CRF or MEMM head (float64).
        words: ``(n, T)`` int64.
        tags: ``(n, T)`` int64.
        l2: ``λ``.
        mask: ``(n, T)`` bool for sentences of different lengths, or ``None`` (all of length ``T``).
    """
    if mask is None:
        loss = head.loss(encoder.emissions(words), tags, reduction="mean")
    else:
        loss = head.loss(encoder.emissions(words, mask), tags, mask, reduction="mean")
    return loss + _penalty((encoder, head), l2)


crf_objective = objective
memm_objective = objective


def _init(modules: Sequence[nn.Module], generator: torch.Generator | None) -> list[Tensor]:
    """Float64 parameters: zeros, or ``N(0, 1)`` draws from ``generator``."""
    params: list[Tensor] = []
    for m in modules:
        m.double()
        for p in m.parameters():
            with torch.no_grad():
                if generator is None:
                    p.zero_()
                else:
                    p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64))
            params.append(p)
    return params


def _check_data(words: Tensor, tags: Tensor) -> int:
    if words.dim() != 2 or words.shape != tags.shape:
        raise ValueError(
            f"words and tags must both be (n, T), got {tuple(words.shape)} and {tuple(tags.shape)}"
        )
    return int(words.shape[0])


def fit_window_head(
    head_class: type[H],
    words: Tensor,
    tags: Tensor,
    offsets: Sequence[int],
    num_tags: int,
    vocab_size: int,
    l2: float | None = None,
    *,
    tol: float = 1e-6,
    max_iter: int = 500,
    init: torch.Generator | None = None,
) -> tuple[WordWindowEncoder, H]:
    """Fit a window-feature CRF or MEMM by L-BFGS to the MAP of :func:`objective`.

    Args:
        head_class: :class:`~crfhead.heads.CRF` (:func:`fit_crf`) or :class:`~crfhead.heads.MEMM`
            (:func:`fit_memm`).
        words: ``(n, T)`` int64 word ids in ``[0, vocab_size)``.
        tags: ``(n, T)`` int64 gold tags in ``[0, num_tags)``.
        offsets: the encoder's window (``(0,)``: the indicator CRF; for the MEMM ``max(offsets)``
            is the lookahead, :func:`memm_offsets`).
        num_tags: ``K``.
        vocab_size: ``V``.
        l2: ``λ``; ``None`` is the seed's ``1/n`` (a standard normal prior on the mean objective).
        tol: gradient-norm target of :func:`fit_lbfgs`.
        max_iter: L-BFGS iteration cap.
        init: ``None`` starts at zero; a generator starts at ``N(0, 1)`` weights.

    Returns:
        ``(encoder, head)``, float64, in eval mode.
    """
    n = _check_data(words, tags)
    lam = 1.0 / n if l2 is None else float(l2)
    encoder = WordWindowEncoder(num_tags, vocab_size, offsets)
    head = head_class(num_tags)
    fit_window_model(encoder, head, words, tags, lam, tol=tol, max_iter=max_iter, init=init)
    return encoder, head


def fit_window_model(
    encoder: WordWindowEncoder,
    head: ChainHead,
    words: Tensor,
    tags: Tensor,
    l2: float,
    mask: Tensor | None = None,
    *,
    tol: float = 1e-6,
    max_iter: int = 500,
    init: torch.Generator | None = None,
) -> int:
    """Fit a built window encoder and head, in place, by L-BFGS to the MAP of :func:`objective`.

    The one fit of every window tagger of :mod:`crfhead.theory` and of the lab: the modules are made
    float64, started at zero (or ``N(0, 1)`` from ``init``), fit full-batch by :func:`fit_lbfgs` and
    left in eval mode. The head keeps what it was built with (labels, scheme constraints).

    Args:
        encoder: a :class:`~crfhead.encoders.WordWindowEncoder`.
        head: a CRF or MEMM head over the encoder's tags.
        words: ``(n, T)`` int64 word ids.
        tags: ``(n, T)`` int64 gold tags (any value where masked).
        l2: ``λ``.
        mask: ``(n, T)`` bool, or ``None``: every sentence of length ``T``.
        tol: gradient-norm target of :func:`fit_lbfgs`.
        max_iter: L-BFGS iteration cap.
        init: ``None`` starts at zero; a generator starts at ``N(0, 1)`` weights.

    Returns:
        The number of L-BFGS iterations run.
    """
    params = _init((encoder, head), init)
    iterations = fit_lbfgs(
        params, lambda: objective(encoder, head, words, tags, l2, mask), tol, max_iter
    )
    encoder.eval()
    head.eval()
    return iterations


fit_crf = functools.partial(fit_window_head, CRF)
""":func:`fit_window_head` for the CRF."""
fit_memm = functools.partial(fit_window_head, MEMM)
""":func:`fit_window_head` for the MEMM."""


def fit_hmm(
    train_words: Tensor,
    train_tags: Tensor,
    val_words: Tensor,
    val_tags: Tensor,
    num_tags: int,
    vocab_size: int,
    alphas: Sequence[float] = (1.0, 0.1, 0.01),
) -> HMM:
    """Count a fixed-length HMM on the training draw and tune add-α on the validation draw.

    Args:
        train_words: ``(n, T)`` int64.
        train_tags: ``(n, T)`` int64.
        val_words: ``(m, T)`` int64.
        val_tags: ``(m, T)`` int64.
        num_tags: ``K``.
        vocab_size: ``V``.
        alphas: the grid searched by conditional log-loss on the validation draw.

    Returns:
        The fitted :class:`~crfhead.HMM` (no end state, no unknown-word pooling, no padding id; float64
        counts) with ``alpha`` set to the chosen value.
    """
    _check_data(train_words, train_tags)
    _check_data(val_words, val_tags)
    hmm = HMM(
        num_tags,
        vocab_size,
        alphas=alphas,
        end_state=False,
        unknown_singletons=False,
        padding_index=None,
    )
    hmm.fit(train_words, train_tags)
    hmm.tune_alpha(val_words, val_tags)
    return hmm.eval()


def _expected_accuracy(gamma: Tensor, pred: Tensor) -> float:
    """``mean_{b,t} γ[b, t, pred[b, t]]`` for ``gamma`` ``(n, T, K)`` and ``pred`` ``(n, T)``."""
    return float(gamma.gather(2, pred.unsqueeze(-1)).mean())


def learning_curves(
    world: World,
    ns: Sequence[int] = (10, 30, 100, 300, 1000),
    test_n: int = 2000,
    seed: int = 0,
    val_n: int | None = None,
    *,
    tol: float = 1e-6,
    max_iter: int = 500,
) -> list[Row]:
    """Table 1 of the seed: HMM, indicator CRF, ±1-word CRF and the Bayes tagger at each ``n``.

    Training sets are nested prefixes of one draw of ``max(ns)`` sequences; the HMM's validation set is
    the first ``val_n`` (default: ``n``) sequences of a second, independent draw; the test set is a
    third draw of ``test_n`` (all three from generators seeded by ``seed``).

    Args:
        world: a :class:`~crfhead.theory.worlds.World`.
        ns: the training sizes.
        test_n: the number of test sequences.
        seed: seeds the three draws.
        val_n: the HMM's validation size (``None``: the training size).
        tol: L-BFGS gradient-norm target of the CRFs.
        max_iter: L-BFGS iteration cap.

    Returns:
        One row per ``n``: ``world``, ``n``, ``test_n``, ``seed``, ``alpha`` (the HMM's), token
        accuracies ``acc_hmm``, ``acc_crf_words``, ``acc_crf_window`` (Viterbi), ``acc_bayes``
        (posterior decoding), ``acc_bayes_viterbi``; their expected counterparts ``exp_*`` under the
        true posterior; conditional log-losses ``loss_hmm``, ``loss_crf_words``, ``loss_crf_window``,
        ``loss_bayes`` (nats per token of the true test tags).
    """
    if not ns or min(ns) < 1:
        raise ValueError(f"ns must be positive sizes, got {tuple(ns)}")
    K, V = world.num_states, world.vocab_size
    pool_words, pool_tags = world.sample(max(ns), _generator(seed, _TRAIN))
    val_pool_words, val_pool_tags = world.sample(
        max(ns) if val_n is None else val_n, _generator(seed, _VAL)
    )
    test_words, test_tags = world.sample(test_n, _generator(seed, _TEST))
    bayes = world.bayes_potentials(test_words)
    gamma = marginals(bayes)
    bayes_post = world.bayes_decode(test_words, "posterior")
    bayes_vit = world.bayes_decode(test_words, "viterbi")
    rows: list[Row] = []
    with torch.no_grad():
        loss_bayes = conditional_log_loss(bayes, test_tags)
    for n in ns:
        words, tags = pool_words[:n], pool_tags[:n]
        m = n if val_n is None else val_n
        hmm = fit_hmm(words, tags, val_pool_words[:m], val_pool_tags[:m], K, V)
        row: Row = {"world": world.name, "n": n, "test_n": test_n, "seed": seed}
        row["alpha"] = float(hmm.alpha)
        with torch.no_grad():
            em = hmm.emit(test_words)
            loss = conditional_log_loss(hmm.potentials(em), test_tags)
            decoded = {"hmm": (hmm.decode(em), loss)}
        for name, offsets in (("crf_words", CRF_WORDS_OFFSETS), ("crf_window", CRF_WINDOW_OFFSETS)):
            enc, crf = fit_crf(words, tags, offsets, K, V, tol=tol, max_iter=max_iter)
            with torch.no_grad():
                em = enc.emissions(test_words)
                loss = conditional_log_loss(crf.potentials(em), test_tags)
                decoded[name] = (crf.decode(em), loss)
        for name, (pred, loss) in decoded.items():
            row[f"acc_{name}"] = token_accuracy(pred, test_tags)
            row[f"exp_{name}"] = _expected_accuracy(gamma, pred)
            row[f"loss_{name}"] = loss
        row["acc_bayes"] = token_accuracy(bayes_post, test_tags)
        row["acc_bayes_viterbi"] = token_accuracy(bayes_vit, test_tags)
        row["exp_bayes"] = _expected_accuracy(gamma, bayes_post)
        row["exp_bayes_viterbi"] = _expected_accuracy(gamma, bayes_vit)
        row["loss_bayes"] = loss_bayes
        rows.append(row)
    return rows


def memm_ceilings(
    world: World,
    n: int = 1000,
    lookaheads: Sequence[int] = (0, 1),
    test_n: int = 2000,
    seed: int = 0,
    *,
    tol: float = 1e-6,
    max_iter: int = 500,
) -> list[Row]:
    """Table 2 of the seed: MEMMs with lookahead ``w`` against Corollary 2's lagged Bayes ceiling.

    Each MEMM reads :func:`memm_offsets` ``(w)`` (two words to the left, lookahead ``w``) and is fit on
    ``n`` sequences drawn from the training stream of ``seed`` (the very training set of
    :func:`learning_curves` at ``n = max(ns)``); the test set is :func:`learning_curves`' test set.

    Args:
        world: a :class:`~crfhead.theory.worlds.World`.
        n: training sequences.
        lookaheads: the ``w`` values.
        test_n: test sequences.
        seed: seeds the draws.
        tol: L-BFGS gradient-norm target.
        max_iter: L-BFGS iteration cap.

    Returns:
        One row per ``w``: ``world``, ``lookahead``, ``n``, ``test_n``, ``seed``, ``ceiling`` (accuracy
        of the lagged Bayes rule ``argmax_k p(z_t = k | x_{1:t+w})``), ``memm_posterior``,
        ``memm_viterbi`` (test token accuracies), ``bayes`` (the full posterior-decoded Bayes
        tagger's), and the expected accuracies under the true posterior ``exp_ceiling``,
        ``exp_memm_posterior``, ``exp_memm_viterbi``, ``exp_bayes``.
    """
    K, V = world.num_states, world.vocab_size
    words, tags = world.sample(n, _generator(seed, _TRAIN))
    test_words, test_tags = world.sample(test_n, _generator(seed, _TEST))
    gamma = marginals(world.bayes_potentials(test_words))
    bayes = world.bayes_decode(test_words, "posterior")
    rows: list[Row] = []
    for w in lookaheads:
        enc, memm = fit_memm(words, tags, memm_offsets(w), K, V, tol=tol, max_iter=max_iter)
        with torch.no_grad():
            em = enc.emissions(test_words)
            post = memm.posterior_decode(em)
            vit = memm.decode(em)
        ceiling = world.lagged_decode(test_words, w)
        row: Row = {"world": world.name, "lookahead": w, "n": n, "test_n": test_n, "seed": seed}
        for name, pred in (
            ("ceiling", ceiling),
            ("memm_posterior", post),
            ("memm_viterbi", vit),
            ("bayes", bayes),
        ):
            row[name] = token_accuracy(pred, test_tags)
            row[f"exp_{name}"] = _expected_accuracy(gamma, pred)
        rows.append(row)
    return rows


def _world_label(name: str) -> str:
    return name.replace("_", "-")


def _markdown(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines)


def format_learning_curves(rows: Sequence[Row], metric: str = "acc", digits: int = 3) -> str:
    """The learning-curve rows as a markdown table, one line per ``(world, n)``.

    Args:
        rows: from :func:`learning_curves`.
        metric: ``"acc"`` (test token accuracy, Bayes decoded both ways), ``"exp"`` (expected accuracy
            under the true posterior) or ``"loss"`` (conditional log-loss, nats per token).
        digits: decimals printed.
    """
    if metric not in ("acc", "exp", "loss"):
        raise ValueError(f"metric must be 'acc', 'exp' or 'loss', got {metric!r}")
    header = ["world, n", "HMM", "CRF, words", "CRF, ±1 word", "Bayes"]
    keys = ["hmm", "crf_words", "crf_window", "bayes"]
    if metric != "loss":
        header.append("Bayes, Viterbi")
        keys.append("bayes_viterbi")
    header.append("HMM α")  # noqa: RUF001
    body = []
    for r in rows:
        cells = [f"{_world_label(r['world'])}, {r['n']}"]
        cells += [f"{r[f'{metric}_{k}']:.{digits}f}" for k in keys]
        cells.append(f"{r['alpha']:g}")
        body.append(cells)
    return _markdown(header, body)


def format_memm_ceilings(rows: Sequence[Row], digits: int = 3, expected: bool = False) -> str:
    """The MEMM rows as a markdown table, one line per ``(world, lookahead)``.

    Args:
        rows: from :func:`memm_ceilings`.
        digits: decimals printed.
        expected: print the expected accuracies under the true posterior instead of the realized ones.
    """
    pre = "exp_" if expected else ""
    header = ["world, lookahead", "ceiling", "MEMM, posterior", "MEMM, Viterbi", "Bayes"]
    keys = ["ceiling", "memm_posterior", "memm_viterbi", "bayes"]
    body = [
        [f"{_world_label(r['world'])}, {r['lookahead']}"]
        + [f"{r[pre + k]:.{digits}f}" for k in keys]
        for r in rows
    ]
    return _markdown(header, body)
