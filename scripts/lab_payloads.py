"""Write the lab's payloads: one JSON file per tab in ``crfhead/lab/static/data/``.

    python scripts/lab_payloads.py                       # every tab (the finance tab trains 12 models)
    python scripts/lab_payloads.py --only trellis perceptron
    python scripts/lab_payloads.py --only finance --args '{"docs": [3]}'   # other arguments

Each file is :data:`crfhead.lab.payloads.PAYLOADS` ``[tab](**arguments)`` plus ``command``, the command
line that wrote it; ``tests/lab/test_payloads.py`` keeps the files equal to the functions, floats at a
stated tolerance (the slow tabs only under ``pytest --full``). The keys are documented in ``crfhead/lab/static/data/SCHEMA.md``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from crfhead.lab.payloads import PAYLOADS

DATA = Path(__file__).resolve().parents[1] / "crfhead" / "lab" / "static" / "data"


def write(tab: str, payload: dict[str, object], out: Path, command: str) -> Path:
    """Write ``payload`` (with ``command``) to ``out/<tab>.json``; the path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{tab}.json"
    path.write_text(json.dumps({**payload, "command": command}, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and write the payloads."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=list(PAYLOADS), help="these tabs only")
    parser.add_argument(
        "--args", default="{}", help="JSON keyword arguments for the (single) tab of --only"
    )
    parser.add_argument("--out", type=Path, default=DATA, help="the folder written")
    args = parser.parse_args(argv)
    tabs = args.only or list(PAYLOADS)
    kwargs = json.loads(args.args)
    if kwargs and len(tabs) != 1:
        parser.error("--args needs exactly one tab in --only")
    command = shlex.join(
        ["python", "scripts/lab_payloads.py", *(sys.argv[1:] if argv is None else argv)]
    )
    for tab in tabs:
        start = time.perf_counter()
        path = write(tab, PAYLOADS[tab](**kwargs), args.out, command)
        print(f"{tab}: {path} ({time.perf_counter() - start:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
