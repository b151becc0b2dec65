"""Time and memory of exact span probabilities on long documents (issue 28): windows vs clamped chains.

For each document length ``T`` (default 960, 5,000 and 20,000 words) it builds one constrained BIO
chain with ``K = 9`` (4 entity types; emissions N(0, 2^2), transitions N(0, 1) where the scheme
allows them) and ``T // 10`` random spans (80% of 1 to 4 words, the others up to 100; ``--spans-per-word``
changes the count), then times :func:`crfhead.evaluation.spans.span_probabilities_from` (one blocked
forward-backward and a window per case) and, with ``--old``, the clamped-chain implementation it
replaced (``tests/evaluation/span_oracle.py``: one full-length chain per case). Each measurement runs
in a fresh process, so the peak resident memory it reports (``ru_maxrss`` after the call less before
it, the inputs already built) is that call's alone; the old one runs under an address-space limit
(``--old-limit-gib``, default 8) and is reported as out of memory when it needs more. With
``--old`` it also prints the largest difference between the two answers.

Run on an idle machine; the load average is printed first. ``--threads`` sets torch's intra-op
thread count in the measuring processes (default: torch's default).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_MEASURE = r"""
import json, math, resource, sys, time
import torch
sys.path.insert(0, {oracle!r})
from crfhead.engine.potentials import make_potentials
from crfhead.schemes import Span, allowed_transitions
if {threads} > 0:
    torch.set_num_threads({threads})
if {limit} > 0:
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
labels = ["O"] + [f"{{r}}-{{t}}" for t in ("PER", "ORG", "LOC", "MISC") for r in "BI"]
T, K = {T}, len(labels)
g = torch.Generator().manual_seed(0)
ok_t, ok_s, ok_e = allowed_transitions(labels, "BIO")
E = torch.randn(1, T, K, generator=g, dtype=torch.float64) * 2.0
Tr = torch.where(ok_t, torch.randn(K, K, generator=g, dtype=torch.float64), -math.inf)
pot = make_potentials(
    E, Tr, torch.where(ok_s, 0.0, -math.inf).double(), torch.where(ok_e, 0.0, -math.inf).double()
)
spans = []
for _ in range(int(T * {per_word})):
    short = bool(torch.rand(1, generator=g) < 0.8)
    length = int(torch.randint(0, 4 if short else 100, (1,), generator=g))
    s = int(torch.randint(0, T, (1,), generator=g))
    typ = ("PER", "ORG", "LOC", "MISC")[int(torch.randint(0, 4, (1,), generator=g))]
    spans.append(Span(typ, s, min(T - 1, s + length)))
if {old}:
    from span_oracle import old_span_probabilities_from as run
else:
    from crfhead.evaluation.spans import span_probabilities_from as run
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
try:
    probs = run(pot, [spans], labels, "BIO")[0]
    failed = None
except (MemoryError, RuntimeError) as err:
    probs, failed = [], str(err).splitlines()[0][:120]
seconds = time.perf_counter() - start
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({{"seconds": seconds, "peak_mib": grown / 1024, "spans": len(spans),
                  "threads": torch.get_num_threads(), "failed": failed, "probs": probs}}))
"""


def measure(T: int, old: bool, per_word: float, threads: int, limit_gib: float) -> dict:
    """One measurement in a fresh process (see the module docstring)."""
    code = _MEASURE.format(
        oracle=str(ROOT / "tests" / "evaluation"),
        threads=threads,
        limit=int(limit_gib * 2**30) if old else 0,
        T=T,
        per_word=per_word,
        old=old,
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    if out.returncode != 0:
        return {"failed": (out.stderr.strip().splitlines() or ["killed"])[-1][:120]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    """Parse the arguments, measure, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[960, 5000, 20000])
    parser.add_argument("--old", action="store_true", help="also the clamped chains it replaced")
    parser.add_argument("--spans-per-word", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: the default)")
    parser.add_argument("--old-limit-gib", type=float, default=8.0)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'T':>7} {'spans':>6} {'new s':>8} {'new MiB':>8}", end="")
    print(f" {'old s':>8} {'old MiB':>8} {'max |diff|':>11}" if args.old else "")
    for T in args.lengths:
        new = measure(T, False, args.spans_per_word, args.threads, 0.0)
        if new.get("failed"):
            print(f"{T:>7} new failed: {new['failed']}")
            continue
        line = f"{T:>7} {new['spans']:>6} {new['seconds']:>8.3f} {new['peak_mib']:>8.1f}"
        if args.old:
            old = measure(T, True, args.spans_per_word, args.threads, args.old_limit_gib)
            if old.get("failed"):
                line += f"  old failed ({args.old_limit_gib:g} GiB limit): {old['failed']}"
            else:
                diff = max(
                    (abs(a - b) for a, b in zip(new["probs"], old["probs"], strict=True)),
                    default=0.0,
                )
                line += f" {old['seconds']:>8.3f} {old['peak_mib']:>8.1f} {diff:>11.2e}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
