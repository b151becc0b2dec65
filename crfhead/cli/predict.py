"""``crfhead predict``: tag plain text, CoNLL or JSON lines with a trained model.

Input is read by :mod:`crfhead.data.inputs` (a file or stdin). CoNLL out of CoNLL in echoes every
input line (every column, the gold tags, ``-DOCSTART-`` and blank lines) and appends the prediction
as a new last column (:func:`crfhead.data.conll.echo_conll`), so the output is scored as it is;
CoNLL out of other input is ``token tag`` lines; JSON lines out carry each entity's character offsets
and exact span probability (:mod:`crfhead.data.outputs`).

The input is tagged as it arrives (:class:`crfhead.data.inputs.InputStream`): in batches of
``--batch-size`` records, a batch ended early whenever the input has nothing more ready, each batch's
lines written and flushed as soon as it is tagged; so ``crfhead predict`` answers each line of an
interactive or slow pipe at once, and reads a file ``--batch-size`` records at a time. Text and JSON
lines give exactly one output line per input line: a blank line gives a record with nothing in it
(JSON lines: ``{"text": "", "tokens": [], "tags": [], "entities": []}``; ``token tag`` output: an
empty sentence, one blank line). CoNLL is tagged sentence by sentence, each echoed once the blank
line after it is read. With ``--group`` other than ``none`` the whole input is read first (a group
decoder decodes its texts jointly). At the end stderr says ``read N lines, wrote M lines`` (an error
is its one line instead).

An error in the input (a malformed JSON line, bytes that are not UTF-8, a bad CoNLL line) names the
file and line and exits with status 2 when the reader reaches it; every line before it has been
tagged and written by then (the output holds exactly the records of the lines before it). Output
that only broken weights produce is refused by :class:`~crfhead.inference.TextTagger`: that batch is
not written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from crfhead.cli.common import Subparsers, add_model_options, formatter, load_tagger, say
from crfhead.data.conll import echo_conll, token_lines
from crfhead.data.inputs import INPUT_FORMATS, STDIN, InputRecord, batches, input_format, open_input
from crfhead.data.outputs import (
    EMPTY_RECORD,
    OUTPUT_FORMATS,
    STDOUT,
    LineWriter,
    json_line,
    token_tag_lines,
)
from crfhead.inference.text_tagger import GROUP_MODES

if TYPE_CHECKING:
    from crfhead.inference import TextTagger

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
            "character offsets and exact span probabilities.\n\n"
            "Input is tagged as it arrives, --batch-size records at a time at most, each batch\n"
            "written at once (a slow pipe is answered line by line). Text and JSON lines give one\n"
            "output line per input line: a blank line gives an empty record (an empty sentence,\n"
            "one blank line, in token-tag output). A malformed line exits with status 2 after\n"
            "every line before it was written. stderr ends with the counts of lines read and\n"
            "written."
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
    """Tag ``ns.input`` with ``ns.model`` and write ``ns.output`` as the input arrives; returns 0.

    Raises:
        IsADirectoryError: the output is a folder.
        ValueError: raw text for a model whose tokenizer is unknown; what the reader refuses (the
            output then holds every line before the offending one).
    """
    fmt = input_format(ns.input, ns.input_format)
    out_fmt = ns.output_format or ("conll" if fmt == "conll" else "jsonl")
    if ns.output != STDOUT and Path(ns.output).is_dir():
        raise IsADirectoryError(f"output is a folder, not a file: {ns.output}")
    if ns.group == "document" and fmt != "conll":
        raise ValueError("--group document needs CoNLL input (documents by -DOCSTART-)")
    tagger = load_tagger(ns.model, ns.device)
    if fmt == "text" and not ns.tokenized:
        _refuse_raw_text(tagger, ns.model)
    # A group decoder decodes its texts jointly: the whole input is one batch then.
    streaming = ns.group == "none"
    size = (ns.batch_size or tagger.batch_size) if streaming else sys.maxsize
    with (
        open_input(ns.input, fmt, separator=ns.separator, tokenized=ns.tokenized) as source,
        LineWriter(ns.output) as out,
    ):
        for batch in batches(source, size, source.ready if streaming else lambda: True):
            out.write(_tagged_lines(tagger, batch, ns, fmt, out_fmt))
    # On an error the one error line names the input line; every line before it was written.
    say(f"read {source.lines_read} lines, wrote {out.written} lines")
    return 0


def _refuse_raw_text(tagger: TextTagger, model: str) -> None:
    """Raise if ``tagger`` cannot tokenise raw text (its tokenizer is unknown)."""
    if tagger.tokenizer is None:
        raise ValueError(
            f"{model}: the tokenizer this model was trained with is unknown, so raw text "
            "cannot be tokenised as its training data was; give tokens instead (--tokenized, "
            'CoNLL input, or JSON lines with "tokens")'
        )


def _tagged_lines(
    tagger: TextTagger, batch: list[InputRecord], ns: argparse.Namespace, fmt: str, out_fmt: str
) -> list[str]:
    """The output lines of one batch of records, in input order (one per line for text and JSONL)."""
    todo = [record for record in batch if record.item is not None]
    if any(isinstance(record.item, str) for record in todo):
        _refuse_raw_text(tagger, ns.model)
    if fmt == "conll":
        sentences = [r.sentence for r in todo if r.sentence is not None]
        tagged = tagger.predict_sentences(
            sentences, batch_size=ns.batch_size, progress=False, group=ns.group
        )
    else:
        items = [r.item for r in todo if r.item is not None]
        tagged = tagger.annotate(items, batch_size=ns.batch_size, progress=False, group=ns.group)
    done = iter(tagged)
    lines: list[str] = []
    for record in batch:
        result = None if record.item is None else next(done)
        if out_fmt == "jsonl":
            if result is not None:
                lines.append(json_line(result.to_dict(), record.ident))
            elif fmt != "conll":  # a blank line: a record with nothing in it
                lines.append(json_line(EMPTY_RECORD, None))
        elif fmt == "conll":
            at = token_lines(record.lines, separator=ns.separator)
            tags = [] if result is None else result.tags
            lines.extend(echo_conll(record.lines, at, tags, ns.separator))
        elif result is None:
            lines.append("")  # an empty sentence: its blank line
        else:
            lines.extend(token_tag_lines([(result.text, result.tokens, result.tags)]))
    return lines
