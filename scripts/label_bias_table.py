"""Label bias on trained finance taggers (*Sequence Labeling: From HMMs to Linear-Chain CRFs*, Proposition 2): one table, Markdown and JSON.

    python scripts/label_bias_table.py [--train-docs 30] [--seed 0] [--out-dir docs/results]
    python scripts/label_bias_table.py --train-docs 3 --ending first quarter --ending fiscal year \\
        --polyseme drovine --out-dir /tmp/lb          # the smoke test's size

A CRF and a causal MEMM read the same causal word window (two words to the left and the current one)
and are fit by L-BFGS at l2 = 1/n on the first ``--train-docs`` documents of corpus run ``--seed``
(:func:`crfhead.theory.label_bias.train_finance_taggers`); an HMM is counted on the same sentences
and vocabulary, add-alpha tuned on the run's next 20 documents
(:func:`~crfhead.theory.label_bias.fit_finance_hmm`). For each continuation of "solenne power guided
to percent growth in the": each model's probability that "the" opens a DATE and whether its Viterbi
path does (:func:`~crfhead.theory.label_bias.continuation_rows`). Then the seed's third point, how
each model reads a polyseme (a company that is also its product line) in invented contexts
(:func:`~crfhead.theory.label_bias.polyseme_rows`). Writes ``label_bias.md`` and ``label_bias.json``
to ``--out-dir``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import torch

from crfhead.lab.payloads import rounded
from crfhead.theory.label_bias import (
    DEFAULT_ENDINGS,
    DEFAULT_POLYSEME,
    DEFAULT_PREFIX,
    continuation_rows,
    fit_finance_hmm,
    polyseme_rows,
    tag_counts,
    train_finance_taggers,
)
from crfhead.theory.window_data import encode

ROOT = Path(__file__).resolve().parents[1]
FOCUS = "B-DATE"

SEED_REPORT = {
    "crf_first_quarter": 0.963,
    "crf_prior_year_O": 0.977,
    "memm_every_continuation": 0.850,
    "memm_viterbi_opens_date": "under every continuation",
    "hmm_kestrel_platform_PRODUCT": 0.962,
    "kestrel_turbine_PRODUCT_in_training": 61,
}
"""What the paper reports for this demonstration (its corpus and its continuations)."""


def hmm_focus(
    taggers: Any, hmm: Any, tokens: list[str], k: int, focus: int
) -> tuple[float, list[str]]:
    """The HMM's marginal of tag ``k`` at ``focus`` and its Viterbi labels."""
    words, mask = encode([tokens], taggers.vocab)
    with torch.no_grad():
        em = hmm.emit(words)
        gamma = hmm.marginals(em, mask)[0]
        path = hmm.decode(em, mask)[0]
    return float(gamma[focus, k]), [taggers.labels[int(t)] for t in path]


def build(
    train_docs: int, seed: int, endings: list[tuple[str, ...]], polyseme: str
) -> dict[str, Any]:
    """Fit the three taggers and read every continuation and the polyseme; the JSON-able result."""
    taggers = train_finance_taggers(train_docs, seed)
    hmm, hmm_info = fit_finance_hmm(taggers, seed)
    focus = len(DEFAULT_PREFIX) - 1
    k = taggers.labels.index(FOCUS)
    rows = []
    for r in continuation_rows(taggers, DEFAULT_PREFIX, endings, FOCUS):
        p_hmm, path_hmm = hmm_focus(taggers, hmm, r["tokens"], k, focus)
        row: dict[str, Any] = {
            "ending": " ".join(r["ending"]),
            "count_in_training": r["count_in_training"],
            "unknown_tokens": [r["tokens"][i] for i in r["unknown_tokens"]],
        }
        for name, p, path in (
            ("crf", r["crf"]["focus_probability"], r["crf"]["viterbi"]),
            ("memm", r["memm"]["focus_probability"], r["memm"]["viterbi"]),
            ("hmm", p_hmm, path_hmm),
        ):
            row[name] = {
                "p_focus": p,
                "p_focus_exact": repr(p),
                "viterbi_opens_date": path[focus] == FOCUS,
                "viterbi_from_focus": path[focus:],
            }
        rows.append(row)
    memm = [r["memm"]["p_focus"] for r in rows]
    crf = [r["crf"]["p_focus"] for r in rows]
    poly = []
    for r in polyseme_rows(taggers, hmm, polyseme):
        entry: dict[str, Any] = {
            "context": r["context"],
            "tokens": r["tokens"],
            "position": r["position"],
            "unknown_tokens": [r["tokens"][i] for i in r["unknown_tokens"]],
        }
        for name in ("hmm", "crf", "memm"):
            m = r[name]
            entry[name] = {
                "reading": m["reading"],
                "probability": m["probability"],
                "entity_probabilities": m["entity_probabilities"],
                "viterbi": m["viterbi"],
            }
        poly.append(entry)
    summary = {
        "crf_min": min(crf),
        "crf_max": max(crf),
        "memm_value": memm[0],
        "memm_identical_printed": len({f"{p:.6f}" for p in memm}) == 1,
        "memm_spread_exact": repr(max(memm) - min(memm)),
        "memm_viterbi_opens_date": sum(r["memm"]["viterbi_opens_date"] for r in rows),
        "crf_viterbi_opens_date": sum(r["crf"]["viterbi_opens_date"] for r in rows),
        "hmm_viterbi_opens_date": sum(r["hmm"]["viterbi_opens_date"] for r in rows),
        "continuations": len(rows),
    }
    return {
        "prefix": " ".join(DEFAULT_PREFIX),
        "focus_label": FOCUS,
        "continuations": rows,
        "polyseme": {
            "word": polyseme,
            "training_tags": tag_counts(taggers.train, polyseme),
            "kestrel_training_tags": tag_counts(taggers.train, "kestrel"),
            "contexts": poly,
        },
        "summary": summary,
        "training": {**taggers.info, "hmm": hmm_info},
        "seed_reports": SEED_REPORT,
    }


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _reading(m: dict[str, Any]) -> str:
    return f"{m['reading']} {m['probability']:.3f}"


