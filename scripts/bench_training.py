"""End-to-end training throughput: crfhead's indicator-feature CRF against CRFsuite, same features, L-BFGS.

    pip install python-crfsuite            # (the bench extra)
    python scripts/bench_training.py [--docs 30] [--iterations 100] [--c2 1.0] [--threads 1] [--markdown]

Both taggers see the same indicator features (crfhead's ``FeatureTemplates``: bias, word, 3-letter
prefix and suffix, shape, two words each side) on the synthetic finance corpus (first ``--docs``
training documents of run 0; 200 test documents of run 1), with every (feature, tag) and every
(tag, tag) weight present (CRFsuite ``feature.possible_states`` / ``possible_transitions`` on), no
scheme constraints, and the objective CRFsuite minimises: the summed negative log-likelihood plus
``c2 ||w||^2``, by L-BFGS for at most ``--iterations`` iterations. crfhead runs full-batch L-BFGS with
a strong Wolfe line search on its default engine backend, twice: its own flat L-BFGS
(:mod:`crfhead.training.lbfgs`: the weights views of one vector, the penalty outside autograd) and
``torch.optim.LBFGS`` (the closure over the parameter tensors), the same objective and stopping
rules.

Reported: training wall time, objective evaluations (forward + backward passes over the corpus),
throughput in training tokens per second (tokens x evaluations / time), final objective, and test
token accuracy and span F1, so "the same accuracy" can be checked on the same line. Also the
process's CPU seconds and tokens per CPU second, which other jobs on a shared machine disturb far
less than wall time (CRFsuite's CPU seconds include its feature generation inside ``train``, which
its wall time leaves out: its CPU throughput is a lower bound).

Threads: CRFsuite trains on one thread, so crfhead gets one too by default (``--threads 0``: torch's
default). On 2 shared cores torch's parallel operations also lose most when the other core is busy.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from crfhead.data.batching import Collator  # noqa: E402
from crfhead.data.corpora import FinanceCorpus  # noqa: E402
from crfhead.data.features import FeatureTemplates  # noqa: E402
from crfhead.data.sentence import LabelVocab  # noqa: E402
from crfhead.encoders import IndicatorEncoder  # noqa: E402
from crfhead.engine.backends import resolve  # noqa: E402
from crfhead.evaluation.metrics import TaggingMetrics  # noqa: E402
from crfhead.heads.crf import CRF  # noqa: E402
from crfhead.training.lbfgs import FlatParameters, minimize  # noqa: E402


def score(
    gold: list[list[str]], pred: list[list[str]], tokens: list[list[str]]
) -> tuple[float, float]:
    """Token accuracy and seqeval span F1."""
    m = TaggingMetrics("BIO")
    m.update(gold, pred, tokens)
    out = m.compute()
    return float(out["accuracy"]), float(out["f1"])


def run_crfsuite(
    train, test, templates: FeatureTemplates, args: argparse.Namespace
) -> dict[str, float]:
    import pycrfsuite

    trainer = pycrfsuite.Trainer(verbose=False)
    for s in train:
        trainer.append([list(f) for f in templates(s.tokens)], list(s.tags))
    trainer.select("lbfgs")
    trainer.set_params(
        {
            "c1": 0.0,
            "c2": args.c2,
            "max_iterations": args.iterations,
            "feature.possible_states": True,
            "feature.possible_transitions": True,
        }
    )
    model = str(Path(args.tmp) / "crfsuite.model")
    start, cpu = time.perf_counter(), time.process_time()
    trainer.train(model)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    info = trainer.logparser.last_iteration
    # One evaluation to start, then one per line-search trial of every iteration.
    evals = 1 + sum(int(it.get("linesearch_trials", 1)) for it in trainer.logparser.iterations)
    optimise = float(trainer.logparser.training_seconds or seconds)  # without feature generation
    tagger = pycrfsuite.Tagger()
    tagger.open(model)
    pred = [tagger.tag([list(f) for f in templates(s.tokens)]) for s in test]
    acc, f1 = score([list(s.tags) for s in test], pred, [s.tokens for s in test])
    return {
        "seconds": optimise,
        "cpu": cpu,
        "iterations": len(trainer.logparser.iterations),
        "evals": evals,
        "objective": float(info.get("loss", float("nan"))),
        "accuracy": acc,
        "f1": f1,
    }


def run_crfhead(
    train, test, templates: FeatureTemplates, args: argparse.Namespace, *, flat: bool = True
) -> dict[str, float]:
    types = sorted({t.split("-", 1)[1] for s in train + test for t in s.tags if "-" in t})
    labels = LabelVocab.from_types(types, "BIO")
    features = templates.build_vocab(train)
    collate = Collator(labels=labels, features=(templates, features))
    batch = collate(train)
    enc = IndicatorEncoder(len(labels), len(features) + 2)
    crf = CRF(len(labels))
    torch.nn.init.zeros_(crf.transitions)
    torch.nn.init.zeros_(crf.start_transitions)
    torch.nn.init.zeros_(crf.end_transitions)
    params = [enc.weight, crf.transitions, crf.start_transitions, crf.end_transitions]
    opt = torch.optim.LBFGS(
        params,
        lr=1.0,
        max_iter=args.iterations,
        history_size=6,  # CRFsuite's num_memories default
        tolerance_grad=1e-7,
        tolerance_change=1e-9,
        line_search_fn="strong_wolfe",
    )
    evals = 0
    # Load the engine's native kernel and warm torch up outside the timing (CRFsuite's time has no
    # library loading either), on a batch of its own so nothing of the training batch is cached.
    warm = collate(train[:2])
    crf.nll(enc(warm), warm.tags, warm.mask, reduction="sum").backward()
    for p in params:
        p.grad = None

    def objective() -> torch.Tensor:
        loss = crf.nll(enc(batch), batch.tags, batch.mask, reduction="sum")
        return loss + args.c2 * sum((p * p).sum() for p in params)

    def closure() -> torch.Tensor:
        nonlocal evals
        evals += 1
        opt.zero_grad()
        loss = objective()
        loss.backward()
        return loss

    if flat:  # crfhead's flat L-BFGS: the same objective, the L2 term outside autograd
        weights = FlatParameters(params)
        f = weights.objective(
            lambda: crf.nll(enc(batch), batch.tags, batch.mask, reduction="sum"), l2=args.c2
        )
        start, cpu = time.perf_counter(), time.process_time()
        res = minimize(
            f,
            weights.x,
            history=6,
            max_iter=args.iterations,
            tolerance_grad=1e-7,
            tolerance_change=1e-9,
            point=weights.x,
        )
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        weights.load(res.x)
        iterations, evals = res.iterations, res.evaluations
    else:
        start, cpu = time.perf_counter(), time.process_time()
        opt.step(closure)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        iterations = opt.state[opt._params[0]].get("n_iter", 0)
    with torch.no_grad():
        final = float(objective())
        test_batch = collate(test)
        paths = crf.decode(enc(test_batch), test_batch.mask).tolist()
    pred = [[labels.labels[i] for i in row if i >= 0] for row in paths]
    acc, f1 = score([list(s.tags) for s in test], pred, [s.tokens for s in test])
    return {
        "seconds": seconds,
        "cpu": cpu,
        "iterations": iterations,
        "evals": evals,
        "objective": final,
        "accuracy": acc,
        "f1": f1,
    }


def main() -> None:
    """Run both and print the comparison."""
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=30)
    parser.add_argument("--test-docs", type=int, default=200)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--c2", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    corpus = FinanceCorpus(
        seed=0, train_docs=args.docs, dev_docs=1, test_seed=1, test_docs=args.test_docs
    )
    splits = corpus.load()
    train, test = splits["train"], splits["test"]
    tokens = sum(len(s) for s in train)
    templates = FeatureTemplates()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        args.tmp = tmp
        rows["CRFsuite (python-crfsuite)"] = run_crfsuite(train, test, templates, args)
        backend = resolve(torch.device("cpu"))
        rows[f"crfhead ({backend} backend, flat L-BFGS)"] = run_crfhead(
            train, test, templates, args
        )
        rows[f"crfhead ({backend} backend, torch.optim.LBFGS)"] = run_crfhead(
            train, test, templates, args, flat=False
        )
    print(
        f"`python scripts/bench_training.py --docs {args.docs} --iterations {args.iterations} "
        f"--c2 {args.c2:g} --threads {args.threads}`: {len(train)} training sentences, {tokens} tokens; torch threads "
        f"{torch.get_num_threads()}\n"
    )
    head = (
        "| trainer | train s | L-BFGS iterations | evaluations | tokens/s | CPU s | tokens/CPU s "
        "| objective | test acc | test F1 |"
    )
    print(head)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        tps = tokens * r["evals"] / r["seconds"]
        cps = tokens * r["evals"] / r["cpu"]
        print(
            f"| {name} | {r['seconds']:.2f} | {r['iterations']} | {r['evals']} | {tps:,.0f} | "
            f"{r['cpu']:.2f} | {cps:,.0f} | "
            f"{r['objective']:.1f} | {r['accuracy']:.4f} | {r['f1']:.4f} |"
        )


if __name__ == "__main__":
    main()
