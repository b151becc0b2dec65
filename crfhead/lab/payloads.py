"""The lab's data: one JSON-able payload per tab, each a deterministic function of the library.

The tabs of the laboratory of *Sequence Labeling: From HMMs to Linear-Chain CRFs* (and the higher-order decoder of Qian & Liu, TACL 2014);
``scripts/lab_payloads.py`` writes each payload to ``crfhead/lab/static/data/<tab>.json`` and
``tests/lab/test_payloads.py`` keeps the files equal to these functions. The keys of every payload
are documented in :data:`SCHEMA_NOTE` (and summarised in each function's docstring):

* :func:`trellis_payload` -- "Decoding risk": marginals and max-marginals of one well-specified draw,
  8 states x 24 positions (Theorem 4, :func:`crfhead.theory.payload.trellis_example`);
* :func:`learning_curves_payload` -- Table 1 (HMM, CRFs, Bayes; both worlds;
  :func:`crfhead.theory.experiments.learning_curves`);
* :func:`label_bias_payload` -- Proposition 2 on trained finance taggers
  (:mod:`crfhead.theory.label_bias`);
* :func:`perceptron_payload` -- Theorem 5's mistake bound (:mod:`crfhead.theory.mistake_bound`);
* :func:`finance_payload` -- the finance case study (:mod:`crfhead.theory.finance_study`: the
  shipped ``configs/finance`` configs over corpus runs, as ``scripts/finance_table.py``);
* :func:`higher_order_payload` -- one MSM2013 tweet group decoded by the chain and by 2-slave dual
  decomposition (Qian & Liu, TACL 2014; :func:`crfhead.higher_order.decode`).

Every payload carries the envelope ``tab``, ``schema``, ``title``, ``note``, ``function`` and
``arguments``; the script adds ``command``. Floats are rounded to :data:`DIGITS` decimals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "DIGITS",
    "MEMM_SPREAD_BOUND",
    "PAYLOADS",
    "SCHEMA",
    "SCHEMA_NOTE",
    "finance_payload",
    "higher_order_payload",
    "label_bias_payload",
    "learning_curves_payload",
    "perceptron_payload",
    "rounded",
    "trellis_payload",
]

SCHEMA = 2
"""The payloads' schema version (bumped on any incompatible change of keys)."""

SCHEMA_NOTE = "crfhead/lab/static/data/SCHEMA.md"
"""Where the payload schema is documented for the page (next to the payloads)."""

DIGITS = 6
"""Decimals kept in every float of a payload."""

MEMM_SPREAD_BOUND = 1e-12
"""How far apart the MEMM's five float64 marginals of "the" may be and still be the same number
(Proposition 2). Their actual spread is float64 rounding, which differs from CPU to CPU, so
the label-bias payload states this bound rather than the spread's bits."""


def rounded(value: Any, digits: int = DIGITS) -> Any:
    """``value`` with every float (also inside lists, tuples, dicts and tensors) rounded; JSON-able."""
    if isinstance(value, Tensor):
        value = value.tolist()
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"a payload cannot hold the non-finite float {value}")
        return round(value, digits) + 0.0  # + 0.0: no "-0.0" in the files
    if isinstance(value, dict):
        return {str(k): rounded(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v, digits) for v in value]
    raise TypeError(f"cannot put a {type(value).__name__} in a payload")


