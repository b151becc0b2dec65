"""``crfhead export``: write a model's decoder as a ``torch.export`` program or ONNX.

The export itself is :func:`crfhead.inference.export.export_decoder`; this module parses the options,
checks what can be checked before the model is loaded (the format's extra, the output path) and
reports progress on stderr.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from crfhead.cli.common import Subparsers, formatter, load_tagger, positive, say
from crfhead.inference.export import EXPORT_FORMATS, export_decoder, export_format, require_onnx

__all__ = ["add_parser", "run"]


def add_parser(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    """Add ``export`` and its options."""
    parser = sub.add_parser(
        "export",
        parents=[common],
        formatter_class=formatter,
        help="write the model's decoder as a torch.export program or ONNX",
        description=(
            "Write the model's decoder: emissions (B, T, K) float32 and mask (B, T) bool to\n"
            "paths (B, T) int64 (-1 where masked); the batch size is dynamic. A torch\n"
            "program whose decoder runs as the CPU kernel's custom ops serves every length\n"
            "T (labels.json: dynamic_length); otherwise (ONNX, decoders that loop over time)\n"
            "T is fixed (--length): pad shorter sequences with mask False. The labels travel inside\n"
            "(torch: extra file labels.json; ONNX: metadata 'crfhead')."
        ),
    )
    parser.add_argument("--model", "--checkpoint", dest="model", required=True, metavar="PATH")
    parser.add_argument("--output", required=True, metavar="FILE", help="e.g. decoder.pt2")
    parser.add_argument(
        "--format", choices=EXPORT_FORMATS, help="default: onnx for a .onnx output, else torch"
    )
    parser.add_argument(
        "--length", type=positive, default=128, metavar="T", help="sequence length (default 128)"
    )


def run(ns: argparse.Namespace) -> int:
    """Export ``ns.model``'s decoder to ``ns.output``; returns the exit status (0).

    Raises:
        ImportError: ONNX without its extra installed.
        IsADirectoryError: the output is a folder.
    """
    out = Path(ns.output)
    fmt = export_format(out, ns.format)
    if fmt == "onnx":
        require_onnx()
    if out.is_dir():
        raise IsADirectoryError(f"output is a folder, not a file: {out}")
    tagger = load_tagger(ns.model, "cpu")
    export_decoder(tagger, out, fmt=fmt, length=ns.length, verbose=ns.verbose, log=say)
    say(f"wrote {out}")
    return 0
