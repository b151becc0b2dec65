"""The seed's finance case study: HMM, causal MEMM, CRF and averaged perceptron at 3/10/30 documents.

    python scripts/finance_table.py [--docs 3 10 30] [--out runs/finance_table.json]

Each cell trains the shipped config (``configs/finance/{hmm,memm,indicator_crf,perceptron}.yaml``)
through ``train.py`` on the first ``n`` training documents of corpus run 0 and tests on 200 documents of
run 1, printing token accuracy / span F1 (and accuracy on words unseen in training) as a markdown
table. Every tagger but the HMM sees the same indicator features (the MEMM only the left context).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from train import main  # noqa: E402

TAGGERS = {
    "HMM": "hmm",
    "causal MEMM": "memm",
    "CRF": "indicator_crf",
    "perceptron": "perceptron",
}


def run(
    config: str,
    docs: int,
    root: Path,
    test_docs: int | None = None,
    max_epochs: int | None = None,
) -> dict[str, float]:
    """Train and test one config on ``docs`` training documents; the test report.

    ``test_docs`` and ``max_epochs`` override the config's (for a quick check: the table's numbers use
    the configs as shipped).
    """
    out = root / f"{config}_{docs}"
    extra = []
    if test_docs is not None:
        extra.append(f"--data.corpus.init_args.test_docs={test_docs}")
    if max_epochs is not None:
        extra.append(f"--trainer.max_epochs={max_epochs}")
    cli = main(
        [
            "--config",
            str(ROOT / "configs" / "finance" / f"{config}.yaml"),
            f"--data.corpus.init_args.train_docs={docs}",
            f"--trainer.default_root_dir={out}",
            f"--trainer.logger.init_args.save_dir={out}",
            "--trainer.enable_progress_bar=false",
            *extra,
        ]
    )
    return dict(cli.model.test_report)


def main_table() -> None:
    """Parse arguments, run the grid, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, nargs="+", default=[3, 10, 30])
    parser.add_argument("--out", type=Path, default=None, help="write the reports as JSON here")
    parser.add_argument("--test-docs", type=int, default=None, help="test documents (default 200)")
    parser.add_argument("--max-epochs", type=int, default=None, help="default: each config's")
    args = parser.parse_args()
    reports: dict[str, dict[int, dict[str, float]]] = {name: {} for name in TAGGERS}
    seconds: dict[str, dict[int, float]] = {name: {} for name in TAGGERS}
    out_file = args.out.resolve() if args.out is not None else None
    with tempfile.TemporaryDirectory() as tmp:
        # Run from the scratch folder: the configs' relative paths (runs/...) stay inside it.
        os.chdir(tmp)
        for docs in args.docs:
            for name, config in TAGGERS.items():
                start = time.perf_counter()
                reports[name][docs] = run(config, docs, Path(tmp), args.test_docs, args.max_epochs)
                seconds[name][docs] = time.perf_counter() - start
    print(f"\n`python scripts/finance_table.py --docs {' '.join(map(str, args.docs))}`\n")
    print("accuracy / span F1 (unseen-word accuracy) on 200 test documents; train seconds\n")
    print("| docs | " + " | ".join(TAGGERS) + " |")
    print("|---|" + "---|" * len(TAGGERS))
    for docs in args.docs:
        cells = []
        for name in TAGGERS:
            r = reports[name][docs]
            cells.append(
                f"{r['accuracy']:.3f} / {r['f1']:.3f} ({r.get('unseen_accuracy', float('nan')):.3f}); "
                f"{seconds[name][docs]:.0f} s"
            )
        print(f"| {docs} | " + " | ".join(cells) + " |")
    if out_file is not None:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_text(json.dumps({"reports": reports, "seconds": seconds}, indent=1))


if __name__ == "__main__":
    main_table()
