"""The seed's finance case study: HMM, causal MEMM, CRF and averaged perceptron at 3/10/30 documents.

    python scripts/finance_table.py                         # 5 corpus runs per cell, profile "seed"
    python scripts/finance_table.py --lab                   # also the lab's Finance tab
    python scripts/finance_table.py --profile default --runs 1 --no-tune   # the earlier table

Every cell trains a shipped config (``configs/finance/{hmm,memm,indicator_crf,perceptron}.yaml``) on
the first n documents of corpus run 2r and tests on 200 documents of run 2r + 1, for r < ``--runs``
(:mod:`crfhead.theory.finance_study`: the MEMM's learning rate is chosen on dev, epochs by the best
dev checkpoint). Writes ``finance.md`` (mean ± standard deviation, the seed's numbers beside them,
what the unseen tokens are, and which of the seed's orderings hold) and ``finance.json`` (every
run's report) to ``--out-dir`` (default ``docs/results``); ``--lab`` also writes the lab's
``finance.json`` from the same computation.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from crfhead.theory.finance_study import TAGGERS, markdown, orderings, study  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the study, write the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, nargs="+", default=[3, 10, 30])
    parser.add_argument("--taggers", nargs="+", default=list(TAGGERS), choices=list(TAGGERS))
    parser.add_argument("--runs", type=int, default=5, help="corpus runs per cell (default 5)")
    parser.add_argument("--profile", default="seed", help="the generator's profile (default seed)")
    parser.add_argument("--no-tune", action="store_true", help="the configs' learning rates")
    parser.add_argument("--test-docs", type=int, default=None, help="test documents (default 200)")
    parser.add_argument("--max-epochs", type=int, default=None, help="default: each config's")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "results")
    parser.add_argument("--lab", action="store_true", help="also write the lab's Finance tab")
    args = parser.parse_args(argv)
    overrides = []
    if args.test_docs is not None:
        overrides.append(f"--data.corpus.init_args.test_docs={args.test_docs}")
    if args.max_epochs is not None:
        overrides.append(f"--trainer.max_epochs={args.max_epochs}")
    out_dir = args.out_dir.resolve()
    command = shlex.join(
        ["python", "scripts/finance_table.py", *(sys.argv[1:] if argv is None else argv)]
    )
    start = time.perf_counter()
    result = study(
        args.docs,
        args.taggers,
        args.runs,
        args.profile,
        tune=not args.no_tune,
        overrides=overrides,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    result["seconds"] = time.perf_counter() - start
    result["command"] = command
    result["orderings"] = orderings(result)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = markdown(result, command)
    (out_dir / "finance.md").write_text(text)
    (out_dir / "finance.json").write_text(json.dumps(result, indent=1) + "\n")
    print(text)
    print(f"{out_dir / 'finance.md'}, {out_dir / 'finance.json'} ({result['seconds']:.0f} s)")
    if args.lab:
        from crfhead.lab.payloads import finance_payload

        sys.path.insert(0, str(ROOT / "scripts"))
        from lab_payloads import DATA, write

        payload = finance_payload(
            args.docs,
            args.taggers,
            args.runs,
            args.profile,
            not args.no_tune,
            overrides,
            result={k: v for k, v in result.items() if k not in ("seconds", "command")},
        )
        print(write("finance", payload, DATA, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
