"""``crfhead evaluate``: score a model on a labelled CoNLL file and print the report training prints.

The file is read by :func:`crfhead.data.conll.read_conll` (its tags converted to the model's scheme)
and scored by :func:`crfhead.inference.scoring.score_sentences`.
"""

from __future__ import annotations

import argparse
import sys

from crfhead.cli.common import Subparsers, add_model_options, formatter, load_tagger, say
from crfhead.data.textfile import require_file
from crfhead.inference.text_tagger import GROUP_MODES

__all__ = ["add_parser", "run"]


def add_parser(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    """Add ``evaluate`` and its options."""
    parser = sub.add_parser(
        "evaluate",
        parents=[common],
        formatter_class=formatter,
        help="score a model on a labelled CoNLL file (training's test report)",
        description="Score a model on a labelled CoNLL file and print the report training prints.",
    )
    add_model_options(parser)
    parser.add_argument("--input", required=True, metavar="FILE", help="a labelled CoNLL file")
    parser.add_argument("--tag-column", type=int, default=-1, metavar="N", help="default: last")
    parser.add_argument("--token-column", type=int, default=0, metavar="N", help="default: 0")
    parser.add_argument(
        "--scheme", default=None, help="the file's tagging scheme (default: the model's)"
    )
    parser.add_argument("--separator", default=None, metavar="SEP", help="default: whitespace")
    parser.add_argument(
        "--group",
        choices=GROUP_MODES,
        default="none",
        help="which sentences a higher-order model decodes jointly: none (each alone, default), "
        "all, document (-DOCSTART- documents), auto (the model's training grouping); the report "
        "then has the fraction of certified groups",
    )
    parser.add_argument("--output-json", default=None, metavar="FILE", help="also save as JSON")


def run(ns: argparse.Namespace) -> int:
    """Score ``ns.model`` on ``ns.input``; the report on stdout. Returns the exit status (0).

    Raises:
        FileNotFoundError: no input file.
        IsADirectoryError: the input is a folder.
        ValueError: a file with no sentences; what the reader refuses.
    """
    from crfhead.data.conll import read_conll
    from crfhead.evaluation.report import format_report, write_report_json
    from crfhead.inference.scoring import score_sentences

    tagger = load_tagger(ns.model, ns.device)
    scheme = tagger.scheme or "BIO"
    path = require_file(ns.input, "input")  # a FIFO or /dev/stdin is read like a file
    sentences, _ = read_conll(
        path,
        token_col=ns.token_column,
        tag_col=ns.tag_column,
        scheme=ns.scheme or scheme,
        out_scheme=scheme,
        separator=ns.separator,
    )
    if not sentences:
        raise ValueError(f"{path}: no sentences to score")
    scores = score_sentences(tagger, sentences, batch_size=ns.batch_size, group=ns.group)
    if scores.unknown_tags:
        say(
            f"note: gold tags the model does not have: {scores.unknown_tags[:10]}; "
            "no log-loss reported"
        )
    report = scores.report
    types = set(tagger.entity_types)
    types |= {key[: -len("/f1")] for key in report if key.endswith("/f1")}
    print(
        f"{path}: {len(sentences)} sentences, {sum(len(s) for s in sentences)} tokens, "
        f"scored with {ns.model}",
        file=sys.stderr,
    )
    print(format_report(report, sorted(types)))
    if ns.output_json:
        write_report_json(report, ns.output_json)
        say(f"report written to {ns.output_json}")
    return 0
