"""``crfhead predict``: tag plain text, CoNLL or JSON lines with a trained model.

Input is read by :mod:`crfhead.data.inputs` (a file or stdin). CoNLL out of CoNLL in echoes every
input line (every column, the gold tags, ``-DOCSTART-`` and blank lines) and appends the prediction
as a new last column (:func:`crfhead.data.conll.echo_conll`), so the output is scored as it is;
CoNLL out of other input is ``token tag`` lines; JSON lines out carry each entity's character offsets
and exact span probability (:mod:`crfhead.data.outputs`). Output that only broken weights produce is
refused by :class:`~crfhead.inference.TextTagger`, and nothing is written then.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from crfhead.cli.common import Subparsers, add_model_options, formatter, load_tagger
from crfhead.data.conll import echo_conll
from crfhead.data.inputs import INPUT_FORMATS, STDIN, input_format, read_input
from crfhead.data.outputs import OUTPUT_FORMATS, STDOUT, json_line, token_tag_lines, write_lines
from crfhead.inference.text_tagger import GROUP_MODES

__all__ = ["add_parser", "run"]


def add_parser(sub: Subparsers, common: argparse.ArgumentParser) -> None:
    """Add ``predict`` and its options."""
    parser = sub.add_parser(
        "predict",
        parents=[common],
        formatter_class=formatter,
        help="tag text, CoNLL or JSON lines with a trained model",
        description=(
            "Tag raw text (one text per line), CoNLL (first column the token) or JSON lines\n"
            '(objects with "text" or "tokens"). CoNLL out keeps every input line and column and\n'
            "appends the predicted tag; JSON lines out: text, tokens, tags and entities with\n"
            "character offsets and exact span probabilities."
        ),
    )
    add_model_options(parser)
    parser.add_argument(
        "--input", default=STDIN, metavar="FILE", help="the input file, or - for stdin (default)"
    )
    parser.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        help="default: from the file name (.conll conll, .jsonl jsonl, else text); stdin: text",
    )
    parser.add_argument(
        "--output",
        default=STDOUT,
        metavar="FILE",
        help="the output file, or - for stdout (default)",
    )
    parser.add_argument(
        "--output-format",
        choices=OUTPUT_FORMATS,
        help="default: conll for CoNLL input, else jsonl",
    )
    parser.add_argument(
        "--tokenized",
        action="store_true",
        help="text input is already tokenised: split each line on whitespace, no tokenizer",
    )
    parser.add_argument(
        "--group",
        choices=GROUP_MODES,
        default="none",
        help="which inputs a higher-order model decodes jointly: none (each alone, default), all "
        "(one group), document (CoNLL -DOCSTART- documents), auto (the grouping the model was "
        "trained with); JSON lines out say whether each group was certified",
    )
    parser.add_argument(
        "--separator",
        default=None,
        metavar="SEP",
        help="CoNLL column separator (default: runs of spaces and tabs; the added column copies a "
        "tab)",
    )


def run(ns: argparse.Namespace) -> int:
    """Tag ``ns.input`` with ``ns.model`` and write ``ns.output``; returns the exit status (0).

    Raises:
        IsADirectoryError: the output is a folder.
        ValueError: raw text for a model whose tokenizer is unknown; what the reader refuses.
    """
    fmt = input_format(ns.input, ns.input_format)
    out_fmt = ns.output_format or ("conll" if fmt == "conll" else "jsonl")
    if ns.output != STDOUT and Path(ns.output).is_dir():
        raise IsADirectoryError(f"output is a folder, not a file: {ns.output}")
    tagger = load_tagger(ns.model, ns.device)
    read = read_input(ns.input, fmt, separator=ns.separator, tokenized=ns.tokenized)
    if tagger.tokenizer is None and any(isinstance(item, str) for item in read.items):
        raise ValueError(
            f"{ns.model}: the tokenizer this model was trained with is unknown, so raw text "
            "cannot be tokenised as its training data was; give tokens instead (--tokenized, "
            'CoNLL input, or JSON lines with "tokens")'
        )
    if ns.group == "document" and fmt != "conll":
        raise ValueError("--group document needs CoNLL input (documents by -DOCSTART-)")
    if fmt == "conll":
        tagged = tagger.predict_sentences(read.sentences, batch_size=ns.batch_size, group=ns.group)
    else:
        tagged = tagger.annotate(read.items, batch_size=ns.batch_size, group=ns.group)
    if out_fmt == "jsonl":
        lines = [json_line(r.to_dict(), ident) for r, ident in zip(tagged, read.ids, strict=True)]
    elif fmt == "conll":
        tags = [tag for record in tagged for tag in record.tags]
        lines = echo_conll(read.lines, read.token_lines, tags, ns.separator)
    else:
        lines = token_tag_lines((r.text, r.tokens, r.tags) for r in tagged)
    write_lines(ns.output, lines)
    return 0