def markdown(result: dict[str, Any], command: str) -> str:
    """The table (and the polyseme's) as Markdown."""
    s = result["summary"]
    lines = [
        f"<!-- {command} -->",
        "",
        f'"{result["prefix"]} ..." on {result["training"]["corpus"]}: P("the" = {FOCUS}) and '
        'whether the Viterbi path opens a DATE at "the"',
        "",
        '| continuation | "the" + it in training | CRF | causal MEMM | HMM | Viterbi opens DATE: '
        'CRF / MEMM / HMM | MEMM\'s Viterbi path from "the" |',
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["continuations"]:
        opens = " / ".join(_yes(r[m]["viterbi_opens_date"]) for m in ("crf", "memm", "hmm"))
        lines.append(
            f"| the {r['ending']} | {r['count_in_training']} | {r['crf']['p_focus']:.3f} | "
            f"{r['memm']['p_focus']:.6f} | {r['hmm']['p_focus']:.3f} | {opens} | "
            f"{' '.join(r['memm']['viterbi_from_focus'])} |"
        )
    n = s["continuations"]
    lines += [
        "",
        f"CRF from {s['crf_min']:.3f} to {s['crf_max']:.3f}; the MEMM's {s['memm_value']:.6f} under "
        f"every continuation (identical to every printed digit: {_yes(s['memm_identical_printed'])}; "
        f'float64 spread {s["memm_spread_exact"]}). Viterbi opens a DATE at "the": MEMM '
        f"{s['memm_viterbi_opens_date']}/{n}, CRF {s['crf_viterbi_opens_date']}/{n}, HMM "
        f"{s['hmm_viterbi_opens_date']}/{n}.",
        "",
    ]
    p = result["polyseme"]
    counts = ", ".join(f"{t} {c}" for t, c in p["training_tags"].items()) or "never"
    kestrel = ", ".join(f"{t} {c}" for t, c in p["kestrel_training_tags"].items()) or "never"
    lines += [
        f'The polyseme "{p["word"]}" (in training: {counts}; the seed\'s "kestrel": {kestrel}): '
        "the most probable tag of the word and its marginal",
        "",
        "| context | HMM | CRF | causal MEMM |",
        "|---|---|---|---|",
    ]
    for c in p["contexts"]:
        toks = list(c["tokens"])
        toks[c["position"]] = f"**{toks[c['position']]}**"
        lines.append(
            f"| {c['context']}: {' '.join(toks)} | {_reading(c['hmm'])} | {_reading(c['crf'])} | "
            f"{_reading(c['memm'])} |"
        )
    seed = result["seed_reports"]
    lines += [
        "",
        f'The seed (its corpus, its continuations): CRF {seed["crf_first_quarter"]} with "first '
        f'quarter", O {seed["crf_prior_year_O"]} with "prior year"; the MEMM '
        f"{seed['memm_every_continuation']} under every continuation, its Viterbi path opening a date "
        f'{seed["memm_viterbi_opens_date"]}; the HMM reads kestrel in "the kestrel platform" as a '
        f"PRODUCT with {seed['hmm_kestrel_platform_PRODUCT']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the table, write ``label_bias.md`` and ``label_bias.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-docs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0, help="the training corpus run")
    parser.add_argument(
        "--ending",
        nargs="+",
        action="append",
        metavar="WORD",
        help="a continuation (repeat the flag for more; default: the library's five)",
    )
    parser.add_argument("--polyseme", default=DEFAULT_POLYSEME, help="a company/product word")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "results")
    args = parser.parse_args(argv)
    endings = [tuple(e) for e in args.ending] if args.ending else list(DEFAULT_ENDINGS)
    command = shlex.join(
        ["python", "scripts/label_bias_table.py", *(sys.argv[1:] if argv is None else argv)]
    )
    start = time.perf_counter()
    result = build(args.train_docs, args.seed, endings, args.polyseme)
    result["command"] = command
    args.out_dir.mkdir(parents=True, exist_ok=True)
    text = markdown(result, command)
    (args.out_dir / "label_bias.md").write_text(text)
    (args.out_dir / "label_bias.json").write_text(json.dumps(rounded(result), indent=1) + "\n")
    print(text)
    print(f"{time.perf_counter() - start:.0f} s; wrote {args.out_dir}/label_bias.{{md,json}}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
