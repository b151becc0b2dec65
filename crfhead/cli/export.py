"""``crfhead export``: write a trained model (encoder + head) as a ``torch.export`` program or ONNX.

The export itself is :func:`crfhead.inference.export.export_model` (``--decoder-only``:
:func:`~crfhead.inference.export.export_decoder`); this module parses the options, checks what can be
checked before the model is loaded (the format's extra, the output path) and reports progress on
stderr.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from crfhead.cli.common import Subparsers, formatter, load_tagger, positive, say
from crfhead.inference.export import (
    EXPORT_FORMATS,
    export_decoder,
    export_format,
    export_model,
    require_onnx,
)

__all__ = ["add_parser", "run"]


def add_parser(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    """Add ``export`` and its options."""
    parser = sub.add_parser(
        "export",
        parents=[common],
        formatter_class=formatter,
        help="write the model (encoder + head) as a torch.export program or ONNX",
        description=(
            "Write the whole model: the tensors of its batch (words, chars, features: those\n"
            "it reads, int64; mask, bool) to the decoded tags (B, T) int64 (-1 where masked)\n"
            "and, for probability heads, the marginals (B, T, K), log Z (B,) and the chain\n"
            "potentials (exact span probabilities). Batch size and length are dynamic (torch:\n"
            "crfhead's custom ops; ONNX: Scan loops), up to --max-length if given. The\n"
            "vocabularies and tokenizer travel inside, so in any process\n"
            "  crfhead.load_exported(FILE).tag(texts)\n"
            "tags raw text as the model does. --decoder-only writes the head's decoder alone\n"
            "(emissions (B, T, K) float32 and mask to paths; --length: the example's T)."
        ),
    )
    parser.add_argument("--model", "--checkpoint", dest="model", required=True, metavar="PATH")
    parser.add_argument("--output", required=True, metavar="FILE", help="e.g. model.pt2")
    parser.add_argument(
        "--format", choices=EXPORT_FORMATS, help="default: onnx for a .onnx output, else torch"
    )
    parser.add_argument(
        "--max-length",
        type=positive,
        default=None,
        metavar="T",
        help="the longest sentence the export takes (default: any length)",
    )
    parser.add_argument(
        "--decoder-only",
        action="store_true",
        help="export the head's decoder alone (emissions and mask in, paths out)",
    )
    parser.add_argument(
        "--length",
        type=positive,
        default=128,
        metavar="T",
        help="--decoder-only: the example's length (the fixed one where T cannot vary; default 128)",
    )


def run(ns: argparse.Namespace) -> int:
    """Export ``ns.model`` to ``ns.output``; returns the exit status (0).

    Raises:
        ImportError: ONNX without its extra installed.
        IsADirectoryError: the output is a folder.
        ValueError: an encoder that cannot be exported, or ``--max-length 1``.
    """
    out = Path(ns.output)
    fmt = export_format(out, ns.format)
    if fmt == "onnx":
        require_onnx()
    if out.is_dir():
        raise IsADirectoryError(f"output is a folder, not a file: {out}")
    tagger = load_tagger(ns.model, "cpu")
    if ns.decoder_only:
        export_decoder(tagger, out, fmt=fmt, length=ns.length, verbose=ns.verbose, log=say)
    else:
        export_model(tagger, out, fmt=fmt, max_length=ns.max_length, verbose=ns.verbose, log=say)
    say(f"wrote {out}")
    return 0
