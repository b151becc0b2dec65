"""Tag text with a trained model: ``python predict.py --checkpoint runs/.../last.ckpt --input FILE``.

A thin wrapper over ``crfhead predict`` (:mod:`crfhead.cli.predict`), kept so that existing command lines
work: ``--checkpoint`` is ``--model`` (a ``.ckpt`` or a folder written by ``TextTagger.save``), and
``--input``, ``--input-format`` (``text``, the default here, ``conll``, ``jsonl``), ``--output`` and
``--output-format`` (``jsonl``, the default here, or ``conll``) are the same flags; ``crfhead predict
--help`` lists them all. Raw text is split
by the tokenizer the model was trained with, CoNLL output keeps every input column and appends the
prediction, JSON lines carry each entity's character offsets and exact span probability.

:func:`main` raises on errors (for use from Python); run as a script, errors are one line on stderr
and exit status 2. :func:`read_input` reads input files as ``crfhead predict`` and training do
(:func:`crfhead.data.inputs.read_input`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from crfhead.cli import main as console_main
from crfhead.cli import run
from crfhead.data import inputs
from crfhead.data.sentence import Sentence

__all__ = ["main", "read_input"]


def read_input(path: Path, fmt: str) -> list[Sentence]:
    """Sentences to tag: ``fmt`` is ``"conll"`` (first column the token) or ``"text"`` (split on whitespace).

    Raises:
        FileNotFoundError: the file does not exist.
        TextEncodingError: the file is not UTF-8 (a :class:`ValueError` naming file and line).
        CoNLLFormatError: a CoNLL line whose column count differs from the first line's.
    """
    read = inputs.read_input(str(path), fmt, tokenized=True)
    if fmt == "conll":
        return read.sentences
    return [
        Sentence(list(item), id=ident)
        for item, ident in zip(read.items, read.ids, strict=True)
        if not isinstance(item, str)
    ]


def _arguments(argv: list[str]) -> list[str]:
    """``crfhead predict``'s arguments, with this script's defaults: text in, JSON lines out."""
    given = {a.split("=", 1)[0] for a in argv}
    defaults = {"--input-format": "text", "--output-format": "jsonl"}
    extra = [x for flag, value in defaults.items() if flag not in given for x in (flag, value)]
    return ["predict", *argv, *extra]


def main(argv: list[str] | None = None) -> None:
    """``crfhead predict`` with these arguments; errors are raised, not printed."""
    run(_arguments(list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    raise SystemExit(console_main(_arguments(sys.argv[1:])))
