"""Write ``docs/trellis.json``: the "Decoding risk" trellis payload of :func:`crfhead.theory.payload.viz_payload`.

``tests/theory/test_experiments.py`` requires the file to equal the function's output exactly, so rerun this
script whenever :mod:`crfhead.theory.worlds` changes.

    python scripts/trellis_payload.py [--out docs/trellis.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from crfhead.theory.payload import viz_payload

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "docs" / "trellis.json"


def render() -> str:
    """The file's exact text: sorted keys, indent 1, a final newline."""
    return json.dumps(viz_payload(), indent=1, sort_keys=True) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render())
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