def _envelope(
    tab: str, title: str, note: str, arguments: dict[str, Any], body: dict[str, Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "tab": tab,
        "schema": SCHEMA,
        "title": title,
        "note": note,
        "function": f"crfhead.lab.payloads.{tab}_payload",
        "arguments": rounded(arguments),
    }
    out.update(rounded(body))
    return out


@contextmanager
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# --------------------------------------------------------------------------------------- trellis
def trellis_payload(seed: int = 0) -> dict[str, Any]:
    """The Trellis tab: :func:`~crfhead.theory.payload.trellis_example` of the well-specified world.

    Keys beside the envelope: ``world``, ``seed``, ``draw``, ``num_states`` (8), ``length`` (24),
    ``words``, ``gold``, ``viterbi``, ``posterior`` (``int[T]``), ``marginals`` and
    ``max_marginals_relative`` (``float[T][K]``), ``disagree_at``, ``correct_viterbi``,
    ``correct_posterior``, ``expected_correct_viterbi``, ``expected_correct_posterior``,
    ``best_path_probability``.
    """
    from crfhead.theory.payload import trellis_example
    from crfhead.theory.worlds import well_specified_world

    with _one_thread():
        ex = trellis_example(well_specified_world(), seed)
    body = {"num_states": len(ex["marginals"][0]), "length": len(ex["words"]), **ex}
    note = (
        "One draw of the well-specified world. In (+, x) each cell is the marginal gamma_t(k); in "
        "(max, x) the best path through the cell relative to the best path (1 along Viterbi). "
        "Posterior decoding maximises the expected number of right tags, Viterbi the probability "
        "of the whole path (Theorem 4)."
    )
    return _envelope("trellis", "Trellis: marginals vs the best path", note, {"seed": seed}, body)


# ------------------------------------------------------------------------------- learning curves
_CURVE_TAGGERS = (
    ("hmm", "HMM"),
    ("crf_words", "CRF, words"),
    ("crf_window", "CRF, ±1 word"),
    ("bayes", "Bayes (posterior)"),
    ("bayes_viterbi", "Bayes (Viterbi)"),
)


def learning_curves_payload(
    ns: Sequence[int] = (10, 30, 100, 300, 1000),
    test_n: int = 2000,
    seed: int = 0,
    tol: float = 1e-6,
    max_iter: int = 500,
) -> dict[str, Any]:
    """The Learning curves tab: :func:`~crfhead.theory.experiments.learning_curves` in both worlds.

    Keys beside the envelope: ``taggers`` (``[{key, label}]``), ``metrics`` (``[{key, label,
    unit}]``), ``worlds`` (``[{key, label, n, test_n, acc, exp, loss}]``, each metric a dict from
    tagger key to one value per ``n``; ``loss`` has no ``bayes_viterbi``), ``rows`` (the raw rows).
    """
    from crfhead.theory.experiments import learning_curves
    from crfhead.theory.worlds import next_state_world, well_specified_world

    worlds = []
    all_rows = []
    with _one_thread():
        for world, label in (
            (well_specified_world(), "well-specified"),
            (next_state_world(), "next-state"),
        ):
            rows = learning_curves(world, ns, test_n=test_n, seed=seed, tol=tol, max_iter=max_iter)
            all_rows.extend(rows)
            entry: dict[str, Any] = {
                "key": world.name,
                "label": label,
                "n": [r["n"] for r in rows],
                "test_n": test_n,
            }
            for metric in ("acc", "exp", "loss"):
                entry[metric] = {
                    key: [r[f"{metric}_{key}"] for r in rows]
                    for key, _ in _CURVE_TAGGERS
                    if f"{metric}_{key}" in rows[0]
                }
            worlds.append(entry)
    body = {
        "taggers": [{"key": k, "label": v} for k, v in _CURVE_TAGGERS],
        "metrics": [
            {"key": "acc", "label": "test token accuracy", "unit": "fraction"},
            {
                "key": "exp",
                "label": "expected accuracy under the true posterior",
                "unit": "fraction",
            },
            {"key": "loss", "label": "conditional log-loss of the true tags", "unit": "nats/token"},
        ],
        "worlds": worlds,
        "rows": all_rows,
    }
    note = (
        "Test token accuracy and log-loss against training size. In the well-specified world the "
        "HMM is the true model's family; in the next-state world it is misspecified and the "
        "window CRF overtakes it. Bayes is the true model: the ceiling."
    )
    args = {"ns": list(ns), "test_n": test_n, "seed": seed, "tol": tol, "max_iter": max_iter}
    return _envelope("learning_curves", "Learning curves: HMM vs CRFs", note, args, body)


# ------------------------------------------------------------------------------------ label bias
def label_bias_payload(
    train_docs: int = 30,
    seed: int = 0,
    prefix: Sequence[str] | None = None,
    endings: Sequence[Sequence[str]] | None = None,
    focus_label: str = "B-DATE",
) -> dict[str, Any]:
    """The CRF vs MEMM tab: Proposition 2 on a CRF and a causal MEMM fit on the finance corpus.

    Keys beside the envelope: ``labels``, ``prefix``, ``focus_index``, ``focus_label``, ``models``,
    ``continuations`` (``[{ending, tokens, count_in_training, unknown_tokens, crf, memm}]``, each model
    ``{marginals (T x K), viterbi (labels), focus_probability}``), ``summary`` and ``training`` (see
    ``SCHEMA.md``). Nothing in it depends on the machine beyond float64 rounding: the MEMM's five
    values are compared at :data:`MEMM_SPREAD_BOUND`, never bit for bit.
    """
    from crfhead.theory.label_bias import (
        DEFAULT_ENDINGS,
        DEFAULT_PREFIX,
        continuation_rows,
        train_finance_taggers,
    )

    prefix = tuple(DEFAULT_PREFIX if prefix is None else prefix)
    endings = [tuple(e) for e in (DEFAULT_ENDINGS if endings is None else endings)]
    with _one_thread():
        taggers = train_finance_taggers(train_docs, seed)
        rows = continuation_rows(taggers, prefix, endings, focus_label)
    conts = []
    for r in rows:
        cont = {k: r[k] for k in ("ending", "tokens", "count_in_training", "unknown_tokens")}
        for name in ("crf", "memm"):
            m = r[name]
            cont[name] = {
                "marginals": m["marginals"],
                "viterbi": m["viterbi"],
                "focus_probability": m["focus_probability"],
            }
        conts.append(cont)
    focus = len(prefix) - 1
    crf_p = [r["crf"]["focus_probability"] for r in rows]
    memm_p = [r["memm"]["focus_probability"] for r in rows]
    summary = {
        "crf_min": min(crf_p),
        "crf_max": max(crf_p),
        "memm_value": memm_p[0],
        "memm_identical": len({round(p, DIGITS) for p in memm_p}) == 1
        and max(memm_p) - min(memm_p) < MEMM_SPREAD_BOUND,
        "memm_spread": max(memm_p) - min(memm_p),
        "memm_spread_bound": f"{MEMM_SPREAD_BOUND:g}",
        "memm_viterbi_opens_date": [r["memm"]["viterbi"][focus] == focus_label for r in rows],
        "crf_viterbi_opens_date": [r["crf"]["viterbi"][focus] == focus_label for r in rows],
    }
    body = {
        "labels": taggers.labels,
        "prefix": list(prefix),
        "focus_index": focus,
        "focus_label": focus_label,
        "models": [
            {
                "key": "crf",
                "label": "CRF",
                "description": "globally normalised chain over the causal window (-2, -1, 0)",
            },
            {
                "key": "memm",
                "label": "causal MEMM",
                "description": "a local softmax per position over the same causal window",
            },
        ],
        "continuations": conts,
        "summary": summary,
        "training": taggers.info,
    }
    note = (
        "Both taggers read the same words: two to the left and the current one. The CRF's "
        "probability that 'the' opens a DATE moves with the words after it, through the "
        "transitions; the MEMM's cannot (Proposition 2: an MEMM's past ignores its future), and "
        "differs across continuations only by float64 rounding."
    )
    args = {
        "train_docs": train_docs,
        "seed": seed,
        "prefix": list(prefix),
        "endings": [list(e) for e in endings],
        "focus_label": focus_label,
    }
    return _envelope("label_bias", "CRF vs MEMM: label bias", note, args, body)


# ------------------------------------------------------------------------------------ perceptron
def perceptron_payload(
    margins: Sequence[float] | None = None,
    n: int = 100,
    length: int = 5,
    num_tags: int = 3,
    vocab_size: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    """The Perceptron tab: :func:`~crfhead.theory.mistake_bound.mistake_bound_rows`.

    Keys beside the envelope: ``setup`` (``num_tags``, ``vocab_size``, ``length``, ``n``,
    ``features``, ``seed``, ``max_epochs``) and ``margins`` (the rows, ``gamma`` decreasing).
    """
    from crfhead.theory.mistake_bound import DEFAULT_MARGINS, mistake_bound_rows

    margins = tuple(DEFAULT_MARGINS if margins is None else margins)
    max_epochs = 1000
    rows = mistake_bound_rows(margins, n, length, num_tags, vocab_size, seed, max_epochs)
    K, V = num_tags, vocab_size
    setup = {
        "num_tags": K,
        "vocab_size": V,
        "length": length,
        "n": n,
        "features": V * K + K * K + K,
        "paths_per_sequence": K**length,
        "seed": seed,
        "max_epochs": max_epochs,
    }
    note = (
        "Sequences labelled by a unit teacher u, kept when the teacher's best path beats the "
        "second best by at least the target margin. The plain perceptron's mistakes until an "
        "epoch without one, against the bound R^2/gamma^2 of Theorem 5 (gamma and R exact, "
        "by enumerating every path)."
    )
    args = {
        "margins": list(margins),
        "n": n,
        "length": length,
        "num_tags": num_tags,
        "vocab_size": vocab_size,
        "seed": seed,
    }
    body = {"setup": setup, "margins": rows}
    return _envelope("perceptron", "Perceptron: the mistake bound", note, args, body)


# --------------------------------------------------------------------------------------- finance
def finance_payload(
    docs: Sequence[int] = (3, 10, 30),
    taggers: Sequence[str] = ("hmm", "memm", "crf", "perceptron"),
    runs: int = 5,
    profile: str = "seed",
    tune: bool = True,
    overrides: Sequence[str] = (),
    result: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The Finance tab: :func:`crfhead.theory.finance_study.study`, one intra-op thread.

    Args:
        docs: training sizes in documents.
        taggers: keys among ``hmm``, ``memm``, ``crf``, ``perceptron``.
        runs: corpus runs per cell.
        profile: the generator's profile (``"seed"``: calibrated to the seed's statistics).
        tune: choose the MEMM's learning rate on dev.
        overrides: extra command-line overrides for every cell (e.g. ``--trainer.max_epochs=1``).
        result: a study already computed with these arguments (``scripts/finance_table.py --lab``
            passes its own, so the tab and the Results table are one computation).

    Keys beside the envelope: ``taggers`` (``[{key, label, config}]``), ``docs``, ``runs``,
    ``profile``, ``test``, ``composition``, ``tuning``, ``orderings`` and ``cells`` (tagger key →
    one cell per ``docs``: ``docs``, ``accuracy``, ``f1``, ``unseen_accuracy``, ``unseen_rate``
    (means over the runs), ``sd`` (their standard deviations), ``overrides`` and ``runs`` (each
    run's test report)).
    """
    from crfhead.theory.finance_study import orderings, study

    if result is None:
        with _one_thread():
            result = study(docs, taggers, runs, profile, tune, overrides)
    body = {
        **result,
        "test": (
            f"200 documents of corpus run 2r + 1, r < {result['runs']} (training: the first n "
            f"documents of run 2r; profile {result['profile']!r})"
        ),
        "orderings": orderings(result),
    }
    note = (
        "The seed's finance case study on our synthetic corpus: token accuracy, span F1 and "
        "accuracy on test tokens never seen in training, per tagger and training size, mean over "
        f"{result['runs']} corpus runs."
    )
    args = {
        "docs": list(docs),
        "taggers": list(taggers),
        "runs": runs,
        "profile": profile,
        "tune": tune,
        "overrides": list(overrides),
    }
    return _envelope("finance", "Finance: the case study", note, args, body)


# ---------------------------------------------------------------------------------- higher order
def _msm_chain(
    train_docs: int | None, offsets: Sequence[int], min_count: int, tol: float, max_iter: int
) -> tuple[Callable[[list[list[str]]], Any], list[str], dict[str, Any], dict[str, list[Any]]]:
    """A word-window CRF on MSM2013 (BIOES) fit by L-BFGS; ``(potentials_of, labels, info, splits)``."""
    from crfhead.data.msm2013 import MSM2013_TYPES, read_msm2013, split_msm2013
    from crfhead.encoders.window import WordWindowEncoder
    from crfhead.heads.crf import CRF
    from crfhead.schemes import labels_for
    from crfhead.theory.experiments import fit_window_model
    from crfhead.theory.window_data import encode, encode_tagged, word_vocab

    sentences, _ = read_msm2013(scheme="BIOES", warn=False)
    train, dev, test = split_msm2013(sentences, seed=13)
    if train_docs is not None:
        train = train[:train_docs]
    labels = labels_for(MSM2013_TYPES, "BIOES")
    vocab = word_vocab(([w.lower() for w in s.tokens] for s in train), min_count)
    words, tags, mask = encode_tagged(train, vocab, labels, lowercase=True)
    K, V = len(labels), len(vocab) + 1
    enc, crf = WordWindowEncoder(K, V, offsets), CRF(K, labels=labels, scheme="BIOES")
    l2 = 1.0 / len(train)
    iterations = fit_window_model(enc, crf, words, tags, l2, mask, tol=tol, max_iter=max_iter)

    def potentials_of(group: list[list[str]]) -> Any:
        w, m = encode([[t.lower() for t in s] for s in group], vocab)
        with torch.no_grad():
            return crf.potentials(enc.emissions(w, m), m)

    info = {
        "model": "CRF over a word window (lowercased words), BIOES constraints, L-BFGS at l2 = 1/n",
        "offsets": list(offsets),
        "min_count": min_count,
        "train_sentences": len(train),
        "vocab_size": V,
        "l2": l2,
        "tol": tol,
        "lbfgs_iterations": iterations,
        "split": "split_msm2013(seed=13): train / dev / test of the training file",
    }
    return potentials_of, labels, info, {"train": train, "dev": dev, "test": test}


def higher_order_payload(
    split: str = "test",
    weight: float = 1.0,
    threshold: int = 4,
    min_iterations: int = 3,
    max_size: int = 6,
    train_docs: int | None = None,
    offsets: Sequence[int] = (-1, 0, 1),
    min_count: int = 2,
    tol: float = 1e-5,
    max_iter: int = 300,
    max_iterations: int = 300,
) -> dict[str, Any]:
    """The Higher order tab: one MSM2013 group, chain Viterbi vs 2-slave dual decomposition.

    The chain model is a word-window CRF fit on the training split (:func:`_msm_chain`); the groups
    are the split's tweets linked by more than ``threshold`` shared words
    (:class:`~crfhead.data.grouping.TweetGroups`), each with
    :func:`~crfhead.higher_order.consistency_patterns` of score ``weight``. The group shown is the
    first one, in the split's order, of 2 to ``max_size`` tweets whose 2-slave decoding is certified,
    changes at least one token and runs at least ``min_iterations`` iterations.

    Keys beside the envelope: ``labels``, ``group`` (``split``, ``index``, ``size``,
    ``groups_scanned``), ``sentences`` (``[{tokens, gold, chain, dd, changed}]``), ``changed``,
    ``patterns``, ``pattern_weight``, ``iterations`` (``[{iteration, dual, best_dual, best_primal,
    gap}]``, ``gap = best_dual - best_primal``),
    ``certified``, ``certificate_iteration``, ``chain_score``, ``dd_primal``, ``dd_dual``, ``model``.

    Raises:
        ValueError: no group of the split qualifies.
    """
    from crfhead.data.grouping import TweetGroups
    from crfhead.higher_order import consistency_patterns, decode
    from crfhead.higher_order.result import certifies

    with _one_thread():
        potentials_of, labels, info, splits = _msm_chain(
            train_docs, offsets, min_count, tol, max_iter
        )
        sentences = splits[split]
        groups = TweetGroups(threshold=threshold).groups(sentences)
        chosen = None
        for gi, group in enumerate(groups):
            if not 2 <= len(group) <= max_size:
                continue
            toks = [sentences[i].tokens for i in group]
            patterns = consistency_patterns(toks, labels, "BIOES", weight=weight)
            if not patterns:
                continue
            pot = potentials_of(toks)
            inputs = (pot.emissions, pot.transitions, pot.start, pot.end, pot.mask, patterns)
            chain = decode(*inputs, method="viterbi")
            dd = decode(*inputs, method="dd2slave", max_iterations=max_iterations)
            if (
                dd.certified
                and dd.iterations >= min_iterations
                and not torch.equal(chain.tags, dd.tags)
            ):
                chosen = (gi, group, toks, patterns, chain, dd)
                break
    if chosen is None:
        raise ValueError(f"no group of {split!r} has a certified, changed decoding")
    gi, group, toks, patterns, chain, dd = chosen
    sents = []
    changed = []
    for b, i in enumerate(group):
        n = len(toks[b])
        c = [labels[k] for k in chain.tags[b, :n].tolist()]
        d = [labels[k] for k in dd.tags[b, :n].tolist()]
        gold = list(sentences[i].tags or [])
        diff = [t for t in range(n) if c[t] != d[t]]
        sents.append({"tokens": toks[b], "gold": gold, "chain": c, "dd": d, "changed": diff})
        changed += [
            {
                "sentence": b,
                "position": t,
                "token": toks[b][t],
                "chain": c[t],
                "dd": d[t],
                "gold": gold[t],
            }
            for t in diff
        ]
    history = []
    best_dual = math.inf
    first = None
    for j, (du, pr) in enumerate(zip(dd.dual_history, dd.primal_history, strict=True)):
        best_dual = min(best_dual, du)
        history.append(
            {
                "iteration": j + 1,
                "dual": du,
                "best_dual": best_dual,
                "best_primal": pr,
                "gap": max(0.0, best_dual - pr),
            }
        )
        if first is None and certifies(pr, best_dual):
            first = j + 1
    body = {
        "labels": labels,
        "group": {"split": split, "index": gi, "size": len(group), "groups_scanned": gi + 1},
        "sentences": sents,
        "changed": changed,
        "patterns": len(patterns),
        "pattern_weight": weight,
        "iterations": history,
        "certified": dd.certified,
        "certificate_iteration": first,
        "chain_score": chain.primal,
        "dd_primal": dd.primal,
        "dd_dual": dd.dual,
        "model": info,
    }
    note = (
        "Tweets that share words are decoded together: the chains plus consistency patterns that "
        "reward identical phrases for taking the same label. 2-slave dual decomposition (Viterbi "
        "on the chains, one minimum cut for the patterns) lowers the dual bound until the best "
        "labelling found reaches it: a certificate of optimality."
    )
    args = {
        "split": split,
        "weight": weight,
        "threshold": threshold,
        "min_iterations": min_iterations,
        "max_size": max_size,
        "train_docs": train_docs,
        "offsets": list(offsets),
        "min_count": min_count,
        "tol": tol,
        "max_iter": max_iter,
        "max_iterations": max_iterations,
    }
    return _envelope("higher_order", "Higher order: chain vs dual decomposition", note, args, body)


PAYLOADS: dict[str, Callable[..., dict[str, Any]]] = {
    "trellis": trellis_payload,
    "learning_curves": learning_curves_payload,
    "label_bias": label_bias_payload,
    "perceptron": perceptron_payload,
    "finance": finance_payload,
    "higher_order": higher_order_payload,
}
"""Tab name → its generating function (the order of the page's tabs)."""
