"""The ``crfhead`` command: train, test, tag, score and export models from the shell.

``crfhead train | test | fit | validate ARGS`` hand ``ARGS`` untouched to the LightningCLI of
``train.py`` (:func:`crfhead.training.cli.main`; ``train`` is fit then test, as ``train.py`` runs).
The other subcommands use a trained model, a training checkpoint or a folder written by
``TextTagger.save`` (:func:`crfhead.load`):

* ``predict`` tags raw text (one text per line), CoNLL (first column the token) or JSON lines (objects
  with ``"text"`` or ``"tokens"``), from a file or stdin. CoNLL out echoes every input line (every
  column, the gold tags, ``-DOCSTART-`` and blank lines) and appends the prediction as a new last
  column, so the output is scored as it is (conlleval, or ``crfhead evaluate --tag-column -1`` style
  readers); JSON lines out carry each entity's character offsets and exact span probability.
  Output that only broken weights produce (tags the scheme forbids, a probability outside [0, 1]) is
  refused (:class:`~crfhead.inference.TextTagger` checks every record), and nothing is written then.
* ``evaluate`` scores a model on a labelled CoNLL file and prints the table training prints.
* ``export`` writes the model's decoder, emissions ``(B, T, K)`` and mask ``(B, T)`` to paths
  ``(B, T)``, as a ``torch.export`` program or ONNX: the part of a tagger that is not an ordinary
  network, so it is what a serving stack needs from crfhead.
* ``configs`` lists the configs shipped with crfhead.
* ``lab`` serves the interactive lab on 127.0.0.1 (:mod:`crfhead.lab`; ``--model PATH`` for the
  "Your model" tab).

Errors a user can act on (a missing file, a file that is not a model, a malformed input line) print
one line, ``crfhead: error: ...``, and exit with status 2; ``--verbose`` shows the traceback.
Importing this module imports neither Lightning nor transformers: each subcommand imports what it
needs, so ``crfhead --help`` and ``crfhead configs`` answer at once.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from crfhead.data.sentence import Sentence
    from crfhead.inference import Tagged, TextTagger

__all__ = [
    "INPUT_FORMATS",
    "OUTPUT_FORMATS",
    "PASSTHROUGH",
    "build_parser",
    "main",
    "run",
]

PROG = "crfhead"
PASSTHROUGH: dict[str, str] = {
    "train": "fit, then test the best checkpoint (train.py's arguments: --config FILE ...)",
    "test": "test a checkpoint (--config FILE --ckpt_path CKPT)",
    "fit": "fit only (train.py's arguments)",
    "validate": "validate a checkpoint (--config FILE --ckpt_path CKPT)",
}
"""Subcommands whose arguments go untouched to :func:`crfhead.training.cli.main`."""
INPUT_FORMATS = ("text", "conll", "jsonl")
OUTPUT_FORMATS = ("conll", "jsonl")
EXPORT_FORMATS = ("torch", "onnx")
DOCSTART = "-DOCSTART-"
_SUFFIX_FORMATS = {".conll": "conll", ".iob": "conll", ".bio": "conll", ".jsonl": "jsonl"}
_SUFFIX_FORMATS |= {".json": "jsonl", ".ndjson": "jsonl"}
_USER_ERRORS = (OSError, ValueError, ImportError)
"""Errors reported in one line with exit status 2; anything else is a bug: status 1."""


class _CommandError(Exception):
    """An error of the command line itself (a format that cannot be used, a missing extra)."""


# ----------------------------------------------------------------------------- the parser
def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand but the pass-through ones (listed in the help only)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Neural sequence tagging with structured heads: train, tag, score, export.",
        epilog="Run 'crfhead SUBCOMMAND --help' for a subcommand's options.",
        formatter_class=_formatter,
    )
    parser.add_argument("--verbose", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND")
    for name, text in PASSTHROUGH.items():
        sub.add_parser(name, help=text, add_help=False)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )

    def model_options(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--model",
            "--checkpoint",
            dest="model",
            required=True,
            metavar="PATH",
            help="a training checkpoint (.ckpt) or a folder written by TextTagger.save()",
        )
        p.add_argument("--device", default=None, help="e.g. cpu, cuda, cuda:1 (default: cpu)")
        p.add_argument("--batch-size", type=_positive, default=64, metavar="N")

    predict = sub.add_parser(
        "predict",
        parents=[common],
        formatter_class=_formatter,
        help="tag text, CoNLL or JSON lines with a trained model",
        description=(
            "Tag raw text (one text per line), CoNLL (first column the token) or JSON lines\n"
            '(objects with "text" or "tokens"). CoNLL out keeps every input line and column and\n'
            "appends the predicted tag; JSON lines out: text, tokens, tags and entities with\n"
            "character offsets and exact span probabilities."
        ),
    )
    model_options(predict)
    predict.add_argument(
        "--input", default="-", metavar="FILE", help="the input file, or - for stdin (default)"
    )
    predict.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        help="default: from the file name (.conll conll, .jsonl jsonl, else text); stdin: text",
    )
    predict.add_argument(
        "--output", default="-", metavar="FILE", help="the output file, or - for stdout (default)"
    )
    predict.add_argument(
        "--output-format",
        choices=OUTPUT_FORMATS,
        help="default: conll for CoNLL input, else jsonl",
    )
    predict.add_argument(
        "--tokenized",
        action="store_true",
        help="text input is already tokenised: split each line on whitespace, no tokenizer",
    )
    predict.add_argument(
        "--separator",
        default=None,
        metavar="SEP",
        help="CoNLL column separator (default: any whitespace; the added column copies a tab)",
    )

    evaluate = sub.add_parser(
        "evaluate",
        parents=[common],
        formatter_class=_formatter,
        help="score a model on a labelled CoNLL file (training's test report)",
        description="Score a model on a labelled CoNLL file and print the report training prints.",
    )
    model_options(evaluate)
    evaluate.add_argument("--input", required=True, metavar="FILE", help="a labelled CoNLL file")
    evaluate.add_argument("--tag-column", type=int, default=-1, metavar="N", help="default: last")
    evaluate.add_argument("--token-column", type=int, default=0, metavar="N", help="default: 0")
    evaluate.add_argument(
        "--scheme", default=None, help="the file's tagging scheme (default: the model's)"
    )
    evaluate.add_argument("--separator", default=None, metavar="SEP", help="default: whitespace")
    evaluate.add_argument("--output-json", default=None, metavar="FILE", help="also save as JSON")

    export = sub.add_parser(
        "export",
        parents=[common],
        formatter_class=_formatter,
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
    export.add_argument("--model", "--checkpoint", dest="model", required=True, metavar="PATH")
    export.add_argument("--output", required=True, metavar="FILE", help="e.g. decoder.pt2")
    export.add_argument(
        "--format", choices=EXPORT_FORMATS, help="default: onnx for a .onnx output, else torch"
    )
    export.add_argument(
        "--length", type=_positive, default=128, metavar="T", help="sequence length (default 128)"
    )

    sub.add_parser(
        "configs",
        parents=[common],
        help="list the configs shipped with crfhead",
        description="List the configs shipped with crfhead (for --config).",
    )

    plot = sub.add_parser(
        "plot",
        parents=[common],
        help="draw a run's learning curves to a PNG",
        description="Draw a run's learning curves (train/loss, val/loss, val/f1) from its metrics.csv.",
    )
    plot.add_argument("run", metavar="RUN", help="a run's version folder: runs/<name>/version_N")
    plot.add_argument("--output", metavar="PNG", help="default: RUN/learning_curves.png")

    from crfhead.lab.cli import add_arguments as lab_arguments  # argparse only: nothing heavy

    lab = sub.add_parser(
        "lab",
        formatter_class=_formatter,
        help="serve the interactive lab on 127.0.0.1 (--model PATH: your model on a sentence)",
        description="Serve the interactive lab on 127.0.0.1 (as python -m crfhead.lab does).",
    )
    lab_arguments(lab)
    return parser


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _plot(ns: argparse.Namespace) -> int:
    from crfhead.training.plot import plot_metrics

    print(plot_metrics(ns.run, ns.output))
    return 0


def _lab(ns: argparse.Namespace) -> int:
    from crfhead.lab.cli import serve

    return serve(ns)


# ----------------------------------------------------------------------------- entry points
def run(argv: Sequence[str] | None = None) -> int:
    """Run one command line; errors propagate as exceptions (``main`` reports them).

    Returns:
        The exit status (0).

    Raises:
        SystemExit: from argparse (``--help``, a usage error) or the training CLI.
        Exception: whatever the command raised.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    first = next((i for i, a in enumerate(args) if a != "--verbose"), len(args))
    if first < len(args) and args[first] in PASSTHROUGH:
        return _train(args[first], args[first + 1 :])
    parser = build_parser()
    ns = parser.parse_args(args)
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "predict": _predict,
        "evaluate": _evaluate,
        "export": _export,
        "configs": _configs,
        "plot": _plot,
        "lab": _lab,
    }
    if ns.command is None:
        parser.print_help(sys.stderr)
        return 2
    return commands[ns.command](ns)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``crfhead`` console script: :func:`run`, with errors reported in one line.

    Returns:
        0 on success; 2 for a usage error or bad input (a missing file, not a model, a malformed
        line), 1 for an unexpected error, 130 when interrupted; a training run's own status.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in args
    try:
        first = next((a for a in args if a != "--verbose"), None)
        if verbose or first in PASSTHROUGH:  # training's console is its own
            return run(args)
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return run(args)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()  # the reader went away (| head): not an error
        return 0
    except Exception as exc:
        if verbose:
            traceback.print_exc()
        user = isinstance(exc, (*_USER_ERRORS, _CommandError))
        print(f"{PROG}: error: {_one_line(exc, user)}", file=sys.stderr)
        return 2 if user else 1


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A warning as ``crfhead: warning: ...`` (what was read or skipped), without source lines."""
    print(f"{PROG}: warning: {message}", file=sys.stderr if file is None else file)


def _one_line(exc: BaseException, user: bool) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    message = lines[0] if lines else type(exc).__name__
    if len(lines) > 1:
        message += " (--verbose for the rest)"
    return message if user else f"{type(exc).__name__}: {message} (--verbose for the traceback)"


def _silence_stdout() -> None:
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _train(command: str, args: list[str]) -> int:
    from crfhead.training.cli import main as cli_main

    cli_main(args if command == "train" else [command, *args])
    return 0


# ----------------------------------------------------------------------------- reading input
@dataclass
class _Input:
    """What ``predict`` read: records to tag and, for CoNLL, the raw lines to echo."""

    name: str
    fmt: str
    items: list[str | list[str]] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)
    sentences: list[Sentence] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # CoNLL: every input line
    token_lines: list[int] = field(default_factory=list)  # CoNLL: indices of the token lines


def _source_lines(spec: str) -> tuple[list[str], str]:
    """The lines of ``spec`` (a path, or ``-`` for stdin) read as training data is, and its name.

    Raises:
        FileNotFoundError: no such file.
        IsADirectoryError: a folder.
        TextEncodingError: not UTF-8 (names the file, line and column).
    """
    from crfhead.data.textfile import read_lines

    if spec == "-":
        return _stdin_lines(), "<stdin>"
    path = Path(spec)
    if path.is_dir():
        raise IsADirectoryError(f"input is a folder, not a file: {path}")
    if not path.is_file():
        raise FileNotFoundError(f"input file not found: {path}")
    return read_lines(path), str(path)


def _stdin_lines() -> list[str]:
    """Stdin's lines with :func:`crfhead.data.textfile.read_lines`'s rules (BOM, UTF-8, newlines)."""
    from crfhead.data import textfile

    stream = sys.stdin
    data = stream.buffer.read() if hasattr(stream, "buffer") else stream.read().encode("utf-8")
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise textfile._encoding_error(Path("<stdin>"), data, err) from None
    lines = textfile._NEWLINE.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def _input_format(spec: str, given: str | None) -> str:
    if given is not None:
        return given
    return "text" if spec == "-" else _SUFFIX_FORMATS.get(Path(spec).suffix.lower(), "text")


def _split(line: str, separator: str | None) -> list[str]:
    return line.split(separator) if separator is not None else line.split()


def _read_input(
    spec: str, fmt: str, *, separator: str | None = None, tokenized: bool = False
) -> _Input:
    """Read ``predict``'s input: ``fmt`` is ``"text"``, ``"conll"`` or ``"jsonl"``.

    CoNLL is parsed by :mod:`crfhead.data.conll`'s reader without a tag column (so every check and
    warning of training data applies: column counts, a ``-DOCSTART-`` inside a sentence); its lines
    are kept to be echoed. Text and JSON lines skip blank lines.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a malformed line (CoNLL columns, JSON, a record without ``text`` or
            ``tokens``), naming the file and line; a file that is not UTF-8.
    """
    from crfhead.data import conll

    lines, name = _source_lines(spec)
    read = _Input(name=name, fmt=fmt)
    if fmt == "conll":
        sentences, report = conll._parse(
            lines,
            name=name,
            stem=Path(name).stem,
            token_col=0,
            tag_col=None,
            columns={},
            scheme="BIO",
            separator=separator,
            docstart=DOCSTART,
        )
        report.sentences, report.tokens = len(sentences), sum(len(s) for s in sentences)
        report.warn_if_changed()
        read.sentences, read.lines = sentences, lines
        read.token_lines = [
            i
            for i, line in enumerate(lines)
            if line.strip() and _split(line, separator)[0] != DOCSTART
        ]
        assert len(read.token_lines) == report.tokens  # every token line is one token
        read.ids = [s.id for s in sentences]
        return read
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        if fmt == "text":
            read.items.append(line.split() if tokenized else line)
            read.ids.append(where)
            continue
        item, ident = _json_record(line, where)
        read.items.append(item)
        read.ids.append(ident)
    return read


def _json_record(line: str, where: str) -> tuple[str | list[str], str | None]:
    """The text or tokens of one JSON line, and its ``id`` if it has one."""
    from crfhead.data.textfile import quote

    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: not JSON ({err.msg}): {quote(line)}") from None
    if not isinstance(record, dict):
        raise ValueError(f'{where}: expected an object with "text" or "tokens": {quote(line)}')
    ident = record.get("id")
    ident = None if ident is None else str(ident)
    tokens = record.get("tokens")
    if tokens is not None:
        if not isinstance(tokens, list) or not all(isinstance(t, str) and t for t in tokens):
            raise ValueError(f'{where}: "tokens" must be a list of non-empty strings')
        return list(tokens), ident
    text = record.get("text")
    if not isinstance(text, str):
        raise ValueError(f'{where}: expected "text" (a string) or "tokens": {quote(line)}')
    return text, ident


# ----------------------------------------------------------------------------- predict
def _load(path: str, device: str | None) -> TextTagger:
    """The model at ``path`` (:func:`crfhead.load`), with the command line's messages.

    Raises:
        FileNotFoundError: nothing at ``path``.
        ValueError: not a crfhead model (one line naming it).
    """
    import crfhead

    if not Path(path).exists():
        raise FileNotFoundError(
            f"checkpoint not found: {path} (give a .ckpt written by training or a folder written "
            "by TextTagger.save)"
        )
    return crfhead.load(path, device=device)


def _predict(ns: argparse.Namespace) -> int:
    fmt = _input_format(ns.input, ns.input_format)
    out_fmt = ns.output_format or ("conll" if fmt == "conll" else "jsonl")
    if ns.output != "-" and Path(ns.output).is_dir():
        raise IsADirectoryError(f"output is a folder, not a file: {ns.output}")
    tagger = _load(ns.model, ns.device)
    read = _read_input(ns.input, fmt, separator=ns.separator, tokenized=ns.tokenized)
    if tagger.tokenizer is None and any(isinstance(item, str) for item in read.items):
        raise ValueError(
            f"{ns.model}: the tokenizer this model was trained with is unknown, so raw text "
            "cannot be tokenised as its training data was; give tokens instead (--tokenized, "
            'CoNLL input, or JSON lines with "tokens")'
        )
    if fmt == "conll":
        tagged = tagger.predict_sentences(read.sentences, batch_size=ns.batch_size)
    else:
        tagged = tagger.annotate(read.items, batch_size=ns.batch_size)
    if out_fmt == "jsonl":
        lines = [_json_line(record, ident) for record, ident in zip(tagged, read.ids, strict=True)]
    elif fmt == "conll":
        lines = _conll_echo(read, tagged, ns.separator)
    else:
        lines = _conll_lines(tagged)
    _write(ns.output, lines)
    return 0


def _json_line(record: Tagged, ident: str | None) -> str:
    obj: dict[str, Any] = {} if ident is None else {"id": ident}
    obj.update(record.to_dict())
    return json.dumps(obj, ensure_ascii=False)


def _conll_echo(read: _Input, tagged: Sequence[Tagged], separator: str | None) -> list[str]:
    """Every input line; each token line with its predicted tag appended as a last column."""
    tags = [tag for record in tagged for tag in record.tags]
    if len(tags) != len(read.token_lines):
        raise AssertionError(f"{len(tags)} tags for {len(read.token_lines)} token lines")
    out = list(read.lines)
    for i, tag in zip(read.token_lines, tags, strict=True):
        line = out[i]
        if separator is None:
            line = line.rstrip()
            sep = "\t" if "\t" in line else " "
        else:
            sep = separator
        out[i] = f"{line}{sep}{tag}"
    return out


def _conll_lines(tagged: Sequence[Tagged]) -> list[str]:
    """``token tag`` lines (the token as written in the text), a blank line after each record."""
    out: list[str] = []
    for record in tagged:
        for token, tag in zip(record.tokens, record.tags, strict=True):
            surface = record.text[token.start : token.end] or token.text
            out.append(f"{'_'.join(surface.split()) or '_'} {tag}")
        out.append("")
    return out


def _write(spec: str, lines: Sequence[str]) -> None:
    text = "".join(f"{line}\n" for line in lines)
    if spec == "-":
        stream: TextIO = sys.stdout
        if hasattr(stream, "buffer"):
            stream.flush()
            stream.buffer.write(text.encode("utf-8"))
            stream.buffer.flush()
        else:
            stream.write(text)
        return
    path = Path(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


# ----------------------------------------------------------------------------- evaluate
def _evaluate(ns: argparse.Namespace) -> int:
    import dataclasses

    import torch

    from crfhead.data.batching import collator_for
    from crfhead.data.conll import read_conll
    from crfhead.evaluation.metrics import TaggingMetrics
    from crfhead.evaluation.report import format_report, write_report_json

    tagger = _load(ns.model, ns.device)
    scheme = tagger.scheme or "BIO"
    path = Path(ns.input)
    if path.is_dir():
        raise IsADirectoryError(f"input is a folder, not a file: {path}")
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
    known = set(tagger.labels)
    unknown = sorted({t for s in sentences for t in s.tags or () if t not in known})
    if unknown:
        # Scored all the same (those gold entities are misses); the log-loss needs every gold tag.
        print(
            f"{PROG}: note: gold tags the model does not have: {unknown[:10]}; "
            "no log-loss reported",
            file=sys.stderr,
        )
    vocabs = tagger.vocabs
    seen = vocabs.get("seen_words")
    metrics = TaggingMetrics(scheme, None if seen is None else set(seen))
    collate = collator_for(vocabs, tagger.model.needs)
    device = tagger.device
    model = tagger.model.eval()
    for i in range(0, len(sentences), ns.batch_size):
        chunk = sentences[i : i + ns.batch_size]
        gold = [list(s.tags or ()) for s in chunk]
        if unknown:
            chunk = [dataclasses.replace(s, tags=None) for s in chunk]
        batch = collate(chunk).to(device)
        with torch.inference_mode():
            if unknown:
                pred, nll = model.predict(batch), None
            else:
                pred, nll = model.decode_with_loss(batch)
        metrics.update(
            gold,
            pred,
            [s.tokens for s in chunk],
            log_loss=nll,
            num_tokens=None if nll is None else int(batch.mask.sum()),
        )
    report = metrics.compute()
    types = {lab.split("-", 1)[1] for lab in tagger.labels if "-" in lab}
    types |= {key[: -len("/f1")] for key in report if key.endswith("/f1")}
    print(
        f"{path}: {len(sentences)} sentences, {sum(len(s) for s in sentences)} tokens, "
        f"scored with {ns.model}",
        file=sys.stderr,
    )
    print(format_report(report, sorted(types)))
    if ns.output_json:
        write_report_json(report, ns.output_json)
        print(f"{PROG}: report written to {ns.output_json}", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------- export
def _export(ns: argparse.Namespace) -> int:
    import logging

    import torch
    from torch import Tensor, nn

    out = Path(ns.output)
    fmt = ns.format or ("onnx" if out.suffix.lower() == ".onnx" else "torch")
    if fmt == "onnx":
        try:
            import onnx  # noqa: F401
            import onnxscript  # noqa: F401
        except ImportError as err:
            raise _CommandError(
                f"ONNX export needs onnx and onnxscript ({err.name} is not installed): "
                "pip install 'crfhead[onnx]', or use --format torch"
            ) from None
    if out.is_dir():
        raise IsADirectoryError(f"output is a folder, not a file: {out}")
    tagger = _load(ns.model, "cpu")
    head = tagger.model.head.eval()

    class Decoder(nn.Module):
        """The head's decoder: emissions ``(B, T, K)``, mask ``(B, T)`` → paths ``(B, T)``."""

        def __init__(self) -> None:
            super().__init__()
            self.head = head

        def forward(self, emissions: Tensor, mask: Tensor) -> Tensor:
            paths: Tensor = self.head.predict(emissions, mask)
            return paths

    module = Decoder().eval()
    labels = list(tagger.labels)
    example = (
        torch.randn(2, ns.length, len(labels)),
        torch.ones(2, ns.length, dtype=torch.bool),
    )
    batch = torch.export.Dim("batch")
    dynamic: dict[str, dict[int, Any]] = {"emissions": {0: batch}, "mask": {0: batch}}
    # torch: the length is dynamic too where the decoder runs as the cpu kernel's custom ops (one
    # program for every T); ONNX (no such ops) and decoders that loop over time in Python fix it.
    length = torch.export.Dim("length", min=1)
    varying = {"emissions": {0: batch, 1: length}, "mask": {0: batch, 1: length}}
    if ns.length == 1:
        varying = dynamic  # an example of length 1 would specialise T
    meta = {
        "labels": labels,
        "scheme": tagger.scheme,
        "length": ns.length,
        "head": type(head).__name__,
        "decoder": getattr(head, "decoder", "viterbi"),
        "inputs": {"emissions": ["B", ns.length, len(labels)], "mask": ["B", ns.length]},
    }
    print(
        f"{PROG}: exporting the {meta['decoder']} decoder of the {meta['head']} head "
        f"(T = {ns.length}, K = {len(labels)})",
        file=sys.stderr,
    )
    if tagger.model.decoder is not None:
        print(
            f"{PROG}: note: the model's group decoder ({type(tagger.model.decoder).__name__}) is "
            "not exported; the program decodes each sentence alone",
            file=sys.stderr,
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        if fmt == "torch":
            try:
                program = torch.export.export(module, example, dynamic_shapes=varying)
                meta["dynamic_length"] = varying is not dynamic
            except Exception as err:  # a decoder that loops over time in Python
                if ns.verbose:
                    print(f"{PROG}: fixed length T = {ns.length}: {err}", file=sys.stderr)
                program = torch.export.export(module, example, dynamic_shapes=dynamic)
                meta["dynamic_length"] = False
            if meta["dynamic_length"]:
                meta["inputs"] = {"emissions": ["B", "T", len(labels)], "mask": ["B", "T"]}
            torch.export.save(program, out, extra_files={"labels.json": json.dumps(meta)})
        else:
            quiet = None if ns.verbose else logging.getLogger("torch.onnx")
            level = quiet.level if quiet is not None else 0
            if quiet is not None:
                quiet.setLevel(logging.ERROR)  # "torchvision is not installed" and the like
            try:
                with warnings.catch_warnings():
                    if not ns.verbose:
                        warnings.simplefilter("ignore")
                    onnx_program = torch.onnx.export(
                        module,
                        example,
                        dynamo=True,
                        dynamic_shapes=dynamic,
                        input_names=["emissions", "mask"],
                        output_names=["paths"],
                        verbose=False,
                    )
            finally:
                if quiet is not None:
                    quiet.setLevel(level)
            if onnx_program is None:
                raise RuntimeError("torch.onnx.export returned no program")
            onnx_program.model.metadata_props["crfhead"] = json.dumps(meta)
            onnx_program.save(str(out))
    print(f"{PROG}: wrote {out}", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------- configs
def _config_files() -> tuple[str, list[tuple[str, str]]]:
    """Where the configs are, and each config's name and first comment line."""
    from importlib import resources

    root: Any = resources.files("crfhead").joinpath("configs")
    where = "crfhead:"
    if not root.is_dir():
        root = Path(__file__).resolve().parents[1] / "configs"  # a source checkout
        where = str(root)
        if not root.is_dir():
            return where, []
    found: list[tuple[str, str]] = []

    def walk(node: Any, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith((".yaml", ".yml")):
                found.append((prefix + child.name, _description(child.read_text("utf-8"))))

    walk(root, "")
    return where, found


def _description(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        return stripped.lstrip("#").strip() if stripped.startswith("#") else ""
    return ""


def _configs(ns: argparse.Namespace) -> int:
    where, found = _config_files()
    if not found:
        raise FileNotFoundError(f"no configs found (looked in the package and {where})")
    width = max(len(name) for name, _ in found)
    for name, text in found:
        print(f"{name:<{width}}  {text}".rstrip())
    if where == "crfhead:":
        print(f"({len(found)} configs in the package: --config crfhead:NAME)", file=sys.stderr)
    else:
        print(f"({len(found)} configs in {where}: --config {where}/NAME)", file=sys.stderr)
    return 0
